// defines: bench::EvalResult, evaluate_tokens, read_eval_tokens, write_npy — the loss of a model
//          over every token of a file (`bench eval`), with optional logits and hidden states
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace bench {

class Registry;

/// The result of evaluating a token stream of N tokens: N - 1 predicted positions.
struct EvalResult {
  double loss = 0;             ///< mean cross-entropy over the positions, nats/token
  int64_t positions = 0;       ///< N - 1
  int64_t windows = 0;         ///< forward passes of seq_len positions (the last one padded)
  std::vector<double> logits;  ///< [positions, vocab] when asked for
  std::vector<double> hidden;  ///< [n_layers, positions, d_model] when asked for: each block's output
};

/// Evaluate `tokens` in consecutive windows of the model's seq_len positions (inputs
/// tokens[s, s + T), targets shifted by one; each window starts a fresh context at position 0),
/// batch_size windows per forward, the last batch padded with ignored targets.
EvalResult evaluate_tokens(Model& model, const std::vector<int32_t>& tokens, bool keep_logits, bool keep_hidden,
                           RunContext& ctx);

/// Every token of `path` through the data plugin that reads its `format`: "llmc", "uint16",
/// "uint32" (plugin `tokens`, checked against `vocab_size`) or "text" (plugin `text`, bytes);
/// "auto" picks llmc for a file that starts with the llm.c magic, text for .txt, else uint16.
std::vector<int32_t> read_eval_tokens(const Registry& registry, const std::string& path, std::string format,
                                      int64_t vocab_size);

/// Write a little-endian NumPy .npy file (format 1.0) of `shape`, as float32 ("<f4") or float64.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<double>& values,
               bool float64);

}  // namespace bench
