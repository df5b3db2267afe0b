// Inline SVG charts for the HTML report: our own code, no scripts, fixed pixel layout.
#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace bench::report::svg {

namespace {

// Layout of a line chart, in pixels.
constexpr double kWidth = 660, kHeight = 320;
constexpr double kLeft = 60, kRight = 200, kTop = 34, kBottom = 46;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr size_t kMaxLegendChars = 30;

// Layout of a bar chart.
constexpr double kBarLabelW = 240, kBarPlotW = 320, kBarRightW = 100, kBarRowH = 24, kBarTop = 34, kBarBottom = 44;

/// A mapping from data to pixels along one axis.
struct Scale {
  double lo = 0, hi = 1, p0 = 0, p1 = 1;
  bool log = false;
  double t(double v) const { return log ? std::log10(v) : v; }
  double operator()(double v) const {
    const double a = t(lo), b = t(hi);
    return p0 + (t(v) - a) / (b - a) * (p1 - p0);
  }
  bool valid(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

/// Data range of the valid values, padded a little (by a factor on log axes).
std::pair<double, double> padded_range(const std::vector<double>& values, bool log, double pad) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) return log ? std::make_pair(1.0, 10.0) : std::make_pair(0.0, 1.0);
  if (log) {
    if (hi / lo < 1.0001) return {lo / 1.5, hi * 1.5};
    const double f = std::pow(hi / lo, pad);
    return {lo / f, hi * f};
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi)))
    return {lo - std::max(0.5, std::fabs(lo) * 0.1), hi + std::max(0.5, std::fabs(hi) * 0.1)};
  const double d = (hi - lo) * pad;
  return {lo - d, hi + d};
}

std::string num(double v) { return fmt::format("{:.1f}", v); }

std::string cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "…"; }

/// The path of a series: pixel points, a gap at invalid values, at most a min and a max per pixel
/// column so that long series stay small without losing their spikes.
std::string path_data(const Series& s, const Scale& sx, const Scale& sy) {
  std::string d;
  bool pen_down = false;
  long column = std::numeric_limits<long>::min();
  std::vector<std::pair<double, double>> bucket;  // pixel points of the current column
  const auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<std::pair<double, double>> keep = {bucket.front()};
    if (bucket.size() > 2) {
      const auto [mn, mx] = std::minmax_element(bucket.begin(), bucket.end(),
                                                [](const auto& a, const auto& b) { return a.second < b.second; });
      if (mn < mx)
        keep.push_back(*mn), keep.push_back(*mx);
      else
        keep.push_back(*mx), keep.push_back(*mn);
    }
    if (bucket.size() > 1) keep.push_back(bucket.back());
    for (const auto& [x, y] : keep) {
      d += fmt::format("{}{} {} ", pen_down ? "L" : "M", num(x), num(y));
      pen_down = true;
    }
    bucket.clear();
  };
  for (const Point& p : s.points) {
    if (!sx.valid(p.x) || !sy.valid(p.y)) {
      flush();
      pen_down = false;
      column = std::numeric_limits<long>::min();
      continue;
    }
    const double x = sx(p.x), y = sy(p.y);
    const long c = std::lround(x);
    if (c != column) flush();
    column = c;
    bucket.emplace_back(x, y);
  }
  flush();
  if (!d.empty()) d.pop_back();
  return d;
}

std::string open_svg(const std::string& id, double w, double h, const std::string& title) {
  return fmt::format(
      "<svg class=\"chart\" id=\"{}\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#fff\"/>\n"
      "<text class=\"title\" x=\"{}\" y=\"20\">{}</text>\n",
      escape(id), num(w), num(h), num(w), num(h), escape(title), num(w), num(h), num(8), escape(title));
}

}  // namespace

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string figure(const std::string& kind, const std::string& chart, const std::string& caption) {
  return fmt::format("<figure class=\"plot\" data-kind=\"{}\">\n{}<figcaption>{}</figcaption>\n</figure>\n", kind,
                     chart, caption);
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::vector<double> log_ticks(double lo, double hi) {
  const double decades = std::log10(hi / lo);
  if (decades < 1) return linear_ticks(lo, hi, 4);
  std::vector<double> t;
  const std::vector<double> mult = decades <= 2.5 ? std::vector<double>{1, 2, 5} : std::vector<double>{1};
  const int step = decades > 8 ? 2 : 1;
  for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi)));
       e += step)
    for (double m : mult) {
      const double v = m * std::pow(10.0, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
    }
  return t;
}

std::string tick_text(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e4 && a < 1e6 && v == std::round(v)) return fmt::format("{:.0f}", v);
  if (a >= 1e6 || a < 1e-3) {
    std::string s = fmt::format("{:.0e}", v);
    // 1e+05 -> 1e5, 3e-04 -> 3e-4
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    const bool neg = ex[0] == '-';
    ex = ex.substr(1);
    while (ex.size() > 1 && ex[0] == '0') ex.erase(0, 1);
    return mant + "e" + (neg ? "-" : "") + ex;
  }
  return fmt::format("{:.4g}", v);
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> p = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                             "#8c564b", "#e377c2", "#5f5f5f", "#a5a51c", "#17a2b8"};
  return p;
}

const std::vector<std::string>& dashes() {
  static const std::vector<std::string> d = {"", "7 4", "2 3", "9 3 2 3"};
  return d;
}

std::string line_chart(const LineChart& c) {
  std::vector<double> xs, ys;
  for (const Series& s : c.series) {
    for (const Point& p : s.points) xs.push_back(p.x), ys.push_back(p.y);
    for (double x : s.flagged_x) xs.push_back(x);
  }
  for (const Reference& r : c.references) ys.push_back(r.y);
  const auto [x0, x1] = padded_range(xs, c.x.log, c.x.log ? 0.02 : 0.0);
  const auto [y0, y1] = padded_range(ys, c.y.log, 0.04);
  const Scale sx{x0, x1, kLeft, kLeft + kPlotW, c.x.log};
  const Scale sy{y0, y1, kTop + kPlotH, kTop, c.y.log};

  std::string o = open_svg(c.id, kWidth, kHeight, c.title);
  o += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", num(kLeft), num(kTop),
                   num(kPlotW), num(kPlotH));
  // Grid and ticks.
  for (double t : c.x.log ? log_ticks(x0, x1) : linear_ticks(x0, x1, 6)) {
    const double px = sx(t);
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>", num(px), num(kTop),
                     num(kTop + kPlotH));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(px),
                     num(kTop + kPlotH + 15), tick_text(t));
  }
  for (double t : c.y.log ? log_ticks(y0, y1) : linear_ticks(y0, y1, 5)) {
    const double py = sy(t);
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>", num(kLeft), num(py),
                     num(kLeft + kPlotW));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 5),
                     num(py + 4), tick_text(t));
  }
  o += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(kLeft + kPlotW / 2),
                   num(kHeight - 8), escape(c.x.label + (c.x.log ? " (log scale)" : "")));
  o += fmt::format("<text class=\"axis\" transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   num(kTop + kPlotH / 2), escape(c.y.label + (c.y.log ? " (log)" : "")));

  for (const Reference& r : c.references) {
    if (!sy.valid(r.y)) continue;
    o += fmt::format("<line class=\"reference\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>", num(kLeft),
                     num(sy(r.y)), num(kLeft + kPlotW));
    o += fmt::format("<text class=\"reference-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                     num(kLeft + kPlotW - 4), num(sy(r.y) - 4), escape(r.label));
  }

  for (const Series& s : c.series) {
    const std::string d = path_data(s, sx, sy);
    const std::string dash = s.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", s.dash);
    if (!d.empty())
      o += fmt::format("<path class=\"series\" d=\"{}\" stroke=\"{}\"{}><title>{}</title></path>\n", d, s.color, dash,
                       escape(s.name));
    if (s.markers)
      for (const Point& p : s.points)
        if (sx.valid(p.x) && sy.valid(p.y))
          o += fmt::format(
              "<circle class=\"marker\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{}: {}</title></circle>",
              num(sx(p.x)), num(sy(p.y)), s.color, escape(s.name), tick_text(p.y));
    for (double x : s.flagged_x) {
      if (!sx.valid(x)) continue;
      const double px = sx(x), py = kTop + 8;
      o += fmt::format(
          "<path class=\"flag\" d=\"M{} {} L{} {} M{} {} L{} {}\" stroke=\"{}\"><title>{}: {}</title></path>",
          num(px - 5), num(py - 5), num(px + 5), num(py + 5), num(px - 5), num(py + 5), num(px + 5), num(py - 5),
          s.color, escape(s.name), escape(c.flag_label));
    }
  }

  // Legend, right of the plot.
  double ly = kTop + 6;
  const double lx = kLeft + kPlotW + 14;
  o += "<g class=\"legend\">";
  if (!c.legend_title.empty()) {
    o += fmt::format("<text class=\"legend-title\" x=\"{}\" y=\"{}\">{}</text>", num(lx), num(ly + 4),
                     escape(cut(c.legend_title, kMaxLegendChars + 4)));
    ly += 17;
  }
  std::map<std::string, bool> shown;  // one entry per name (seeds share theirs)
  for (const Series& s : c.series) {
    if (shown[s.name + s.color + s.dash]) continue;
    shown[s.name + s.color + s.dash] = true;
    if (ly > kHeight - 12) break;
    const std::string dash = s.dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", s.dash);
    o += fmt::format("<line class=\"legend-line\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"{3}\"{4}/>",
                     num(lx), num(lx + 24), num(ly), s.color, dash);
    o += fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\"><title>{}</title>{}</text>", num(lx + 30),
                     num(ly + 4), escape(s.name), escape(cut(s.name, kMaxLegendChars)));
    ly += 17;
  }
  o += "</g>\n</svg>\n";
  return o;
}

std::string bar_chart(const BarChart& c) {
  const double height = kBarTop + kBarRowH * static_cast<double>(c.bars.size()) + kBarBottom;
  const double width = kBarLabelW + kBarPlotW + kBarRightW;
  // The axis covers the bars and their error bars; a slow outlier repetition far beyond them
  // would squash every bar, so the axis stops short of it and its whisker ends in an arrow.
  double core = 0, all = 0;
  for (const Bar& b : c.bars) {
    core = std::max({core, b.value, b.err_hi});
    all = std::max({all, core, b.max});
    for (double x : b.samples) all = std::max(all, x);
  }
  if (!(core > 0)) core = all > 0 ? all : 1;
  const double hi = all > 2.5 * core ? 1.6 * core : std::max(all, core);
  const auto ticks = linear_ticks(0, hi * 1.02, 5);
  const double top = std::max(hi * 1.02, ticks.empty() ? hi : ticks.back());
  const Scale sx{0, top, kBarLabelW, kBarLabelW + kBarPlotW, false};
  const double right = sx(top);
  const auto px = [&](double v) { return std::min(sx(std::max(0.0, v)), right); };
  const double plot_bottom = kBarTop + kBarRowH * static_cast<double>(c.bars.size());

  std::string o = open_svg(c.id, width, height, c.title);
  for (double t : ticks) {
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>", num(sx(t)), num(kBarTop - 4),
                     num(plot_bottom));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(sx(t)),
                     num(plot_bottom + 15), tick_text(t));
  }
  o += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   num(kBarLabelW + kBarPlotW / 2), num(height - 8), escape(c.x_label));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    const double y = kBarTop + kBarRowH * static_cast<double>(i);
    const double mid = y + kBarRowH / 2;
    o += fmt::format("<text class=\"bar-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>",
                     num(kBarLabelW - 8), num(mid + 4), escape(b.label), escape(cut(b.label, 40)));
    o += fmt::format(
        "<rect class=\"bar{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {}</title></rect>",
        b.noisy ? " noisy" : "", num(sx(0)), num(y + 5), num(std::max(0.0, px(b.value) - sx(0))), num(kBarRowH - 10),
        c.color, escape(b.label), escape(b.value_text));
    // min..max whisker (thin), err_lo..err_hi (thick), samples (dots); beyond the axis: an arrow.
    o += fmt::format("<line class=\"whisker\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\"/>", num(px(b.min)),
                     num(px(b.max)), num(mid));
    for (double w : {b.min, b.max})
      if (sx(w) <= right)
        o += fmt::format("<line class=\"whisker\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>", num(sx(w)),
                         num(mid - 4), num(mid + 4));
    const bool clipped = sx(b.max) > right;
    if (clipped)
      o += fmt::format(
          "<path class=\"clip-arrow\" d=\"M{0} {1} L{2} {3} L{0} {4} Z\"><title>slowest repetition {5}</title></path>",
          num(right - 7), num(mid - 4), num(right), num(mid), num(mid + 4), tick_text(b.max));
    o += fmt::format("<line class=\"errorbar\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\"/>", num(px(b.err_lo)),
                     num(px(b.err_hi)), num(mid));
    for (double x : b.samples)
      if (sx(x) <= right)
        o += fmt::format("<circle class=\"sample\" cx=\"{}\" cy=\"{}\" r=\"2.2\"/>", num(sx(x)), num(mid));
    const std::string text = clipped ? fmt::format("{} (max {:.3g})", b.value_text, b.max) : b.value_text;
    o += fmt::format("<text class=\"bar-value\" x=\"{}\" y=\"{}\">{}</text>\n",
                     num(std::max(px(b.max), px(b.value)) + 6), num(mid + 4), escape(text));
  }
  o += "</svg>\n";
  return o;
}

std::string roofline_chart(const RooflineChart& c) {
  // The axes cover every mark and, for every roof, its ridge point a factor 4 either way, so that
  // both ceilings show: the slope from a quarter of the compute roof, and a little above it.
  std::vector<double> xs, ys;
  const auto drawable = [](const Mark& m) { return std::isfinite(m.x) && m.x > 0 && std::isfinite(m.y) && m.y > 0; };
  for (const MarkGroup& g : c.groups)
    for (const Mark& m : g.marks)
      if (drawable(m)) xs.push_back(m.x), ys.push_back(m.y);
  for (const Roof& r : c.roofs) {
    if (!(r.gbps > 0 && r.gflops > 0)) continue;
    const double ridge = r.gflops / r.gbps;
    xs.push_back(ridge / 4), xs.push_back(ridge * 4), ys.push_back(r.gflops / 4), ys.push_back(r.gflops * 1.5);
  }
  const auto [x0, x1] = padded_range(xs, true, 0.05);
  const auto [y0, y1] = padded_range(ys, true, 0.05);
  const Scale sx{x0, x1, kLeft, kLeft + kPlotW, true};
  const Scale sy{y0, y1, kTop + kPlotH, kTop, true};

  std::string o = open_svg(c.id, kWidth, kHeight, c.title);
  o += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", num(kLeft), num(kTop),
                   num(kPlotW), num(kPlotH));
  for (double t : log_ticks(x0, x1)) {
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>", num(sx(t)), num(kTop),
                     num(kTop + kPlotH));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(sx(t)),
                     num(kTop + kPlotH + 15), tick_text(t));
  }
  for (double t : log_ticks(y0, y1)) {
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>", num(kLeft), num(sy(t)),
                     num(kLeft + kPlotW));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 5),
                     num(sy(t) + 4), tick_text(t));
  }
  o += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(kLeft + kPlotW / 2),
                   num(kHeight - 8), "arithmetic intensity, FLOP/byte (log scale)");
  o += fmt::format("<text class=\"axis\" transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   num(kTop + kPlotH / 2), "achieved GFLOP/s (log)");

  // Ceilings, clipped to the plot: y = gbps * x up to the ridge, then y = gflops.
  for (const Roof& r : c.roofs) {
    if (!(r.gbps > 0 && r.gflops > 0)) continue;
    const double ridge = r.gflops / r.gbps;
    const std::string suffix = r.label.empty() ? "" : " (" + r.label + ")";
    const double a = std::max(x0, y0 / r.gbps), b = std::min({ridge, x1, y1 / r.gbps});
    if (a < b)
      o += fmt::format(
          "<path class=\"ceiling bandwidth\" d=\"M{} {} L{} {}\"><title>copy bandwidth {} GB/s{}</title></path>"
          "<text class=\"reference-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{} GB/s</text>\n",
          num(sx(a)), num(sy(r.gbps * a)), num(sx(b)), num(sy(r.gbps * b)), tick_text(r.gbps), escape(suffix),
          num(sx(std::sqrt(a * b)) - 6), num(sy(r.gbps * std::sqrt(a * b)) - 6), tick_text(r.gbps));
    if (ridge < x1 && r.gflops >= y0 && r.gflops <= y1)
      o += fmt::format(
          "<path class=\"ceiling compute\" d=\"M{0} {1} L{2} {1}\"><title>GEMM rate {3} GFLOP/s{4}, ridge {5} "
          "FLOP/byte</title></path><text class=\"reference-label\" x=\"{7}\" y=\"{6}\" text-anchor=\"end\">{3} "
          "GFLOP/s</text>\n",
          num(sx(std::max(ridge, x0))), num(sy(r.gflops)), num(kLeft + kPlotW), tick_text(r.gflops), escape(suffix),
          tick_text(ridge), num(sy(r.gflops) - 5), num(kLeft + kPlotW - 4));
  }

  for (const MarkGroup& g : c.groups)
    for (const Mark& m : g.marks)
      if (drawable(m))
        o += fmt::format(
            "<circle class=\"marker{}\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>\n",
            m.pale ? " noisy" : "", num(sx(m.x)), num(sy(m.y)), g.color, escape(m.tooltip));

  double ly = kTop + 6;
  const double lx = kLeft + kPlotW + 14;
  o += "<g class=\"legend\">";
  for (const MarkGroup& g : c.groups) {
    if (ly > kHeight - 12) break;
    o += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>", num(lx + 8), num(ly), g.color);
    o += fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\"><title>{}</title>{}</text>", num(lx + 20),
                     num(ly + 4), escape(g.name), escape(cut(g.name, kMaxLegendChars)));
    ly += 17;
  }
  o += "</g>\n</svg>\n";
  return o;
}

std::string stacked_bar_chart(const StackedBarChart& c) {
  constexpr double kLegendW = 170;
  const double plot_bottom = kBarTop + kBarRowH * static_cast<double>(c.bars.size());
  const double height = std::max(plot_bottom, kBarTop + 17 * static_cast<double>(c.keys.size())) + kBarBottom;
  const double width = kBarLabelW + kBarPlotW + kBarRightW + kLegendW;
  double hi = 0;
  for (const StackedBar& b : c.bars) {
    double sum = 0;
    for (const Segment& s : b.segments) sum += std::max(0.0, s.value);
    hi = std::max(hi, sum);
  }
  if (!(hi > 0)) hi = 1;
  const auto ticks = linear_ticks(0, hi * 1.02, 5);
  const double top = std::max(hi * 1.02, ticks.empty() ? hi : ticks.back());
  const Scale sx{0, top, kBarLabelW, kBarLabelW + kBarPlotW, false};

  std::string o = open_svg(c.id, width, height, c.title);
  for (double t : ticks) {
    o += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>", num(sx(t)), num(kBarTop - 4),
                     num(plot_bottom));
    o += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(sx(t)),
                     num(plot_bottom + 15), tick_text(t));
  }
  o += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   num(kBarLabelW + kBarPlotW / 2), num(plot_bottom + 36), escape(c.x_label));
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const StackedBar& b = c.bars[i];
    const double y = kBarTop + kBarRowH * static_cast<double>(i);
    const double mid = y + kBarRowH / 2;
    o += fmt::format("<text class=\"bar-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>",
                     num(kBarLabelW - 8), num(mid + 4), escape(b.label), escape(cut(b.label, 40)));
    double at = 0;
    for (const Segment& s : b.segments) {
      if (!(s.value > 0) || s.key >= c.keys.size()) continue;
      o += fmt::format(
          "<rect class=\"bar{}\" data-key=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}"
          "</title></rect>",
          b.noisy ? " noisy" : "", escape(c.keys[s.key].first), num(sx(at)), num(y + 5), num(sx(at + s.value) - sx(at)),
          num(kBarRowH - 10), c.keys[s.key].second, escape(s.tooltip));
      at += s.value;
    }
    o += fmt::format("<text class=\"bar-value\" x=\"{}\" y=\"{}\">{}</text>\n", num(sx(at) + 6), num(mid + 4),
                     escape(b.value_text));
  }
  const double lx = kBarLabelW + kBarPlotW + kBarRightW + 10;
  o += "<g class=\"legend\">";
  for (size_t k = 0; k < c.keys.size(); ++k) {
    const double ly = kBarTop + 17 * static_cast<double>(k);
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", num(lx), num(ly),
                     c.keys[k].second);
    o += fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\">{}</text>", num(lx + 18), num(ly + 10),
                     escape(cut(c.keys[k].first, 22)));
  }
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace bench::report::svg
