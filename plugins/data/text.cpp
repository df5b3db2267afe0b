// Plain text, as bytes (vocabulary 256) or as the tokens of a BPE tokenizer trained on it
// (SentencePiece; tokenizer/bpe.h), from a file or every file under a directory. Windows are drawn from the
// first (1 - validation_fraction) of the text for training and from the rest for validation; a
// BPE is trained on the training part only, and cached by hash beside the database.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>

#include "data.h"
#include "tokenizer/bpe.h"

namespace bench::data {

class Text final : public Dataset {
 public:
  explicit Text(const Params& p)
      : path_(p.path("path")),
        path_loc_(p.where("path")),
        validation_(p.number("validation_fraction")),
        seed_(static_cast<uint64_t>(p.integer("seed"))),
        sampling_(sampling_of(p)),
        bpe_(p.string("tokenizer") == "bpe"),
        tokenizer_loc_(p.where("tokenizer")),
        vocab_given_(p.given("vocab_size")),
        vocab_loc_(p.where("vocab_size")),
        settings_{p.integer("vocab_size"), p.integer("tokenizer_lines")} {}

  int64_t vocab_size() const override { return bpe_ ? settings_.vocab_size : 256; }

  void validate(const ModelDims& d) const override {
    if (bpe_ && !vocab_given_)
      throw ConfigError(tokenizer_loc_, "tokenizer = \"bpe\" needs a vocab_size (the pieces it trains)");
    if (!bpe_ && vocab_given_)
      throw ConfigError(vocab_loc_, "vocab_size is for tokenizer = \"bpe\"; the bytes tokenizer has 256");
    if (path_.empty()) throw ConfigError(path_loc_, "the text dataset needs a path");
    const int64_t size = corpus_size(path_);
    if (size < 0) throw ConfigError(path_loc_, "no such file: " + path_);
    // A BPE token covers a byte or more, so bytes are the bound for both tokenizers.
    const auto need = static_cast<int64_t>(static_cast<double>(d.seq_len + 2) / std::min(validation_, 1 - validation_));
    if (size < need)
      throw ConfigError(path_loc_, path_ + " has " + std::to_string(size) + " bytes; seq_len " +
                                       std::to_string(d.seq_len) + " needs at least " + std::to_string(need));
  }

  void set_cache_dir(const std::string& dir) override { cache_dir_ = dir; }

  void batch(Split split, int64_t index, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) override {
    load();
    stream_.batch(split, index, batch, seq, seed_, sampling_, inputs, targets);
  }

  std::vector<std::pair<std::string, double>> reference() const override {
    load();
    return stream_.reference(vocab_size());
  }

  std::vector<int32_t> all_tokens() const override {
    load();
    return stream_.tokens();
  }

  int64_t bytes_of(const int32_t* tokens, int64_t n) const override {
    if (!bpe_) return n;
    load();
    const std::vector<int32_t>& bytes = tokenizer_->token_bytes();
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += bytes[static_cast<size_t>(tokens[i])];
    return sum;
  }

  std::vector<std::pair<std::string, std::string>> derived_files() const override {
    if (!bpe_) return {};
    load();
    return {{"tokenizer", tokenizer_->path()}};
  }

 private:
  void load() const {
    std::call_once(loaded_, [&] {
      const std::string text = read_corpus(path_);
      if (!bpe_) {
        std::vector<int32_t> tokens(text.size());
        for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
        stream_.assign(std::move(tokens), validation_);
        return;
      }
      // Split at the first line end after the byte fraction, so the tokenizer never sees the
      // held-out lines and no line is cut in two.
      auto cut = static_cast<size_t>(std::floor(static_cast<double>(text.size()) * (1.0 - validation_)));
      cut = std::min(text.size(), text.find('\n', cut) == std::string::npos ? cut : text.find('\n', cut) + 1);
      const std::string_view train(text.data(), cut);
      const std::string_view held_out(text.data() + cut, text.size() - cut);
      const std::string dir =
          cache_dir_.empty() ? (std::filesystem::temp_directory_path() / "bench" / "tokenizers").string() : cache_dir_;
      try {
        tokenizer_.emplace(BpeTokenizer::cached(dir, train, settings_));
      } catch (const Error& e) {
        throw ConfigError(vocab_loc_, e.message());
      }
      std::vector<int32_t> tokens = tokenizer_->encode(train);
      const auto train_end = static_cast<int64_t>(tokens.size());
      const std::vector<int32_t> rest = tokenizer_->encode(held_out);
      tokens.insert(tokens.end(), rest.begin(), rest.end());
      stream_.assign_split(std::move(tokens), train_end);
    });
  }

  std::string path_;
  SourceLoc path_loc_;
  double validation_;
  uint64_t seed_;
  Sampling sampling_;
  bool bpe_;
  SourceLoc tokenizer_loc_;
  bool vocab_given_;
  SourceLoc vocab_loc_;
  BpeSettings settings_;
  std::string cache_dir_;
  mutable std::once_flag loaded_;
  mutable TokenStream stream_;
  mutable std::optional<BpeTokenizer> tokenizer_;
};

ComponentInfo text_info() {
  return make_info<Text>(
      Slot::kDataset, "text",
      "plain text (a file, or every file under a directory) as bytes (vocabulary 256) or as BPE tokens",
      {ParamSpec::string("path", "", "text file or directory, relative to the experiment file"),
       ParamSpec::choice("tokenizer", "bytes", {"bytes", "bpe"},
                         "bytes: one token per byte; bpe: a SentencePiece BPE trained on the training part, "
                         "cached by hash in tokenizers/ beside the database"),
       ParamSpec::integer("vocab_size", 1024,
                          "pieces of the BPE: required with tokenizer = \"bpe\", an error with bytes (always 256)")
           .at_least(260)
           .at_most(1 << 20),
       ParamSpec::integer("tokenizer_lines", 100000,
                          "the BPE trainer reads at most the first this many lines of the training part")
           .at_least(1),
       ParamSpec::number("validation_fraction", 0.1, "tail of the text held out for validation")
           .at_least(0.001)
           .at_most(0.5),
       ParamSpec::integer("seed", 0, "seed of the window positions (sampling = \"random\")").at_least(0),
       sampling_spec()});
}

}  // namespace bench::data
