#include "experiment/schema.h"

namespace bench::schema {

std::vector<std::string> top_level_keys(const RunnerSections& runners) {
  std::vector<std::string> keys = {"name",     "description",    "device",          "seed",
                                   "threads",  "plugin_paths",   "model",           "variant",
                                   "data",     "match",          "match_reference", "match_width",
                                   "match_by", "match_multiple", "match_tolerance"};
  for (const auto& r : runners) keys.push_back(r.name);
  keys.insert(keys.end(), {"cpu", "cuda"});
  return keys;
}

std::vector<std::string> override_keys(const RunnerSections& runners) {
  std::vector<std::string> keys = {"model", "data"};
  for (const auto& r : runners) keys.push_back(r.name);
  keys.emplace_back("seed");
  return keys;
}

const RunnerSection* find_runner(const RunnerSections& runners, std::string_view name) {
  for (const auto& r : runners)
    if (r.name == name) return &r;
  return nullptr;
}

const std::vector<ParamSpec>& model_params() {
  static const std::vector<ParamSpec> specs = {
      ParamSpec::integer("vocab_size", 0, "vocabulary size; 0 takes the dataset's").at_least(0),
      ParamSpec::integer("d_model", 128, "width of the residual stream").at_least(1),
      ParamSpec::integer("n_layers", 4, "number of blocks").at_least(1),
      ParamSpec::integer("n_heads", 4, "query heads").at_least(1),
      ParamSpec::integer("n_kv_heads", 0, "key/value heads; 0 = n_heads (MHA), 1 = MQA, else GQA").at_least(0),
      ParamSpec::integer("d_head", 0, "width of a head; 0 = d_model / n_heads").at_least(0),
      ParamSpec::integer("seq_len", 128, "tokens per sequence").at_least(1),
      ParamSpec::integer("batch_size", 16, "sequences per step").at_least(1),
      ParamSpec::choice("dtype", "float32", {"float32", "bfloat16", "float64"},
                        "parameter and activation dtype (bfloat16: float master weights, float accumulation)"),
      ParamSpec::number("init_std", 0.02, "standard deviation of the normal weight init").at_least(0),
      ParamSpec::boolean("tie_embeddings", false, "share the token embedding with the LM head"),
      ParamSpec::choice("final_norm", "auto", {"auto", "on", "off"},
                        "norm before the LM head; auto = as the norm position prefers (off for post-norm)"),
      ParamSpec::choice("weight_names", "llama", {"llama", "olmo2", "phi3", "gpt2", "gpt_neox", "falcon"},
                        "Hugging Face tensor names and layouts of checkpoints (docs/weights.md); set by a "
                        "config.json's model_type"),
      ParamSpec::number("dropout_embedding", 0.0, "dropout rate on the embeddings while training")
          .at_least(0)
          .at_most(0.99),
      ParamSpec::number("dropout_attention", 0.0, "dropout rate on the attention probabilities")
          .at_least(0)
          .at_most(0.99),
      ParamSpec::number("dropout_residual", 0.0, "dropout rate on each sublayer output before the residual add")
          .at_least(0)
          .at_most(0.99),
  };
  return specs;
}

const std::vector<std::pair<std::string, Slot>>& model_slots() {
  static const std::vector<std::pair<std::string, Slot>> slots = {{"embedding", Slot::kEmbedding},
                                                                  {"position", Slot::kPosition},
                                                                  {"block", Slot::kBlock},
                                                                  {"norm_position", Slot::kNormPosition},
                                                                  {"norm", Slot::kNorm},
                                                                  {"attention", Slot::kAttention},
                                                                  {"ffn", Slot::kFfn},
                                                                  {"head", Slot::kHead}};
  return slots;
}

std::optional<Slot> model_slot(std::string_view key) {
  for (const auto& [k, s] : model_slots())
    if (k == key) return s;
  return std::nullopt;
}

}  // namespace bench::schema
