// A deterministic synthetic language, generated on the fly (no download, no files):
//  - tokens 1..V-1 have Zipfian unigram frequencies (randomly permuted ids); token 0 ends a sentence;
//  - inside a sentence each token is followed by one of `successors` tokens of its own (a sparse
//    bigram grammar), or, with probability `mix`, by any token drawn from the unigram law;
//  - with probability `repeat` a sentence repeats an earlier sentence of the same sequence
//    verbatim, which only attention (an induction head) can predict.
// The reference figures, measured on a held-out sample, are the unigram entropy H(x) (the loss
// of the best context-free model) and the bigram entropy H(x_t | x_{t-1}).
#include <algorithm>
#include <cmath>
#include <mutex>

#include "bench/random.h"
#include "data.h"

namespace bench::data {

class SyntheticLanguage final : public Dataset {
 public:
  explicit SyntheticLanguage(const Params& p)
      : vocab_(p.integer("vocab_size")),
        seed_(static_cast<uint64_t>(p.integer("seed"))),
        successors_(p.integer("successors")),
        mix_(p.number("mix")),
        zipf_(p.number("zipf")),
        sentence_length_(p.number("sentence_length")),
        repeat_(p.number("repeat")),
        reference_tokens_(p.integer("reference_tokens")) {
    build_grammar();
  }

  int64_t vocab_size() const override { return vocab_; }

  void batch(Split split, int64_t index, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) override {
    std::vector<int32_t> row;
    for (int64_t r = 0; r < batch; ++r) {
      generate(
          hash_seed(seed_, static_cast<uint64_t>(split) + 1, static_cast<uint64_t>(index), static_cast<uint64_t>(r)),
          seq + 1, row);
      std::copy(row.begin(), row.begin() + seq, inputs + r * seq);
      std::copy(row.begin() + 1, row.begin() + seq + 1, targets + r * seq);
    }
  }

  std::vector<std::pair<std::string, double>> reference() const override {
    std::call_once(reference_once_, [&] {
      std::vector<int32_t> sample, row;
      for (int64_t i = 0; static_cast<int64_t>(sample.size()) < reference_tokens_; ++i) {
        generate(hash_seed(seed_, 99, static_cast<uint64_t>(i)), 1024, row);
        sample.insert(sample.end(), row.begin(), row.end());
      }
      reference_ = entropies(sample, vocab_);
    });
    return {{"unigram_entropy", reference_.first}, {"bigram_entropy", reference_.second}};
  }

 private:
  void build_grammar() {
    Rng rng(hash_seed(seed_, "grammar"));
    const int64_t n = vocab_ - 1;  // ids 1..V-1
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i + 1);
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(ids[static_cast<size_t>(i)], ids[rng.below(static_cast<uint64_t>(i + 1))]);
    unigram_ids_ = ids;
    unigram_cdf_.resize(static_cast<size_t>(n));
    double acc = 0;
    for (int64_t r = 0; r < n; ++r) {
      acc += std::pow(static_cast<double>(r + 1), -zipf_);
      unigram_cdf_[static_cast<size_t>(r)] = acc;
    }
    for (auto& c : unigram_cdf_) c /= acc;
    // Each token's successors: distinct tokens drawn from the unigram law, weights 1/rank.
    succ_.assign(static_cast<size_t>(vocab_ * successors_), 0);
    succ_cdf_.resize(static_cast<size_t>(successors_));
    double s = 0;
    for (int64_t k = 0; k < successors_; ++k) {
      s += 1.0 / static_cast<double>(k + 1);
      succ_cdf_[static_cast<size_t>(k)] = s;
    }
    for (auto& c : succ_cdf_) c /= s;
    for (int64_t a = 0; a < vocab_; ++a) {
      for (int64_t k = 0; k < successors_; ++k) {
        int32_t t;
        bool fresh;
        int tries = 0;
        do {
          t = draw_unigram(rng);
          fresh =
              std::find(&succ_[static_cast<size_t>(a * successors_)], &succ_[static_cast<size_t>(a * successors_ + k)],
                        t) == &succ_[static_cast<size_t>(a * successors_ + k)];
        } while (!fresh && ++tries < 100);
        succ_[static_cast<size_t>(a * successors_ + k)] = t;
      }
    }
  }

  int32_t draw_unigram(Rng& rng) const {
    const double u = rng.uniform();
    const auto it = std::upper_bound(unigram_cdf_.begin(), unigram_cdf_.end(), u);
    const size_t r = std::min<size_t>(static_cast<size_t>(it - unigram_cdf_.begin()), unigram_cdf_.size() - 1);
    return unigram_ids_[r];
  }

  int32_t draw_next(int32_t prev, Rng& rng) const {
    if (rng.uniform() < mix_) return draw_unigram(rng);
    const double u = rng.uniform();
    const auto it = std::upper_bound(succ_cdf_.begin(), succ_cdf_.end(), u);
    const size_t k = std::min<size_t>(static_cast<size_t>(it - succ_cdf_.begin()), succ_cdf_.size() - 1);
    return succ_[static_cast<size_t>(prev) * static_cast<size_t>(successors_) + k];
  }

  void generate(uint64_t seed, int64_t length, std::vector<int32_t>& out) const {
    Rng rng(seed);
    out.clear();
    std::vector<std::pair<size_t, size_t>> sentences;  // [begin, end) in out, separator excluded
    while (static_cast<int64_t>(out.size()) < length) {
      const size_t begin = out.size();
      if (!sentences.empty() && rng.uniform() < repeat_) {
        const auto [b, e] = sentences[rng.below(sentences.size())];
        for (size_t i = b; i < e; ++i) out.push_back(out[i]);
      } else {
        int32_t t = draw_unigram(rng);
        out.push_back(t);
        while (rng.uniform() >= 1.0 / sentence_length_) {
          t = draw_next(t, rng);
          out.push_back(t);
        }
      }
      sentences.emplace_back(begin, out.size());
      out.push_back(0);
    }
    out.resize(static_cast<size_t>(length));
  }

  int64_t vocab_;
  uint64_t seed_;
  int64_t successors_;
  double mix_, zipf_, sentence_length_, repeat_;
  int64_t reference_tokens_;
  std::vector<int32_t> unigram_ids_;
  std::vector<double> unigram_cdf_;
  std::vector<int32_t> succ_;
  std::vector<double> succ_cdf_;
  mutable std::once_flag reference_once_;
  mutable std::pair<double, double> reference_{0, 0};
};

ComponentInfo synthetic_info() {
  return make_info<SyntheticLanguage>(
      Slot::kDataset, "synthetic",
      "deterministic synthetic language: Zipfian tokens, a sparse bigram grammar and repeated sentences",
      {ParamSpec::integer("vocab_size", 256, "tokens, including the sentence separator 0").at_least(8),
       ParamSpec::integer("seed", 0, "seed of the grammar (independent of the run seed)").at_least(0),
       ParamSpec::integer("successors", 4, "possible successors of each token inside a sentence").at_least(1),
       ParamSpec::number("mix", 0.1, "probability of a token drawn from the unigram law instead")
           .at_least(0)
           .at_most(1),
       ParamSpec::number("zipf", 1.1, "exponent of the Zipfian unigram law").at_least(0),
       ParamSpec::number("sentence_length", 12.0, "mean sentence length in tokens").at_least(1),
       ParamSpec::number("repeat", 0.25, "probability that a sentence repeats an earlier one").at_least(0).at_most(1),
       ParamSpec::integer("reference_tokens", 1 << 20, "sample size of the reference entropies").at_least(1024)});
}

}  // namespace bench::data
