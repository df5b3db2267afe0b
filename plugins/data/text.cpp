// Plain text as bytes: vocabulary 256, windows drawn from the first (1 - validation_fraction) of
// the file for training and from the rest for validation.
#include <filesystem>
#include <fstream>
#include <mutex>

#include "data.h"

namespace bench::data {

class TextBytes final : public Dataset {
 public:
  explicit TextBytes(const Params& p)
      : path_(p.path("path")),
        path_loc_(p.where("path")),
        validation_(p.number("validation_fraction")),
        seed_(static_cast<uint64_t>(p.integer("seed"))) {}

  int64_t vocab_size() const override { return 256; }

  void validate(const ModelDims& d) const override {
    std::error_code ec;
    if (path_.empty()) throw ConfigError(path_loc_, "the text dataset needs a path");
    if (!std::filesystem::is_regular_file(path_, ec)) throw ConfigError(path_loc_, "no such file: " + path_);
    const auto size = static_cast<int64_t>(std::filesystem::file_size(path_, ec));
    const auto need = static_cast<int64_t>(static_cast<double>(d.seq_len + 2) / std::min(validation_, 1 - validation_));
    if (size < need)
      throw ConfigError(path_loc_, path_ + " has " + std::to_string(size) + " bytes; seq_len " +
                                       std::to_string(d.seq_len) + " needs at least " + std::to_string(need));
  }

  void batch(Split split, int64_t index, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) override {
    load();
    stream_.batch(split, index, batch, seq, seed_, inputs, targets);
  }

  std::vector<std::pair<std::string, double>> reference() const override {
    load();
    return stream_.reference(256);
  }

  std::vector<int32_t> all_tokens() const override {
    load();
    return stream_.tokens();
  }

 private:
  void load() const {
    std::call_once(loaded_, [&] {
      const std::vector<char> bytes = read_file(path_);
      std::vector<int32_t> tokens(bytes.size());
      for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
      stream_.assign(std::move(tokens), validation_);
    });
  }

  std::string path_;
  SourceLoc path_loc_;
  double validation_;
  uint64_t seed_;
  mutable std::once_flag loaded_;
  mutable TokenStream stream_;
};

ComponentInfo text_info() {
  return make_info<TextBytes>(Slot::kDataset, "text", "a plain text file read as bytes (vocabulary 256)",
                              {ParamSpec::string("path", "", "text file, relative to the experiment file"),
                               ParamSpec::number("validation_fraction", 0.1, "tail of the file held out for validation")
                                   .at_least(0.001)
                                   .at_most(0.5),
                               ParamSpec::integer("seed", 0, "seed of the window positions").at_least(0)});
}

}  // namespace bench::data
