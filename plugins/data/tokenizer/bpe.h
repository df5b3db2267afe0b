// defines: bench::data::BpeSettings, BpeTokenizer — a SentencePiece BPE tokenizer, trained
// deterministically on a text and cached by the hash of that text and the settings
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace bench::data {

/// What a trained tokenizer depends on besides its training text; all of it is in the cache key.
struct BpeSettings {
  int64_t vocab_size = 1024;   ///< pieces, including the 256 byte pieces and <unk>
  int64_t max_lines = 100000;  ///< the trainer reads at most the first this many lines
};

/// Byte-level-exact BPE through SentencePiece: identity normalization, whitespace kept as it is,
/// byte fallback for anything outside the pieces, so decode(encode(x)) == x for every text and
/// each token stands for a fixed number of bytes. Newlines are never inside a piece (the trainer
/// sees lines), so a text is encoded line by line, which gives the same tokens as encoding it whole.
class BpeTokenizer {
 public:
  /// Loads a serialized SentencePiece model; throws bench::Error when it is not one.
  explicit BpeTokenizer(std::string serialized_model, std::string path = "");
  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  /// Trains a model on `text` (its lines) with one thread and no sampling, so the same text and
  /// settings give the same model bytes; throws bench::Error with SentencePiece's message.
  static std::string train(std::string_view text, const BpeSettings& settings);
  /// SHA-256 over the settings and the training text: the name of the cached model.
  static std::string cache_key(std::string_view text, const BpeSettings& settings);
  /// The model <dir>/<cache_key>.model, trained and written (to a temporary name, then renamed,
  /// so concurrent cases never read half a file) only when it is not there yet; `trained`, when
  /// given, says whether this call trained it.
  static BpeTokenizer cached(const std::string& dir, std::string_view text, const BpeSettings& settings,
                             bool* trained = nullptr);

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& tokens) const;
  int64_t vocab_size() const;
  /// Bytes of text each token id stands for: a piece's UTF-8 length (its U+2581 is one space), 1
  /// for a byte piece, 0 for <unk> and control pieces.
  const std::vector<int32_t>& token_bytes() const { return token_bytes_; }
  /// The cached model file; empty when the tokenizer was not loaded from the cache.
  const std::string& path() const { return path_; }
  /// The serialized model.
  const std::string& model() const { return model_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string model_;
  std::string path_;
  std::vector<int32_t> token_bytes_;
  int32_t newline_ = -1;
};

}  // namespace bench::data
