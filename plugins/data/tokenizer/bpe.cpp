#include "bpe.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "bench/error.h"
#include "bench/sha256.h"

namespace bench::data {

namespace {

/// Bump when the way a model is trained changes without its options changing: old cache
/// entries then stop matching.
constexpr std::string_view kCacheFormat = "bench-bpe-1";

/// U+2581, SentencePiece's visible space: one byte of text.
constexpr std::string_view kSpace = "\xe2\x96\x81";

/// The trainer's options. Every one that could change the model is fixed here and goes into the
/// cache key. One thread and no shuffling: SentencePiece's only randomness is the sampling of
/// input lines, so the model bytes depend on the text and these options alone.
std::map<std::string, std::string> trainer_options(const BpeSettings& s) {
  return {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(s.vocab_size)},
      {"input_sentence_size", std::to_string(s.max_lines)},
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      // Byte-exact: no NFKC, whitespace as it is, no space added before a line, and bytes for
      // whatever the pieces do not cover (decode(encode(x)) == x).
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      // <unk> is required by SentencePiece and unused with byte fallback; no BOS/EOS/PAD pieces.
      {"unk_id", "0"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"minloglevel", "2"},  // its progress lines would clutter bench's stderr
  };
}

/// The lines of a text, without their newlines, for the trainer.
class Lines final : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(std::string_view text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    if (pos_ >= text_.size()) {
      done_ = true;
      return;
    }
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line_.assign(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

BpeTokenizer::BpeTokenizer(std::string serialized_model, std::string path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()),
      model_(std::move(serialized_model)),
      path_(std::move(path)) {
  const auto status = sp_->LoadFromSerializedProto(model_);
  if (!status.ok())
    throw Error((path_.empty() ? std::string("BPE model") : path_) +
                ": not a SentencePiece model: " + status.ToString());
  const int n = sp_->GetPieceSize();
  token_bytes_.resize(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    int32_t bytes = 0;
    if (sp_->IsByte(id)) {
      bytes = 1;
    } else if (!sp_->IsUnknown(id) && !sp_->IsControl(id) && !sp_->IsUnused(id)) {
      const std::string& piece = sp_->IdToPiece(id);
      bytes = static_cast<int32_t>(piece.size());
      for (size_t at = piece.find(kSpace); at != std::string::npos; at = piece.find(kSpace, at + kSpace.size()))
        bytes -= static_cast<int32_t>(kSpace.size()) - 1;
    }
    token_bytes_[static_cast<size_t>(id)] = bytes;
  }
  newline_ = sp_->PieceToId("<0x0A>");
  if (newline_ == sp_->unk_id())
    throw Error("BPE model has no byte piece for a newline (trained without byte_fallback)");
}

BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

std::string BpeTokenizer::train(std::string_view text, const BpeSettings& settings) {
  const auto options = trainer_options(settings);
  const std::unordered_map<std::string, std::string> kwargs(options.begin(), options.end());
  Lines lines(text);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, &model);
  if (!status.ok())
    throw Error("SentencePiece could not train a BPE of vocab_size " + std::to_string(settings.vocab_size) + ": " +
                status.ToString());
  return model;
}

std::string BpeTokenizer::cache_key(std::string_view text, const BpeSettings& settings) {
  std::string key(kCacheFormat);
  for (const auto& [k, v] : trainer_options(settings)) key += "\n" + k + "=" + v;
  return sha256_hex(key + "\n" + sha256_hex(text));
}

BpeTokenizer BpeTokenizer::cached(const std::string& dir, std::string_view text, const BpeSettings& settings,
                                  bool* trained) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(dir) / (cache_key(text, settings) + ".model");
  if (trained != nullptr) *trained = false;
  if (std::ifstream in(path, std::ios::binary); in)
    return BpeTokenizer(std::string(std::istreambuf_iterator<char>(in), {}), path.string());
  std::string model = train(text, settings);
  if (trained != nullptr) *trained = true;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the tokenizer cache " + dir + ": " + ec.message());
  // A name of this process's own, then an atomic rename: two cases that train the same model at
  // once each write a whole file, and the second rename replaces identical bytes.
  const fs::path tmp = fs::path(dir) / (path.filename().string() + ".tmp" + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(model.data(), static_cast<std::streamsize>(model.size()));
    if (!out) throw Error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return BpeTokenizer(std::move(model), path.string());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2);
  std::vector<int> ids;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) {
      const auto status = sp_->Encode(text.substr(pos, end - pos), &ids);
      if (!status.ok()) throw Error("SentencePiece could not encode: " + status.ToString());
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (end < text.size()) out.push_back(newline_);
    pos = end + 1;
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& tokens) const {
  const std::vector<int> ids(tokens.begin(), tokens.end());
  std::string out;
  const auto status = sp_->Decode(ids, &out);
  if (!status.ok()) throw Error("SentencePiece could not decode: " + status.ToString());
  return out;
}

int64_t BpeTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace bench::data
