// defines: bench::CheckpointTensor, checkpoint_layout, save_weights, load_weights — a model's
//          weights as safetensors under Hugging Face names: Llama's by default, or those of
//          OLMo 2, Phi-3, GPT-2, GPT-NeoX and Falcon (ModelSpec::weight_names; docs/weights.md)
//
// Every parameter maps to one or more tensors of the file. Matrices are stored [out, in]
// (PyTorch Linear) in both (GPT-2's Conv1D stores them [in, out]: transposed), so a mapping is a
// name and, for fused parameters, a block of rows:
// the attention's fused wqkv splits into q_proj, k_proj and v_proj, a gated FFN's fused w_in
// into gate_proj and up_proj (their biases bqkv and b_in by elements alike). The names follow the parameter names the
// components declare, not the components' names, so the harness still knows no variant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"

namespace bench {

/// One tensor of a checkpoint: rows [row_begin, row_begin + rows) of parameter `param`.
struct CheckpointTensor {
  std::string name;   ///< in the file, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::string param;  ///< in the model, e.g. "blocks.0.attn.wqkv"
  int64_t row_begin = 0;
  int64_t rows = 0;
  std::vector<int64_t> shape;  ///< in the file
  /// Rows of a fused tensor stored in another order than the parameter's (GPT-NeoX's and Falcon's
  /// per-head interleaved query_key_value): blocks of `rows` rows, file row -> parameter row, that
  /// cover the tensor. Empty: the tensor's rows are the parameter's rows from row_begin, in order.
  struct RowBlock {
    int64_t file_row = 0;
    int64_t param_row = 0;
    int64_t rows = 0;
  };
  std::vector<RowBlock> blocks;
  /// The file holds the parameter's [rows, cols] matrix as its transpose [cols, rows] (GPT-2's
  /// Conv1D weights, stored [in, out]); the tensor is the whole parameter then.
  bool transposed = false;
};

/// The file name of a parameter that maps to a single tensor ("embed.weight" ->
/// "model.embed_tokens.weight") under the names of `names` (ModelSpec::weight_names: "llama",
/// "olmo2", "phi3", "gpt2", "gpt_neox", "falcon"); fused parameters are split by checkpoint_layout.
std::string checkpoint_name(std::string_view param, std::string_view names = "llama");

/// Every tensor a checkpoint of `model` holds, in the model's parameter order, under the names
/// and layouts of its spec's weight_names.
std::vector<CheckpointTensor> checkpoint_layout(const Model& model);

/// Write the model's weights to `path` as safetensors with element type `dtype` (F32, BF16,
/// F16 or F64).
void save_weights(const Model& model, const std::string& path, std::string_view dtype = "F32");

/// Read weights from `path` into `model`: a .safetensors file, a sharded checkpoint's
/// model.safetensors.index.json, or a directory holding either (Hugging Face's layout). Every tensor the model needs
/// must be present with its shape and a float dtype (converted to the model's), and the file may hold nothing else (a
/// tied model accepts an lm_head.weight equal to the embedding). Throws bench::Error listing every mismatch by name;
/// the model is left unchanged then.
void load_weights(Model& model, const std::string& path);

}  // namespace bench
