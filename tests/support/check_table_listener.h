// defines: bench::test::CheckTableListener — kernels_test's tests as rows of a CheckTable
// (support/check_table.h), for scripts/gpu-check.sh on a GPU
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/check_table.h"

namespace bench::test {

/// A GoogleTest listener that writes a CheckTable row for every test as it ends (PASS, FAIL with
/// the first failure's message, SKIPPED with the skip's message) and probes the device after it.
class CheckTableListener : public ::testing::EmptyTestEventListener {
 public:
  explicit CheckTableListener(CheckTable& table) : table_(table) {}

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult& r = *info.result();
    std::string first;
    for (int i = 0; i < r.total_part_count(); ++i) {
      const ::testing::TestPartResult& part = r.GetTestPartResult(i);
      if (first.empty() || part.failed()) {
        first = part.message();
        if (part.failed()) break;
      }
    }
    first = first.substr(0, first.find('\n'));
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    const std::string ms = std::to_string(r.elapsed_time()) + " ms";
    if (r.Skipped())
      table_.finish(name, CheckResult::skipped(first));
    else if (r.Failed())
      table_.finish(name, CheckResult::fail(first));
    else
      table_.finish(name, CheckResult::pass(ms));
  }

 private:
  CheckTable& table_;
};

}  // namespace bench::test
