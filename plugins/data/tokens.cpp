// Pre-tokenized files: llm.c / nanoGPT .bin (a 256 x int32 header with magic 20240520,
// version 1 and the token count, then uint16 tokens), or headerless uint16 / uint32 arrays.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "data.h"

namespace bench::data {

class TokenFile final : public Dataset {
 public:
  explicit TokenFile(const Params& p)
      : path_(p.path("path")),
        path_loc_(p.where("path")),
        format_(p.string("format")),
        vocab_(p.integer("vocab_size")),
        validation_(p.number("validation_fraction")),
        seed_(static_cast<uint64_t>(p.integer("seed"))),
        sampling_(sampling_of(p)) {}

  int64_t vocab_size() const override { return vocab_; }

  void validate(const ModelDims& d) const override {
    std::error_code ec;
    if (path_.empty()) throw ConfigError(path_loc_, "the tokens dataset needs a path");
    if (!std::filesystem::is_regular_file(path_, ec)) throw ConfigError(path_loc_, "no such file: " + path_);
    try {
      load();
    } catch (const Error& e) {
      throw ConfigError(path_loc_, e.message());
    }
    const auto n = static_cast<int64_t>(stream_.tokens().size());
    if (static_cast<double>(n) * std::min(validation_, 1 - validation_) < static_cast<double>(d.seq_len + 2))
      throw ConfigError(path_loc_, path_ + " holds " + std::to_string(n) + " tokens, too few for seq_len " +
                                       std::to_string(d.seq_len));
  }

  void batch(Split split, int64_t index, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) override {
    load();
    stream_.batch(split, index, batch, seq, seed_, sampling_, inputs, targets);
  }

  std::vector<std::pair<std::string, double>> reference() const override {
    load();
    return stream_.reference(vocab_);
  }

  std::vector<int32_t> all_tokens() const override {
    load();
    return stream_.tokens();
  }

 private:
  void load() const {
    std::call_once(loaded_, [&] {
      const std::vector<char> bytes = read_file(path_);
      size_t offset = 0;
      size_t width = format_ == "uint32" ? 4 : 2;
      int64_t count = static_cast<int64_t>(bytes.size() / width);
      if (format_ == "llmc") {
        int32_t header[256];
        if (bytes.size() < sizeof header) throw Error(path_ + ": shorter than the llm.c header (1024 bytes)");
        std::memcpy(header, bytes.data(), sizeof header);
        if (header[0] != 20240520)
          throw Error(path_ + ": bad llm.c magic " + std::to_string(header[0]) + " (want 20240520)");
        if (header[1] != 1) throw Error(path_ + ": unsupported llm.c version " + std::to_string(header[1]));
        offset = sizeof header;
        count = header[2];
        if (static_cast<size_t>(count) * 2 + offset > bytes.size())
          throw Error(path_ + ": header says " + std::to_string(count) + " tokens but the file is shorter");
      }
      std::vector<int32_t> tokens(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        uint32_t v = 0;
        std::memcpy(&v, bytes.data() + offset + static_cast<size_t>(i) * width, width);
        if (v >= static_cast<uint32_t>(vocab_))
          throw Error(path_ + ": token " + std::to_string(v) + " at " + std::to_string(i) + " is outside vocab_size " +
                      std::to_string(vocab_));
        tokens[static_cast<size_t>(i)] = static_cast<int32_t>(v);
      }
      stream_.assign(std::move(tokens), validation_);
    });
  }

  std::string path_;
  SourceLoc path_loc_;
  std::string format_;
  int64_t vocab_;
  double validation_;
  uint64_t seed_;
  Sampling sampling_;
  mutable std::once_flag loaded_;
  mutable TokenStream stream_;
};

ComponentInfo tokens_info() {
  return make_info<TokenFile>(
      Slot::kDataset, "tokens", "pre-tokenized file: llm.c/nanoGPT .bin, or raw uint16/uint32",
      {ParamSpec::string("path", "", "token file, relative to the experiment file"),
       ParamSpec::choice("format", "llmc", {"llmc", "uint16", "uint32"}, "file layout"),
       ParamSpec::integer("vocab_size", 50257, "tokenizer vocabulary (GPT-2: 50257)").at_least(2),
       ParamSpec::number("validation_fraction", 0.1, "tail of the file held out for validation")
           .at_least(0.001)
           .at_most(0.5),
       ParamSpec::integer("seed", 0, "seed of the window positions (sampling = \"random\")").at_least(0),
       sampling_spec()});
}

}  // namespace bench::data
