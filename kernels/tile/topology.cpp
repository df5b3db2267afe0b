#include "topology.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

namespace bench::tile {

namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

int read_int(const fs::path& p) {
  const std::string s = read_line(p);
  try {
    return s.empty() ? -1 : std::stoi(s);
  } catch (const std::exception&) {
    return -1;
  }
}

/// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; anything unreadable -> what was read before it.
std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      const size_t dash = part.find('-');
      const int lo = std::stoi(part.substr(0, dash));
      const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) out.push_back(c);
    } catch (const std::exception&) {
      break;
    }
  }
  return out;
}

/// A cgroup hierarchy's mount: its root inside the hierarchy and where it is mounted.
struct Mount {
  std::string root, point;
};

/// The mounts of cgroup v2 (`cgroup2`) and of the v1 hierarchy holding the `cpu` controller, from
/// mountinfo ("id parent dev root mountpoint options ... - fstype source superoptions").
std::pair<std::optional<Mount>, std::optional<Mount>> cgroup_mounts(const fs::path& mountinfo) {
  std::optional<Mount> v2, v1;
  std::ifstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string id, parent, dev, root, point, field;
    ss >> id >> parent >> dev >> root >> point;
    while (ss >> field && field != "-") {
    }
    std::string fstype, source, super;
    ss >> fstype >> source >> super;
    if (fstype == "cgroup2" && !v2) v2 = Mount{root, point};
    if (fstype == "cgroup" && !v1) {
      std::stringstream opts(super);
      std::string o;
      while (std::getline(opts, o, ','))
        if (o == "cpu") v1 = Mount{root, point};
    }
  }
  return {v2, v1};
}

/// The directories from the process's cgroup up to the root of its hierarchy's mount.
std::vector<fs::path> cgroup_dirs(const fs::path& root, const Mount& m, const std::string& path) {
  const fs::path top = root / fs::path(m.point).relative_path();
  std::string rel;
  // Inside a cgroup namespace the mount's root is the process's cgroup ("/" and "/"); on the host
  // the path starts with the mount's root ("/" for a whole hierarchy).
  if (m.root == "/")
    rel = path;
  else if (path.rfind(m.root, 0) == 0)
    rel = path.substr(m.root.size());
  std::vector<fs::path> dirs;
  fs::path dir = top / fs::path(rel).relative_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) dir = top;
  for (;;) {
    dirs.push_back(dir);
    if (dir == top || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return dirs;
}

/// The limit in CPUs in one cgroup directory (v2 cpu.max, or v1 quota / period); 0: none.
double cgroup_limit(const fs::path& dir, bool v2, fs::path* file) {
  if (v2) {
    std::istringstream ss(read_line(dir / "cpu.max"));
    std::string quota;
    double period = 0;
    if (!(ss >> quota >> period) || quota == "max" || period <= 0) return 0;
    *file = dir / "cpu.max";
    try {
      return std::stod(quota) / period;
    } catch (const std::exception&) {
      return 0;
    }
  }
  const int quota = read_int(dir / "cpu.cfs_quota_us");
  const int period = read_int(dir / "cpu.cfs_period_us");
  if (quota <= 0 || period <= 0) return 0;
  *file = dir / "cpu.cfs_quota_us";
  return static_cast<double>(quota) / period;
}

std::string fixed(double v) {
  char buf[32];
  const bool tenths = std::fabs(v * 10 - std::round(v * 10)) < 1e-6;
  std::snprintf(buf, sizeof buf, tenths ? "%.1f" : "%.2f", v);
  return buf;
}

std::string plural(int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

}  // namespace

Topology read_topology(const std::string& root_dir, const std::vector<int>& allowed) {
  const fs::path root(root_dir.empty() ? "/" : root_dir);
  Topology t;
  const fs::path sys = root / "sys/devices/system/cpu";
  for (const int id : allowed) {
    CpuInfo c;
    c.id = id;
    const fs::path topo = sys / ("cpu" + std::to_string(id)) / "topology";
    c.core = read_int(topo / "core_id");
    c.package = read_int(topo / "physical_package_id");
    c.siblings = parse_cpu_list(read_line(topo / "thread_siblings_list"));
    t.cpus.push_back(std::move(c));
  }
  std::sort(t.cpus.begin(), t.cpus.end(), [](const CpuInfo& a, const CpuInfo& b) { return a.id < b.id; });
  t.online = static_cast<int>(parse_cpu_list(read_line(sys / "online")).size());

  // The process's cgroups: "0::/path" (v2), "N:cpu,cpuacct:/path" (v1).
  std::optional<std::string> path2, path1;
  {
    std::ifstream in(root / "proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      const size_t a = line.find(':');
      const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1);
      const std::string path = line.substr(b + 1);
      if (line.substr(0, a) == "0" && controllers.empty()) path2 = path;
      std::stringstream cs(controllers);
      std::string c;
      while (std::getline(cs, c, ','))
        if (c == "cpu") path1 = path;
    }
  }
  auto [m2, m1] = cgroup_mounts(root / "proc/self/mountinfo");
  // Without mountinfo, the usual places.
  if (!m2 && !m1) {
    m2 = Mount{"/", "/sys/fs/cgroup"};
    m1 = Mount{"/", "/sys/fs/cgroup/cpu"};
  }
  for (const bool v2 : {true, false}) {
    const auto& m = v2 ? m2 : m1;
    const auto& path = v2 ? path2 : path1;
    if (!m || !path) continue;
    for (const fs::path& dir : cgroup_dirs(root, *m, *path)) {
      fs::path file;
      const double limit = cgroup_limit(dir, v2, &file);
      if (limit > 0 && (t.quota == 0 || limit < t.quota)) {
        t.quota = limit;
        t.quota_file = file.string();
      }
    }
  }
  return t;
}

std::vector<int> affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

int usable_cpus(const Topology& t) {
  int n = std::max<int>(1, static_cast<int>(t.cpus.size()));
  if (t.quota > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(t.quota - 1e-9))));
  return n;
}

std::vector<int> placement_order(const Topology& t) {
  // Each CPU's core: (package, the first of its thread siblings), else (package, core id), else
  // the CPU alone. A VM whose vCPUs all claim core 0 with no siblings is one core of many CPUs:
  // its CPUs are still taken one by one.
  std::map<std::pair<int, int>, std::vector<int>> cores;  // key -> its CPUs, ascending
  // Packages in the order of their first CPU (an unknown package is one more).
  std::vector<std::pair<int, std::vector<std::pair<int, int>>>> by_package;
  for (const CpuInfo& c : t.cpus) {
    int lead = c.id;
    if (!c.siblings.empty())
      lead = *std::min_element(c.siblings.begin(), c.siblings.end());
    else if (c.core >= 0)
      lead = -1 - c.core;  // kept apart from CPU ids
    const std::pair<int, int> key{c.package, lead};
    auto& cpus = cores[key];
    if (cpus.empty()) {
      auto it = std::find_if(by_package.begin(), by_package.end(), [&](const auto& p) { return p.first == c.package; });
      if (it == by_package.end()) it = by_package.insert(by_package.end(), {c.package, {}});
      it->second.push_back(key);
    }
    cpus.push_back(c.id);
  }
  // Cores in turn from each package: p0 c0, p1 c0, p0 c1, p1 c1, ...
  std::vector<std::pair<int, int>> core_order;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (const auto& [package, keys] : by_package)
      if (i < keys.size()) {
        core_order.push_back(keys[i]);
        any = true;
      }
    if (!any) break;
  }
  std::vector<int> order;
  for (size_t round = 0; order.size() < t.cpus.size(); ++round)
    for (const auto& key : core_order)
      if (round < cores[key].size()) order.push_back(cores[key][round]);
  return order;
}

TeamPlan plan_team(const Topology& t, int requested, const std::string& requested_by) {
  const int mask = std::max<int>(1, static_cast<int>(t.cpus.size()));
  const int usable = usable_cpus(t);
  const bool quota_limits = t.quota > 0 && usable < mask;
  const std::string in_mask = plural(mask, "CPU") + " in the affinity mask" +
                              (t.online > mask ? " (of " + std::to_string(t.online) + " online)" : "");
  const std::string limit = quota_limits ? "cgroup quota " + fixed(t.quota) + " CPUs of " + in_mask : in_mask;
  TeamPlan p;
  p.threads = requested > 0 ? requested : usable;
  p.oversubscribed = p.threads > usable;
  p.why = plural(p.threads, "thread") + ": " +
          (requested > 0 ? requested_by + (p.oversubscribed ? " (oversubscribed: " + limit + ")" : "") : limit);
  p.workers = std::min(p.threads, usable);
  if (p.workers >= 2) {
    const std::vector<int> order = placement_order(t);
    p.cpu_of.assign(order.begin(), order.begin() + p.workers);
  }
  return p;
}

}  // namespace bench::tile
