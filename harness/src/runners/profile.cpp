#include "runners/profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "bench/error.h"
#include "kernels/memory.h"
#include "kernels/tile/profile.h"
#include "kernels/tile/registry.h"
#include "model/component_calls.h"
#if BENCH_HAVE_CUDA
#include "kernels/device_runtime.h"
#endif

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

const std::string host_label = "(host)";                  // a component's time outside its kernels
const std::string between_kernels = "(between kernels)";  // a GPU step's time outside every kernel

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// The readable name of what a KernelScope reported: a launcher's own label ("gemm NT") as it
/// is; a tile program's mangled type name (from tile::launch) demangled, without its namespaces
/// ("NormForward<float, 128>").
std::string kernel_label(const char* name) {
  std::string raw = name;
  if (raw.find(' ') != std::string::npos) return raw;  // mangled names have no spaces
  const std::string full = tile::program_name(name);
  const size_t open = full.find('<');
  const size_t colon = full.rfind("::", open);
  return colon == std::string::npos ? full : full.substr(colon + 2);
}

/// One line of the profile while a step runs: its identity and this step's sums.
struct Line {
  ProfileRow row;               ///< identity, calls, bytes and flops of one step
  std::vector<double> step_ms;  ///< its time in each profiled step
  double ms = 0;                ///< in the step running now
  int64_t calls = 0;
  double bytes = 0, flops = 0;
  bool undeclared = false;
};

class Profiler final : public tile::LaunchObserver, public ComponentListener {
 public:
  Profiler(const tile::Exec& exec, std::string mode) : exec_(exec), mode_(std::move(mode)) {}

  /// One step: enqueue, wait, and fold its times into the lines.
  double run(const std::function<void()>& enqueue) {
    static const ComponentTag step_tag{"", "model", ""};
    for (Line& l : lines_) {
      l.ms = 0;
      l.calls = 0;
      l.bytes = 0;
      l.flops = 0;
      l.undeclared = false;
    }
    pending_.clear();
#if BENCH_HAVE_CUDA
    if (device()) marks_.clear();
    const size_t first = device() ? marks_.record(exec_.stream) : 0;
#endif
    const Clock::time_point t0 = Clock::now();
    frames_.push_back({&step_tag, Pass::kStep, t0});
    enqueue();
#if BENCH_HAVE_CUDA
    const size_t last = device() ? marks_.record(exec_.stream) : 0;
#endif
    kernels::synchronize(exec_);
    pop_frame(Clock::now());
    double step_ms = ms_between(t0, Clock::now());
#if BENCH_HAVE_CUDA
    if (device()) {
      // Kernel times from their events; the rest of the step is time between kernels.
      step_ms = marks_.elapsed_ms(first, last);
      double kernels_ms = 0;
      for (const Pending& p : pending_) {
        const double ms = marks_.elapsed_ms(p.begin, p.end);
        lines_[p.line].ms += ms;
        kernels_ms += ms;
      }
      line(step_tag, Pass::kStep, between_kernels).ms = std::max(0.0, step_ms - kernels_ms);
    }
#endif
    for (Line& l : lines_) {
      l.step_ms.push_back(l.ms);
      if (l.calls > 0 || l.row.calls == 0) {  // the same in every step; "(host)" lines have none
        l.row.calls = l.calls;
        l.row.bytes = l.undeclared || l.calls == 0 ? NAN : l.bytes;
        l.row.flops = l.undeclared || l.calls == 0 ? NAN : l.flops;
      }
    }
    ++steps_;
    return step_ms;
  }

  std::vector<ProfileRow> rows() const {
    std::vector<ProfileRow> out;
    for (const Line& l : lines_) {
      ProfileRow r = l.row;  // ms: the mean over the steps
      std::vector<double> v = l.step_ms;
      v.resize(static_cast<size_t>(steps_), 0.0);  // a line first seen in a later step
      r.ms = v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
      out.push_back(std::move(r));
    }
    return out;
  }

  // ComponentListener
  void enter(const ComponentTag& tag, Pass pass) override { frames_.push_back({&tag, pass, Clock::now()}); }
  void leave() override {
    if (!frames_.empty()) pop_frame(Clock::now());
  }

  // tile::LaunchObserver
  void begin(const tile::Exec& exec, const char* name) override {
    (void)name;
#if BENCH_HAVE_CUDA
    if (exec.backend == tile::Backend::kCuda) {
      begin_mark_ = marks_.record(exec.stream);
      return;
    }
#endif
    (void)exec;
    kernel_start_ = Clock::now();
  }
  void end(const tile::Exec& exec, const char* name, const tile::Traffic& traffic) override {
    // The kernel's end first: the bookkeeping below is not its time.
    const Clock::time_point now = Clock::now();
#if BENCH_HAVE_CUDA
    const size_t end_mark = exec.backend == tile::Backend::kCuda ? marks_.record(exec.stream) : 0;
#endif
    if (frames_.empty()) return;  // outside a profiled step (not expected: installed around steps)
    const Frame& f = frames_.back();
    const size_t at = index(*f.tag, f.pass, label(name));
    Line& l = lines_[at];
    ++l.calls;
    if (traffic.bytes < 0 || traffic.flops < 0) {
      l.undeclared = true;
    } else {
      l.bytes += traffic.bytes;
      l.flops += traffic.flops;
    }
#if BENCH_HAVE_CUDA
    if (exec.backend == tile::Backend::kCuda) {
      pending_.push_back({at, begin_mark_, end_mark});
      return;
    }
#endif
    (void)exec;
    const double ms = ms_between(kernel_start_, now);
    l.ms += ms;
    frames_.back().kernels_ms += ms;
  }

 private:
  struct Frame {
    const ComponentTag* tag;
    Pass pass;
    Clock::time_point entered;
    double children_ms = 0;  ///< wall time of the component calls inside it
    double kernels_ms = 0;   ///< time of its own kernels
  };
  struct Pending {
    size_t line, begin, end;
  };

  bool device() const { return exec_.backend == tile::Backend::kCuda; }

  /// kernel_label(name), demangled once per name (names live as long as the process).
  const std::string& label(const char* name) {
    auto it = labels_.find(name);
    if (it == labels_.end()) it = labels_.emplace(name, kernel_label(name)).first;
    return it->second;
  }

  /// A frame ends: on the host its time outside kernels and children is its "(host)" line.
  void pop_frame(Clock::time_point now) {
    const Frame f = frames_.back();
    frames_.pop_back();
    const double wall = ms_between(f.entered, now);
    if (!device()) {
      const double host = wall - f.children_ms - f.kernels_ms;
      if (host > 0) line(*f.tag, f.pass, host_label).ms += host;
    }
    if (!frames_.empty()) frames_.back().children_ms += wall;
  }

  /// The line of (component call, pass, kernel). `tag` and `kernel` must outlive the profiler:
  /// they are its key by address (each wrapped component has its own tag, each name one label),
  /// so that a launch costs no string copies.
  size_t index(const ComponentTag& tag, Pass pass, const std::string& kernel) {
    const auto key = std::make_tuple(&tag, pass, &kernel);
    const auto it = by_key_.find(key);
    if (it != by_key_.end()) return it->second;
    Line l;
    l.row.mode = mode_;
    l.row.scope = tag.scope;
    l.row.slot = tag.slot;
    l.row.component = tag.component;
    l.row.pass = pass_name(pass);
    l.row.kernel = kernel;
    l.step_ms.assign(static_cast<size_t>(steps_), 0.0);
    lines_.push_back(std::move(l));
    by_key_.emplace(key, lines_.size() - 1);
    return lines_.size() - 1;
  }
  Line& line(const ComponentTag& tag, Pass pass, const std::string& kernel) { return lines_[index(tag, pass, kernel)]; }

  tile::Exec exec_;
  std::string mode_;
  std::vector<Line> lines_;
  std::map<std::tuple<const ComponentTag*, Pass, const std::string*>, size_t> by_key_;
  std::vector<Frame> frames_;
  std::map<const char*, std::string> labels_;
  Clock::time_point kernel_start_;
  int steps_ = 0;
  std::vector<Pending> pending_;
#if BENCH_HAVE_CUDA
  kernels::cuda::EventMarks marks_;
  size_t begin_mark_ = 0;
#endif
};

/// Installs a profiler as the thread's launch observer and component listener while it exists.
class Installed {
 public:
  explicit Installed(Profiler& p) : observer_(tile::observe_launches(&p)), listener_(listen_components(&p)) {}
  ~Installed() {
    tile::observe_launches(observer_);
    listen_components(listener_);
  }
  Installed(const Installed&) = delete;
  Installed& operator=(const Installed&) = delete;

 private:
  tile::LaunchObserver* observer_;
  ComponentListener* listener_;
};

}  // namespace

StepProfile profile_step(const tile::Exec& exec, const std::string& mode, const std::function<void()>& enqueue,
                         int steps) {
  if (steps < 1) throw Error("profile: the profiled steps must be at least 1");
  enqueue();  // warm-up, unobserved
  kernels::synchronize(exec);
  Profiler profiler(exec, mode);
  std::vector<double> step_ms;
  {
    const Installed on(profiler);
    for (int i = 0; i < steps; ++i) step_ms.push_back(profiler.run(enqueue));
  }
  StepProfile out;
  out.rows = profiler.rows();
  out.step_ms = std::accumulate(step_ms.begin(), step_ms.end(), 0.0) / static_cast<double>(step_ms.size());
  return out;
}

}  // namespace bench
