// defines: the data family's component infos and shared helpers
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench.h"

namespace bench::data {

ComponentInfo synthetic_info();
ComponentInfo text_info();
ComponentInfo tokens_info();

/// Unigram entropy H(x) and bigram conditional entropy H(x_t | x_{t-1}), in nats, of `tokens`
/// (ids below `vocab`).
std::pair<double, double> entropies(const std::vector<int32_t>& tokens, int64_t vocab);

/// The whole file as bytes; throws bench::Error when it cannot be read.
std::vector<char> read_file(const std::string& path);

/// A text corpus: the file at `path`, or every regular file under the directory `path` (in
/// sorted order of their paths, recursively), concatenated; throws bench::Error when it cannot be
/// read.
std::string read_corpus(const std::string& path);
/// Bytes read_corpus(path) would return; -1 when `path` is neither a file nor a directory.
int64_t corpus_size(const std::string& path);

/// How a TokenStream picks its windows (docs/experiments.md states both rules).
enum class Sampling {
  kRandom,      ///< window (split, index, row) starts at a position drawn from a seeded hash
  kSequential,  ///< windows one after another: window w = index * batch + row starts at w * seq
};

/// The `sampling` key of the text and tokens datasets.
ParamSpec sampling_spec();
Sampling sampling_of(const Params& p);

/// A token file held in memory, split into a training and a validation range; batches are
/// windows of seq + 1 tokens (inputs and the targets one position later), either at positions
/// drawn deterministically from (split, index, row) or taken in order (Sampling).
class TokenStream {
 public:
  void assign(std::vector<int32_t> tokens, double validation_fraction);
  /// Tokens [0, train_end) for training, the rest for validation.
  void assign_split(std::vector<int32_t> tokens, int64_t train_end);
  void batch(Split split, int64_t index, int64_t batch, int64_t seq, uint64_t seed, Sampling sampling, int32_t* inputs,
             int32_t* targets) const;
  const std::vector<int32_t>& tokens() const { return tokens_; }
  /// Unigram and bigram entropies of the training range (Dataset::reference).
  std::vector<std::pair<std::string, double>> reference(int64_t vocab) const;
  int64_t train_end() const { return train_end_; }

 private:
  std::vector<int32_t> tokens_;
  int64_t train_end_ = 0;
};

}  // namespace bench::data
