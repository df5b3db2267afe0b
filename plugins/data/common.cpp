#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench/random.h"
#include "data.h"

namespace bench::data {

std::pair<double, double> entropies(const std::vector<int32_t>& tokens, int64_t vocab) {
  if (tokens.size() < 2) return {0, 0};
  std::vector<double> uni(static_cast<size_t>(vocab), 0);
  std::map<std::pair<int32_t, int32_t>, double> bi;
  std::vector<double> prev(static_cast<size_t>(vocab), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    uni[static_cast<size_t>(tokens[i])] += 1;
    if (i > 0) {
      bi[{tokens[i - 1], tokens[i]}] += 1;
      prev[static_cast<size_t>(tokens[i - 1])] += 1;
    }
  }
  const double n = static_cast<double>(tokens.size());
  double h1 = 0;
  for (double c : uni)
    if (c > 0) h1 -= c / n * std::log(c / n);
  const double m = n - 1;
  double h2 = 0;  // H(x_t | x_{t-1}) = -sum p(a,b) log p(b|a)
  for (const auto& [k, c] : bi) h2 -= c / m * std::log(c / prev[static_cast<size_t>(k.first)]);
  return {h1, h2};
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

namespace {

/// The files of a corpus in the order read_corpus concatenates them.
std::vector<std::filesystem::path> corpus_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file(ec)) files.push_back(e.path());
  if (ec) throw Error("cannot list " + path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string read_corpus(const std::string& path) {
  std::string out;
  for (const auto& f : corpus_files(path)) {
    const std::vector<char> bytes = read_file(f.string());
    out.append(bytes.begin(), bytes.end());
  }
  return out;
}

int64_t corpus_size(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) && !fs::is_directory(path, ec)) return -1;
  int64_t n = 0;
  for (const auto& f : corpus_files(path)) n += static_cast<int64_t>(fs::file_size(f, ec));
  return n;
}

std::vector<std::pair<std::string, double>> TokenStream::reference(int64_t vocab) const {
  const std::vector<int32_t> train(tokens_.begin(), tokens_.begin() + train_end_);
  const auto [h1, h2] = entropies(train, vocab);
  return {{"unigram_entropy", h1}, {"bigram_entropy", h2}};
}

void TokenStream::assign(std::vector<int32_t> tokens, double validation_fraction) {
  tokens_ = std::move(tokens);
  train_end_ = static_cast<int64_t>(std::floor(static_cast<double>(tokens_.size()) * (1.0 - validation_fraction)));
}

void TokenStream::assign_split(std::vector<int32_t> tokens, int64_t train_end) {
  tokens_ = std::move(tokens);
  train_end_ = train_end;
}

ParamSpec sampling_spec() {
  return ParamSpec::choice("sampling", "random", {"random", "sequential"},
                           "random: windows at seeded positions; sequential: windows one after another, "
                           "batch after batch (docs/experiments.md)");
}

Sampling sampling_of(const Params& p) {
  return p.string("sampling") == "sequential" ? Sampling::kSequential : Sampling::kRandom;
}

void TokenStream::batch(Split split, int64_t index, int64_t batch, int64_t seq, uint64_t seed, Sampling sampling,
                        int32_t* inputs, int32_t* targets) const {
  const int64_t begin = split == Split::kTrain ? 0 : train_end_;
  const int64_t end = split == Split::kTrain ? train_end_ : static_cast<int64_t>(tokens_.size());
  const int64_t span = end - begin - (seq + 1);
  // Sequential: window w covers tokens [w * seq, w * seq + seq] of the split (consecutive windows
  // share one token: the last target of one is the first input of the next); after the last
  // whole window the split starts over, window w is window w mod count.
  const int64_t count = std::max<int64_t>(1, (end - begin - 1) / seq);
  for (int64_t r = 0; r < batch; ++r) {
    int64_t start = begin;
    if (sampling == Sampling::kSequential) {
      start += (index * batch + r) % count * seq;
    } else {
      Rng rng(hash_seed(seed, static_cast<uint64_t>(split), static_cast<uint64_t>(index), static_cast<uint64_t>(r)));
      start += span > 0 ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(span + 1))) : 0;
    }
    for (int64_t t = 0; t < seq; ++t) {
      inputs[r * seq + t] = tokens_[static_cast<size_t>(start + t)];
      targets[r * seq + t] = tokens_[static_cast<size_t>(start + t + 1)];
    }
  }
}

}  // namespace bench::data
