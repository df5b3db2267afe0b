#include "runners/demos.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "bench/random.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/softcap.h"

namespace bench {

std::vector<ZLossRow> zloss_demo() {
  constexpr int64_t kRows = 64, kVocab = 1000;
  constexpr double kCoef = 1e-4;
  Rng rng(0);
  std::vector<double> base(static_cast<size_t>(kRows * kVocab));
  for (double& v : base) v = 2.0 * rng.normal();
  std::vector<int32_t> targets(kRows);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.below(kVocab));
  // float64 reference: the shift cancels, so it is computed once on the unshifted logits.
  double exact = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const double* row = base.data() + r * kVocab;
    const double m = *std::max_element(row, row + kVocab);
    double sum = 0;
    for (int64_t j = 0; j < kVocab; ++j) sum += std::exp(row[j] - m);
    exact += (m + std::log(sum) - row[targets[static_cast<size_t>(r)]]) / kRows;
  }
  const tile::Exec exec;
  std::vector<ZLossRow> out;
  for (double c : {0.0, 10.0, 100.0, 1000.0, 10000.0}) {
    std::vector<float> f32(base.size());
    std::vector<tile::bf16> b16(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      f32[i] = static_cast<float>(base[i] + c);
      b16[i] = tile::float_to_bf16(f32[i]);
    }
    std::vector<float> loss(kRows), z(kRows);
    ZLossRow row{c, 0, 0, exact, 0, 0};
    kernels::cross_entropy<float>(exec, f32.data(), targets.data(), kRows, kVocab, kVocab, loss.data(), z.data(),
                                  nullptr, 0, 1);
    for (int64_t r = 0; r < kRows; ++r) {
      row.ce_fp32 += loss[static_cast<size_t>(r)] / static_cast<double>(kRows);
      row.z_mean += z[static_cast<size_t>(r)] / static_cast<double>(kRows);
      row.z_loss += kCoef * std::pow(static_cast<double>(z[static_cast<size_t>(r)]), 2) / static_cast<double>(kRows);
    }
    kernels::cross_entropy<tile::bf16>(exec, b16.data(), targets.data(), kRows, kVocab, kVocab, loss.data(), nullptr,
                                       nullptr, 0, 1);
    for (int64_t r = 0; r < kRows; ++r) row.ce_bf16 += loss[static_cast<size_t>(r)] / static_cast<double>(kRows);
    out.push_back(row);
  }
  return out;
}

namespace {

/// Mean entropy and mean max weight of the rows of a [n, n] probability matrix.
std::pair<double, double> row_stats(const std::vector<float>& p, int64_t n) {
  double h = 0, mx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = p.data() + i * n;
    double hi = 0;
    for (int64_t j = 0; j < n; ++j)
      if (row[j] > 0) hi -= static_cast<double>(row[j]) * std::log(static_cast<double>(row[j]));
    h += hi / static_cast<double>(n);
    mx += static_cast<double>(*std::max_element(row, row + n)) / static_cast<double>(n);
  }
  return {h, mx};
}

/// Non-causal single-head attention probabilities of q, k ([n, d] each) by the attention kernel.
std::vector<float> attention_probs(const std::vector<float>& q, const std::vector<float>& k, int64_t n, int64_t d) {
  kernels::AttentionArgs a{1, n, 1, 1, d, 1.0 / std::sqrt(static_cast<double>(d)), 0.0, 0, false};
  std::vector<float> qkv(static_cast<size_t>(n * 3 * d), 0.0f);  // v = 0: only the probabilities matter
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      qkv[static_cast<size_t>(i * 3 * d + j)] = q[static_cast<size_t>(i * d + j)];
      qkv[static_cast<size_t>(i * 3 * d + d + j)] = k[static_cast<size_t>(i * d + j)];
    }
  std::vector<float> out(static_cast<size_t>(n * d)), probs(static_cast<size_t>(kernels::attention_probs_size(a)));
  std::vector<float> work(static_cast<size_t>(kernels::attention_workspace_size<float>(tile::Exec{}, a)));
  kernels::attention_forward<float>(tile::Exec{}, a, qkv.data(), out.data(), probs.data(), nullptr, work.data());
  probs.resize(static_cast<size_t>(n * n));
  return probs;
}

/// x / sqrt(mean(x^2) + eps) per row of d.
std::vector<float> rms_normalize(const std::vector<float>& x, int64_t d) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(d); ++r) {
    double ms = 0;
    for (int64_t j = 0; j < d; ++j) ms += std::pow(static_cast<double>(x[r * d + j]), 2) / static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(ms + 1e-6);
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = static_cast<float>(x[r * d + j] * inv);
  }
  return y;
}

}  // namespace

std::vector<QkRow> qk_norm_demo() {
  constexpr int64_t kN = 64, kD = 64;
  Rng rng(0);
  std::vector<float> q(kN * kD), k(kN * kD);
  for (float& v : q) v = static_cast<float>(rng.normal());
  for (float& v : k) v = static_cast<float>(rng.normal());
  std::vector<QkRow> out;
  for (double s : {1.0, 2.0, 4.0, 8.0}) {
    std::vector<float> qs(q.size()), ks(k.size());
    for (size_t i = 0; i < q.size(); ++i) {
      qs[i] = static_cast<float>(q[i] * s);
      ks[i] = static_cast<float>(k[i] * s);
    }
    QkRow row{s, 0, 0, 0, 0};
    std::tie(row.entropy, row.max_weight) = row_stats(attention_probs(qs, ks, kN, kD), kN);
    std::tie(row.entropy_qk_norm, row.max_weight_qk_norm) =
        row_stats(attention_probs(rms_normalize(qs, kD), rms_normalize(ks, kD), kN, kD), kN);
    out.push_back(row);
  }
  return out;
}

std::vector<SoftcapRow> softcap_demo() {
  const std::vector<float> x = {-200.0f, -50.0f, -10.0f, 0.0f, 5.0f, 10.0f, 30.0f, 50.0f, 200.0f};
  std::vector<float> y(x.size());
  kernels::softcap_forward<float>(tile::Exec{}, x.data(), y.data(), static_cast<int64_t>(x.size()), 30.0);
  std::vector<SoftcapRow> out;
  for (size_t i = 0; i < x.size(); ++i) out.push_back({x[i], y[i]});
  return out;
}

}  // namespace bench
