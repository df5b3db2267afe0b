// defines: bench::test::CheckResult, CheckTable — the row-by-row table of a device check:
// tests/cuda/cuda_check.cu's timings, and kernels_test's tests when scripts/gpu-check.sh runs
// them on a GPU (support/check_table_listener.h)
//
// A lent GPU comes for minutes, and a check may die at any point: a throw, a sticky CUDA error
// (an illegal address poisons the context for the rest of the process), or a kill by `timeout`.
// So every check writes its row the moment it ends, appended and flushed to a markdown table and
// to a JSON-lines file, and nothing is kept for the end. Each check runs isolated: what it throws
// is its FAIL row, and the next check runs. After each check a device probe may report that the
// device can no longer be used; the check that left it so gets the FAIL row that names it, and
// the program stops with what it has written.
//
// For tests of scripts/gpu-check.sh itself, GPU_CHECK_FAIL=NAME makes check NAME throw, and
// GPU_CHECK_HANG=NAME makes it hang with SIGTERM ignored (only `timeout -k`'s SIGKILL ends it).
#pragma once

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bench::test {

/// How one check ended: PASS, FAIL, SKIPPED or INFO (a measurement), with an optional value,
/// its unit and a detail.
struct CheckResult {
  std::string result = "PASS";
  double value = std::numeric_limits<double>::quiet_NaN();
  std::string unit;
  std::string detail;

  static CheckResult pass(std::string detail = "") {
    return {"PASS", std::numeric_limits<double>::quiet_NaN(), "", std::move(detail)};
  }
  static CheckResult fail(std::string detail) {
    return {"FAIL", std::numeric_limits<double>::quiet_NaN(), "", std::move(detail)};
  }
  static CheckResult skipped(std::string why) {
    return {"SKIPPED", std::numeric_limits<double>::quiet_NaN(), "", std::move(why)};
  }
  static CheckResult info(double value, std::string unit, std::string detail = "") {
    return {"INFO", value, std::move(unit), std::move(detail)};
  }
};

/// The table of one program's checks (see the top of the file).
class CheckTable {
 public:
  /// Rows go to `md_path` (markdown rows, appended) and `jsonl_path` (one JSON object a line);
  /// either may be empty. Every row is also printed to stdout. `only` keeps the checks whose
  /// name starts with one of its entries (all when empty).
  CheckTable(std::string section, const std::string& md_path, const std::string& jsonl_path,
             std::vector<std::string> only = {})
      : section_(std::move(section)), only_(std::move(only)) {
    if (!md_path.empty()) md_ = std::fopen(md_path.c_str(), "a");
    if (!jsonl_path.empty()) jsonl_ = std::fopen(jsonl_path.c_str(), "a");
    if (const char* f = std::getenv("GPU_CHECK_FAIL")) fail_ = f;
    if (const char* h = std::getenv("GPU_CHECK_HANG")) hang_ = h;
  }
  ~CheckTable() {
    if (md_ != nullptr) std::fclose(md_);
    if (jsonl_ != nullptr) std::fclose(jsonl_);
  }
  CheckTable(const CheckTable&) = delete;
  CheckTable& operator=(const CheckTable&) = delete;

  /// After every check: a non-empty message when the device can no longer be used (a sticky
  /// CUDA error). Unset: nothing is probed.
  std::function<std::string()> device_probe;

  /// Whether check `name` passes the filter.
  bool wanted(const std::string& name) const {
    if (only_.empty()) return true;
    for (const auto& o : only_)
      if (name.rfind(o, 0) == 0) return true;
    return false;
  }

  /// Runs `body()` (returning a CheckResult) as check `name` and writes its row: a throw is its
  /// FAIL row with the message; a device left unusable ends the program (exit 3) after the row
  /// that names this check.
  template <class Body>
  void run(const std::string& name, Body&& body) {
    if (!wanted(name)) return;
    CheckResult r;
    try {
      if (name == hang_) {
        std::signal(SIGTERM, SIG_IGN);  // only SIGKILL (timeout -k) ends it
        for (;;) pause();
      }
      if (name == fail_) throw std::runtime_error("failed on purpose (GPU_CHECK_FAIL)");
      r = body();
    } catch (const std::exception& e) {
      r = CheckResult::fail(std::string("threw: ") + e.what());
    }
    finish(name, r);
  }

  /// Writes the row of `check` now, probes the device (see run()).
  void finish(const std::string& check, const CheckResult& r) {
    write(check, r);
    if (!device_probe) return;
    const std::string sticky = device_probe();
    if (sticky.empty()) return;
    write(check, CheckResult::fail("left the device unusable (" + sticky +
                                   "): this check caused it; the program's remaining checks cannot run"));
    std::fflush(stdout);
    std::_Exit(3);
  }

  /// Checks that ended FAIL so far.
  int failures() const { return failures_; }

 private:
  static std::string escape_md(std::string s) {
    for (char& c : s)
      if (c == '|' || c == '\n' || c == '\r') c = c == '|' ? '/' : ' ';
    return s;
  }
  static std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        o += ' ';
      } else {
        o += c;
      }
    }
    return o + "\"";
  }

  void write(const std::string& check, const CheckResult& r) {
    if (r.result == "FAIL") ++failures_;
    char value[64] = "-";
    char json_value[64] = "null";
    if (r.value == r.value) {  // not NaN
      std::snprintf(value, sizeof value, "%.4g", r.value);
      std::snprintf(json_value, sizeof json_value, "%.6g", r.value);
    }
    const std::string unit = r.unit.empty() ? "-" : r.unit, detail = r.detail.empty() ? "-" : r.detail;
    std::printf("%s / %s: %s %s %s %s\n", section_.c_str(), check.c_str(), r.result.c_str(), value, unit.c_str(),
                detail.c_str());
    std::fflush(stdout);
    if (md_ != nullptr) {
      std::fprintf(md_, "| %s | %s | %s | %s | %s | %s |\n", section_.c_str(), escape_md(check).c_str(),
                   r.result.c_str(), value, escape_md(unit).c_str(), escape_md(detail).c_str());
      std::fflush(md_);
    }
    if (jsonl_ != nullptr) {
      std::fprintf(jsonl_,
                   "{\"section\": %s, \"check\": %s, \"result\": %s, \"value\": %s, \"unit\": %s, \"detail\": %s}\n",
                   json_string(section_).c_str(), json_string(check).c_str(), json_string(r.result).c_str(), json_value,
                   json_string(r.unit).c_str(), json_string(r.detail).c_str());
      std::fflush(jsonl_);
    }
  }

  std::string section_;
  std::vector<std::string> only_;
  std::FILE* md_ = nullptr;
  std::FILE* jsonl_ = nullptr;
  std::string fail_, hang_;
  int failures_ = 0;
};

}  // namespace bench::test
