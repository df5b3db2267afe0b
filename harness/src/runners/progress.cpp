#include "runners/progress.h"

#include <unistd.h>

#include <cstdio>

namespace bench {

Progress::Progress(bool quiet) : enabled_(!quiet && isatty(STDERR_FILENO) != 0), quiet_(quiet) {}

Progress::~Progress() { clear(); }

void Progress::update(const std::string& line, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && shown_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  std::string l = line.size() > 150 ? line.substr(0, 147) + "..." : line;
  std::fprintf(stderr, "\r\033[K%s", l.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (enabled_ && shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }
}

void Progress::note(const std::string& line) {
  if (quiet_) return;
  clear();
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace bench
