// defines: bench::is_hf_config, hf_config_file, read_hf_config — a Hugging Face config.json as the
//          keys of an experiment's [model] table (docs/experiments.md, "Hugging Face configs")
//
// The reader knows the configuration classes of eleven model types (llama, mistral, qwen2, gemma,
// gemma2, olmo, olmo2, phi3, gpt2, gpt_neox, falcon) and maps each field it reads to our model
// keys and component options (hf_reader.h: absent fields take the class's default, null ones
// what transformers makes of them). A field it does not know, or a value it cannot reproduce (a
// sliding window on some layers only, ALiBi, ...), is an error naming the field at its line in
// the file: nothing that changes the computation is silently ignored. The fields that do not
// change it (token ids, torch_dtype, use_cache, ...) are listed in hf_reader.cpp and accepted.
#pragma once

#include <string>

#include "bench/value.h"

namespace bench {

/// Whether `path` names a Hugging Face configuration: a .json file, or a directory holding a
/// config.json.
bool is_hf_config(const std::string& path);

/// The config.json that `path` names: the file itself, or `path`/config.json for a directory.
std::string hf_config_file(const std::string& path);

/// The [model] table of the configuration at `path` (a config.json or its directory): our model
/// keys and slot tables ({type = ..., options}), each value located at its field in the file, and
/// `weight_names` naming the checkpoint layout of the model type. Throws ConfigErrors listing
/// every unsupported field or value, each at file:line:col.
Value read_hf_config(const std::string& path);

}  // namespace bench
