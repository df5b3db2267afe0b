// defines: bench::kernels::emulator_test::throws — what the emulators' fault tests share
//          (wgmma_emulation_test.cpp, bulk_emulation_test.cpp): that a run throws the
//          emulator's std::logic_error with the expected message, and not for another reason
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace bench::kernels::emulator_test {

/// Whether f throws std::logic_error with `what` in its message (and not for another reason).
inline ::testing::AssertionResult throws(const std::function<void()>& f, const std::string& what) {
  try {
    f();
  } catch (const std::logic_error& e) {
    if (std::string(e.what()).find(what) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "threw: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace bench::kernels::emulator_test
