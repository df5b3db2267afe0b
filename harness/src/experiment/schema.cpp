#include "experiment/schema.h"

namespace bench::schema {

const std::vector<std::string>& top_level_keys() {
  static const std::vector<std::string> keys = {"name",         "description", "device",  "seed", "threads",
                                                "plugin_paths", "model",       "variant", "data", "throughput",
                                                "stability",    "cpu",         "cuda"};
  return keys;
}

const std::vector<std::string>& override_keys() {
  static const std::vector<std::string> keys = {"model", "data", "throughput", "stability", "seed"};
  return keys;
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

std::string_view default_component(Slot slot) {
  switch (slot) {
    case Slot::kEmbedding:
      return "token";
    case Slot::kPosition:
      return "rope";
    case Slot::kBlock:
      return "serial";
    case Slot::kNormPosition:
      return "pre";
    case Slot::kNorm:
      return "rmsnorm";
    case Slot::kAttention:
      return "causal";
    case Slot::kFfn:
      return "swiglu";
    case Slot::kHead:
      return "lm_head";
    case Slot::kDataset:
      return "synthetic";
  }
  return "";
}

const std::vector<std::string>& runners() {
  static const std::vector<std::string> r = {"throughput", "stability"};
  return r;
}

const std::vector<ParamSpec>& runner_params(std::string_view runner) {
  static const std::vector<ParamSpec> throughput = {
      ParamSpec::strings("modes", {"forward", "forward_backward", "train_step"},
                         {"forward", "forward_backward", "train_step"}, "what to time"),
      ParamSpec::integer("repetitions", 5, "timed repetitions (median and spread over these)").at_least(1),
      ParamSpec::number("min_time", 0.2, "seconds each repetition runs at least").at_least(0),
      ParamSpec::number("warmup_time", 0.1, "seconds of untimed warm-up before the repetitions").at_least(0),
      ParamSpec::number("lr", 1e-3, "learning rate used by the timed train steps").at_least(0),
      ParamSpec::boolean("cuda_graph", false,
                         "on CUDA, capture each mode's step into a CUDA graph once and time its replays "
                         "(no launch overhead); ignored on the CPU"),
  };
  static const std::vector<ParamSpec> stability = {
      ParamSpec::integer("steps", 200, "optimizer steps").at_least(1),
      ParamSpec::number("lr", 3e-3, "peak learning rate").at_least(0),
      ParamSpec::number("warmup_fraction", 0.05, "linear warm-up as a fraction of the steps").at_least(0).at_most(1),
      ParamSpec::integer("warmup_steps", 0, "linear warm-up steps; overrides warmup_fraction when > 0").at_least(0),
      ParamSpec::choice("schedule", "cosine", {"cosine", "linear", "constant"}, "decay after warm-up"),
      ParamSpec::number("min_lr_ratio", 0.1, "final learning rate / peak").at_least(0).at_most(1),
      ParamSpec::number("weight_decay", 0.1, "AdamW weight decay of the decay group").at_least(0),
      ParamSpec::choice("weight_decay_mode", "coupled", {"coupled", "independent"},
                        "coupled: p *= 1 - lr*wd (PyTorch); independent: p *= 1 - wd*lr/peak_lr"),
      ParamSpec::number("beta1", 0.9, "AdamW beta1").at_least(0).at_most(1),
      ParamSpec::number("beta2", 0.95, "AdamW beta2").at_least(0).at_most(1),
      ParamSpec::number("eps", 1e-8, "AdamW epsilon").at_least(0),
      ParamSpec::number("grad_clip", 1.0, "clip the global grad norm to this; 0 = off").at_least(0),
      ParamSpec::strings("weight_decay_groups", {"matrix", "embedding"},
                         {"matrix", "embedding", "gain", "bias", "other"},
                         "parameter groups that weight decay applies to"),
      ParamSpec::integers("eval_lengths", {},
                          "after training, also evaluate the held-out loss at these context lengths (e.g. 2x, 4x)"),
      ParamSpec::integer("log_every", 1, "record a step every this many steps").at_least(1),
      ParamSpec::boolean("save_weights", false,
                         "keep the final weights as safetensors next to the database (table artifacts)"),
      ParamSpec::integer("eval_batches", 8, "held-out batches for the final validation loss").at_least(0),
      ParamSpec::integer("val_every", 0,
                         "also record the held-out loss (val_batches batches) every this many steps; 0 = off")
          .at_least(0),
      ParamSpec::integer("val_batches", 2, "held-out batches of each val_every evaluation").at_least(1),
      ParamSpec::integer("init_probe_batches", 0,
                         "before training, average per-layer gradient norms and activation RMS at initialization "
                         "over this many batches (x init_probe_seeds); 0 = off")
          .at_least(0),
      ParamSpec::integer("init_probe_seeds", 1, "initializations (seed, seed+1, ...) the init probe averages over")
          .at_least(1),
      ParamSpec::integer("spike_window", 50, "trailing window of the spike detector (steps)").at_least(2),
      ParamSpec::number("spike_sigma", 7.0, "a spike exceeds the window mean by this many standard deviations")
          .at_least(0),
  };
  return runner == "throughput" ? throughput : stability;
}

}  // namespace bench::schema
