// defines: bench::Progress — one self-overwriting status line on stderr, only on a terminal
#pragma once

#include <chrono>
#include <string>

namespace bench {

class Progress {
 public:
  /// Enabled when stderr is a TTY and `quiet` is false.
  explicit Progress(bool quiet);
  ~Progress();
  /// Replace the status line (rate-limited to 10 per second unless `force`).
  void update(const std::string& line, bool force = false);
  /// Clear the status line (before printing regular output).
  void clear();
  /// Print a permanent line to stderr (not rate-limited), keeping the status line below it.
  void note(const std::string& line);
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  bool quiet_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace bench
