// defines: bench::report::ProfileOptions, CaseProfile, KernelFigures, load_profiles, kernel_figures,
// component_name, render_profile, profile_html — the per-kernel profile of a run's throughput cases
// (table `profile`, docs/results.md "The profile"): `bench results --profile` and the report's
// roofline and time-split plots. Private to report/ and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/report.h"
#include "store/record.h"
#include "store/run_data.h"
#include "store/store.h"

namespace bench::report {

/// What `bench results --profile` shows.
struct ProfileOptions {
  std::string mode = "train_step";  ///< the mode whose profile is shown
  int64_t top = 10;                 ///< kernels per case, the slowest first; 0: all
};

/// The profile of one mode of one throughput case, with the ceilings it is read against.
struct CaseProfile {
  const CaseRow* c = nullptr;
  std::string mode;
  std::vector<ProfileRow> rows;  ///< the slowest first (ties in the order stored)
  /// Metrics `profile_step_ms/<mode>`, `roof_gbps`, `roof_gflops`; none when absent or not positive.
  std::optional<double> step_ms, roof_gbps, roof_gflops;
  bool noisy = false;  ///< the mode's timing was marked noisy (its spread, or a busy machine)
  /// The ridge point roof_gflops / roof_gbps (FLOP/byte), when both ceilings are known.
  std::optional<double> ridge() const;
  /// The rows' total time (ms).
  double total_ms() const;
};

/// The profiles of `mode` ("": every mode, in the order forward, forward_backward, train_step,
/// then others by name) of the run's cases that have one, in case order.
std::vector<CaseProfile> load_profiles(const store::RunData& run, const std::string& mode);

/// The modes the run has a profile of, in the order of load_profiles.
std::vector<std::string> profiled_modes(const store::Store& db, int64_t run_id);

/// What one row achieved against the ceilings. Each is none where an input is missing: bytes or
/// FLOPs not declared (NaN), a time of 0, a ceiling unknown. `bound` is "memory" when the
/// intensity is below the ridge point, "compute" at or above it, "-" when either is unknown.
struct KernelFigures {
  std::optional<double> gbps, gbps_percent, gflops, gflops_percent, intensity;
  std::string bound = "-";
};
KernelFigures kernel_figures(const ProfileRow& r, const CaseProfile& p);

/// How a row's component reads: its scope and its type ("blocks.0.attn_norm rmsnorm"), the slot
/// where the row has no scope ("model", "optimizer").
std::string component_name(const ProfileRow& r);

/// `bench results --profile`: for each throughput case with a profile of `o.mode`, its `o.top`
/// slowest kernels against the ceilings and its time by slot, with the step's time and the
/// ceilings under them (docs/results.md, "The profile"). Throws bench::Error when the run has a
/// profile but none of `o.mode`.
std::string render_profile(const store::Store& db, int64_t run_id, const ProfileOptions& o, Format f);

/// The report's profile section: per profiled mode, a roofline of each case's slowest kernels
/// and a bar per case of its step's time split by slot. Empty when the run has no profile.
std::string profile_html(const store::Store& db, const store::RunData& run);

}  // namespace bench::report
