// The GPT-style model types of read_hf_config: gpt2, gpt_neox, falcon (hf_reader.h).
#include <nlohmann/json.hpp>

#include "experiment/hf_reader.h"

namespace bench::hf {

void gpt2(Reader& r, Value& m) {
  // GPT2Config's attribute_map lets hidden_size, num_hidden_layers, num_attention_heads and
  // max_position_embeddings stand for n_embd, n_layer, n_head and n_positions.
  const auto name = [&](const char* ours, const char* alias) { return r.has(alias) && !r.has(ours) ? alias : ours; };
  const std::string d_key = name("n_embd", "hidden_size"), layers_key = name("n_layer", "num_hidden_layers");
  const std::string heads_key = name("n_head", "num_attention_heads");
  const std::string pos_key = name("n_positions", "max_position_embeddings");
  const int64_t d = r.integer(d_key, 768);
  m["d_model"] = r.at(d_key, Value::integer(d));
  m["n_layers"] = r.at(layers_key, Value::integer(r.integer(layers_key, 12)));
  m["n_heads"] = r.at(heads_key, Value::integer(r.integer(heads_key, 12)));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.integer("vocab_size", 50257)));
  m["seq_len"] = r.at(pos_key, Value::integer(r.integer(pos_key, 1024)));
  r.take("n_ctx");  // the old name of n_positions, unused by transformers
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", true)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attn_pdrop", Value::number(r.number("attn_pdrop", 0.1)));
  m["dropout_embedding"] = r.at("embd_pdrop", Value::number(r.number("embd_pdrop", 0.1)));
  m["dropout_residual"] = r.at("resid_pdrop", Value::number(r.number("resid_pdrop", 0.1)));
  // The sequence-summary head of GPT2DoubleHeadsModel, not part of the language model.
  for (const char* key :
       {"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout"})
    r.take(key);
  r.expect("scale_attn_weights", true, "attention scores not divided by sqrt(d_head)");
  r.expect("scale_attn_by_inverse_layer_idx", false, "attention scores divided by the layer index + 1");
  r.expect("add_cross_attention", false, "cross-attention to an encoder");
  r.boolean("reorder_and_upcast_attn", false);  // the precision of the attention product only
  Value norm = Value::table({}, r.loc("layer_norm_epsilon"));
  norm["type"] = Value::string("layernorm");
  norm["eps"] = r.at("layer_norm_epsilon", Value::number(r.number("layer_norm_epsilon", 1e-5)));
  norm["bias"] = Value::boolean(true);
  m["norm"] = norm;
  m["norm_position"] = Value::string("pre");
  m["block"] = Value::string("serial");
  m["position"] = Value::string("learned");  // wpe: [n_positions, n_embd]
  Value attn = Value::table();
  attn["type"] = Value::string("causal");
  attn["bias"] = Value::string("all");  // c_attn and c_proj are Conv1D with biases
  m["attention"] = attn;
  Value ffn = Value::table({}, r.loc("activation_function"));
  ffn["type"] = Value::string("mlp");
  ffn["activation"] = r.at("activation_function", Value::string(activation(r, "activation_function", "gelu_new")));
  // n_inner null or absent: 4 n_embd.
  ffn["d_ff"] = r.at("n_inner", Value::integer(r.integer("n_inner", 4 * d)));
  ffn["bias"] = Value::boolean(true);
  m["ffn"] = ffn;
  m["weight_names"] = Value::string("gpt2");
}

void gpt_neox(Reader& r, Value& m) {
  m["d_model"] = r.at("hidden_size", Value::integer(r.required("hidden_size")));
  m["n_layers"] = r.at("num_hidden_layers", Value::integer(r.required("num_hidden_layers")));
  m["n_heads"] = r.at("num_attention_heads", Value::integer(r.required("num_attention_heads")));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", false)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  m["dropout_residual"] = r.at("hidden_dropout", Value::number(r.number("hidden_dropout", 0.0)));
  Value norm = Value::table({}, r.loc("layer_norm_eps"));
  norm["type"] = Value::string("layernorm");
  norm["eps"] = r.at("layer_norm_eps", Value::number(r.number("layer_norm_eps", 1e-5)));
  m["norm"] = norm;
  m["norm_position"] = Value::string("pre");
  Value block = Value::table({}, r.loc("use_parallel_residual"));
  // use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)); else the serial pre-norm block.
  if (r.boolean("use_parallel_residual", true)) {
    block["type"] = Value::string("parallel");
    block["norms"] = Value::string("per_branch");
  } else {
    block["type"] = Value::string("serial");
  }
  m["block"] = block;
  const std::string fraction_key = r.has("partial_rotary_factor") ? "partial_rotary_factor" : "rotary_pct";
  if (fraction_key == "partial_rotary_factor") r.take("rotary_pct");
  const std::string base_key = r.has("rope_theta") ? "rope_theta" : "rotary_emb_base";
  if (base_key == "rope_theta") r.take("rotary_emb_base");
  Value rope = rope_table(r, 10000.0, base_key, fraction_key);
  if (!rope.find("rotary_fraction")) rope["rotary_fraction"] = Value::number(0.25);  // GPTNeoXConfig's default
  m["position"] = rope;
  Value attn = Value::table();
  attn["type"] = Value::string("causal");
  attn["bias"] = r.at("attention_bias", Value::string(r.boolean("attention_bias", true) ? "all" : "none"));
  m["attention"] = attn;
  Value ffn = Value::table({}, r.loc("intermediate_size"));
  ffn["type"] = Value::string("mlp");
  ffn["activation"] = r.at("hidden_act", Value::string(activation(r, "hidden_act", "gelu")));
  ffn["d_ff"] = r.at("intermediate_size", Value::integer(r.required("intermediate_size")));
  ffn["bias"] = Value::boolean(true);
  m["ffn"] = ffn;
  m["weight_names"] = Value::string("gpt_neox");
}

void falcon(Reader& r, Value& m) {
  // The legacy RefinedWeb names (n_layer, n_head) are read as their new ones.
  const std::string layers_key = r.has("n_layer") ? "n_layer" : "num_hidden_layers";
  const std::string heads_key = r.has("n_head") ? "n_head" : "num_attention_heads";
  const int64_t d = r.required("hidden_size");
  m["d_model"] = r.at("hidden_size", Value::integer(d));
  m["n_layers"] = r.at(layers_key, Value::integer(r.required(layers_key)));
  const int64_t heads = r.required(heads_key);
  m["n_heads"] = r.at(heads_key, Value::integer(heads));
  r.expect("new_decoder_architecture", false, "Falcon 40B/180B's grouped layout and two norms per block");
  r.expect("alibi", false, "ALiBi positions");
  r.expect("apply_residual_connection_post_layernorm", false, "the residual taken after the norm");
  const bool mq = r.boolean("multi_query", true);
  const int64_t kv = r.integer("num_kv_heads", mq ? 1 : heads);
  if (mq && kv != 1) r.fail("num_kv_heads", "field 'num_kv_heads' must be 1 with multi_query");
  m["n_kv_heads"] = r.at(r.has("num_kv_heads") ? "num_kv_heads" : "multi_query", Value::integer(kv));
  m["vocab_size"] = r.at("vocab_size", Value::integer(r.required("vocab_size")));
  m["seq_len"] = r.at("max_position_embeddings", Value::integer(r.integer("max_position_embeddings", 2048)));
  m["tie_embeddings"] = r.at("tie_word_embeddings", Value::boolean(r.boolean("tie_word_embeddings", true)));
  m["init_std"] = r.at("initializer_range", Value::number(r.number("initializer_range", 0.02)));
  m["dropout_attention"] = r.at("attention_dropout", Value::number(r.number("attention_dropout", 0.0)));
  m["dropout_residual"] = r.at("hidden_dropout", Value::number(r.number("hidden_dropout", 0.0)));
  Value norm = Value::table({}, r.loc("layer_norm_epsilon"));
  norm["type"] = Value::string("layernorm");
  norm["eps"] = r.at("layer_norm_epsilon", Value::number(r.number("layer_norm_epsilon", 1e-5)));
  m["norm"] = norm;
  m["norm_position"] = Value::string("pre");
  // parallel_attn: x + attn(ln(x)) + mlp(ln(x)) with one shared norm; else the serial block.
  m["block"] = r.at("parallel_attn", Value::string(r.boolean("parallel_attn", true) ? "parallel" : "serial"));
  if (r.has("num_ln_in_parallel_attn") && r.integer("num_ln_in_parallel_attn", 1) != 1)
    r.fail("num_ln_in_parallel_attn", "field 'num_ln_in_parallel_attn' must be 1 or null");
  m["position"] = rope_table(r, 10000.0, "rope_theta", "partial_rotary_factor");
  const bool bias = r.boolean("bias", false);
  Value attn = Value::table();
  attn["type"] = Value::string("causal");
  if (bias) attn["bias"] = r.at("bias", Value::string("all"));
  m["attention"] = attn;
  Value ffn = Value::table();
  ffn["type"] = Value::string("mlp");
  ffn["activation"] = r.at("activation", Value::string(activation(r, "activation", "gelu")));
  ffn["d_ff"] = r.at("ffn_hidden_size", Value::integer(r.integer("ffn_hidden_size", 4 * d)));
  if (bias) ffn["bias"] = Value::boolean(true);
  m["ffn"] = ffn;
  m["weight_names"] = Value::string("falcon");
}

}  // namespace bench::hf
