// `bench demo NAME`: the three numeric stability demos of the lecture (seeds/004), computed with
// our kernels and printed as tables on stdout (runners/demos.h defines what each row holds).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "runners/demos.h"

namespace bench::cli {

namespace {

std::string zloss_table() {
  std::string o =
      "z-loss: mean cross-entropy of 64 x 1000 logits ~ N(0, 4) shifted by c (float64 reference: the same for "
      "every c)\n";
  o += fmt::format("{:>8} {:>10} {:>10} {:>11} {:>10} {:>12}\n", "c", "CE fp32", "CE bf16", "|bf16-ref|", "mean z",
                   "z-loss 1e-4");
  for (const ZLossRow& r : zloss_demo())
    o += fmt::format("{:>8g} {:>10.4f} {:>10.4f} {:>11.4f} {:>10.1f} {:>12.2f}\n", r.shift, r.ce_fp32, r.ce_bf16,
                     std::abs(r.ce_bf16 - r.ce_exact), r.z_mean, r.z_loss);
  return o;
}

std::string qk_table() {
  std::string o = fmt::format(
      "QK-norm: attention over 64 positions, d_head 64, q and k scaled by s (uniform: entropy ln 64 = {:.2f})\n",
      std::log(64.0));
  o += fmt::format("{:>4} {:>10} {:>10} {:>15} {:>15}\n", "s", "entropy", "max weight", "QK-norm entropy",
                   "QK-norm max w.");
  for (const QkRow& r : qk_norm_demo())
    o += fmt::format("{:>4g} {:>10.2f} {:>10.2f} {:>15.2f} {:>15.2f}\n", r.scale, r.entropy, r.max_weight,
                     r.entropy_qk_norm, r.max_weight_qk_norm);
  return o;
}

std::string softcap_table() {
  std::string o = "soft-cap: y = 30 tanh(x / 30)\n";
  o += fmt::format("{:>8} {:>8}\n", "x", "y");
  for (const SoftcapRow& r : softcap_demo()) o += fmt::format("{:>8.1f} {:>8.2f}\n", r.x, r.y);
  return o;
}

}  // namespace

int cmd_demo(const GlobalOptions& g, const std::string& name) {
  (void)g;
  std::string out;
  if (name == "zloss" || name == "all") out += zloss_table();
  if (name == "qk_norm" || name == "all") out += (out.empty() ? "" : "\n") + qk_table();
  if (name == "softcap" || name == "all") out += (out.empty() ? "" : "\n") + softcap_table();
  std::fputs(out.c_str(), stdout);
  return kOk;
}

}  // namespace bench::cli
