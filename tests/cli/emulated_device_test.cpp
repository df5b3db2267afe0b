// `bench run --device emulated` end to end: the run is recorded on the emulated device, and its
// stored profile counts the device's launches (the fused attention's two programs per layer, each
// one launch for every (batch, head) pair, as CUDA launches them), where the CPU run's profile
// counts the CPU's composed materializing attention as one kernel per call.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace emulated_device_test {
namespace {

constexpr int64_t kLayers = 2;  // batch 3, heads 2: no count below depends on them

const std::string kExperiment =
    "name = \"emulated\"\nseed = 5\n"
    "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 3\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n"
    "[throughput]\nmodes = [\"train_step\"]\nrepetitions = 1\nmin_time = 0.001\nwarmup_time = 0.0\nmax_time = 0\n"
    "profile_steps = 1\n"
    // The [cpu] overrides apply to the emulated device as to the CPU.
    "[cpu]\nmodel.batch_size = 3\n";

/// Calls of the profiled train step's kernels whose name contains `part`, on `device`.
int64_t profiled_calls(const std::string& device, const std::string& part) {
  const std::string exp = test::write_temp("emulated.toml", kExperiment);
  const std::string db = test::write_temp("emulated_" + device + ".db", "");
  std::filesystem::remove(db);
  const test::Output r = test::bench_cli("--db " + db + " -q run --device " + device + " " + exp);
  EXPECT_EQ(r.code, 0) << device << ": " << r.err;
  if (r.code != 0) return -1;
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_NE(s.query("SELECT device_json FROM runs").rows.at(0).at(0).as_string().find(device), std::string::npos);
  return s
      .query("SELECT coalesce(sum(calls), 0) FROM profile WHERE mode = 'train_step' AND kernel LIKE '%" + part + "%'")
      .rows.at(0)
      .at(0)
      .as_int();
}

TEST(Cli, EmulatedDeviceProfilesTheDevicesLaunches) {
  // Per layer, the fused attention core that auto takes on a device in float32: one launch
  // forward, one backward (kernels/attention_fused.h), whatever the batch and the heads. On the
  // CPU auto keeps the materializing core, one composed kernel per call, and no fused program.
  EXPECT_EQ(profiled_calls("emulated", "AttentionFused"), 2 * kLayers);
  EXPECT_EQ(profiled_calls("cpu", "AttentionFused"), 0);
  EXPECT_EQ(profiled_calls("emulated", "batched"), 0);  // no batched products: no materializing core
  // Everything else is launched alike but for the residual adds that the device's norms fold
  // into their own launches (bench/residual_norm.h; the CPU launches them apart): the device's
  // attention is 2 launches a layer, the CPU's 2 too (one composed kernel forward, one backward),
  // and pre-norm's 2 backward adds a layer are the device's norms' (RMSNorm, the default: one
  // gradient, one sum launch on either target).
  EXPECT_EQ(profiled_calls("emulated", "") - profiled_calls("cpu", ""), (2 - 2 - 2) * kLayers);
}

TEST(Cli, EmulatedIsADeviceOfTheFileAndOfValidate) {
  const std::string exp = test::write_temp("emulated_key.toml", "device = \"emulated\"\n" + kExperiment);
  const test::Output v = test::bench_cli("validate " + exp);
  EXPECT_EQ(v.code, 0) << v.err;
  const test::Output flag = test::bench_cli("validate --device emulated " + exp);
  EXPECT_EQ(flag.code, 0) << flag.err;
}

}  // namespace
}  // namespace emulated_device_test
}  // namespace bench
