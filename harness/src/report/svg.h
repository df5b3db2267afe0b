// defines: bench::report::svg — line charts (linear or log axes, gaps, legend, reference lines),
// horizontal bar charts with error bars, rooflines and stacked bars, written as inline SVG text.
// Private to report/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bench::report::svg {

/// A point; a non-finite y (or a non-positive one on a log axis) breaks the line there.
struct Point {
  double x = 0, y = 0;
};

struct Series {
  std::string name;               ///< legend text (and tooltip)
  std::string color = "#1f77b4";  ///< CSS colour
  std::string dash;               ///< SVG stroke-dasharray; empty = solid
  std::vector<Point> points;
  bool markers = false;           ///< a dot on every point
  std::vector<double> flagged_x;  ///< x of outcomes without a value (diverged): a cross on the top edge
};

struct Axis {
  std::string label;
  bool log = false;
};

/// A dashed horizontal line across the plot with a label at its right end.
struct Reference {
  double y = 0;
  std::string label;
};

struct LineChart {
  std::string id;     ///< element id, unique in the page
  std::string title;  ///< drawn above the plot
  Axis x, y;
  std::vector<Series> series;
  std::vector<Reference> references;
  std::string legend_title;  ///< drawn above the legend entries, e.g. the swept keys
  std::string flag_label = "diverged";
};

/// One bar: a value with an inner error bar (err_lo..err_hi), an outer whisker (min..max) and
/// the individual samples as dots.
struct Bar {
  std::string label;
  double value = 0, err_lo = 0, err_hi = 0, min = 0, max = 0;
  std::vector<double> samples;
  std::string value_text;  ///< printed right of the bar
  bool noisy = false;      ///< drawn as class "bar noisy" (a measurement above its noise target)
};

struct BarChart {
  std::string id, title, x_label;
  std::vector<Bar> bars;
  std::string color = "#4e79a7";
};

/// A chart (one of the functions below) as a report's <figure class="plot" data-kind="kind">
/// with its caption (HTML, escaped by the caller).
std::string figure(const std::string& kind, const std::string& chart, const std::string& caption);

/// The chart as an <svg class="chart"> element: each series a <path class="series"> (and
/// <circle class="marker"> dots), a legend, ticks and grid lines, axis labels.
std::string line_chart(const LineChart& c);
/// The chart as an <svg class="chart">: each bar a <rect class="bar">, error bars as lines.
std::string bar_chart(const BarChart& c);

/// A roofline's two ceilings, measured on the device: the bandwidth slope (gbps x intensity) up
/// to the ridge point gflops / gbps, and the flat compute roof after it.
struct Roof {
  double gbps = 0, gflops = 0;
  std::string label;  ///< the device or dtype they belong to; may be empty
};

/// A kernel on a roofline: x its arithmetic intensity (FLOP/byte), y its achieved GFLOP/s.
struct Mark {
  double x = 0, y = 0;
  std::string tooltip;
  bool pale = false;  ///< drawn as class "marker noisy" (its timing was marked noisy)
};

/// The marks of one variant, in one colour.
struct MarkGroup {
  std::string name, color = "#1f77b4";
  std::vector<Mark> marks;
};

struct RooflineChart {
  std::string id, title;
  std::vector<Roof> roofs;
  std::vector<MarkGroup> groups;
};

/// The roofline on log-log axes as an <svg class="chart">: per roof a <path class="ceiling
/// bandwidth"> and a <path class="ceiling compute">, each mark a <circle class="marker"> with a
/// <title>, a legend of the groups. Marks with a non-positive or non-finite x or y are left out.
std::string roofline_chart(const RooflineChart& c);

/// One part of a stacked bar: `key` indexes StackedBarChart::keys.
struct Segment {
  size_t key = 0;
  double value = 0;
  std::string tooltip;
};

struct StackedBar {
  std::string label;
  std::vector<Segment> segments;  ///< drawn left to right
  std::string value_text;         ///< printed right of the bar
  bool noisy = false;             ///< its segments drawn as class "bar noisy"
};

/// Horizontal bars split into coloured parts, the same key in the same colour on every bar.
struct StackedBarChart {
  std::string id, title, x_label;
  std::vector<std::pair<std::string, std::string>> keys;  ///< (name, colour), the legend in order
  std::vector<StackedBar> bars;
};

/// The chart as an <svg class="chart">: each segment a <rect class="bar" data-key="..."> with a
/// <title>, a legend of the keys right of the bars.
std::string stacked_bar_chart(const StackedBarChart& c);

/// Text escaped for XML and HTML (& < > " ').
std::string escape(std::string_view s);

/// Round tick positions ("nice numbers": 1, 2, 5 x 10^k steps) covering [lo, hi], about `target` of them.
std::vector<double> linear_ticks(double lo, double hi, int target);
/// Tick positions for a log axis over [lo, hi] (lo > 0): powers of ten, with 2 and 5 between
/// them when the range spans few decades, or linear ticks when it spans less than one.
std::vector<double> log_ticks(double lo, double hi);
/// A tick label: 4 significant digits at most, exponents for very large or small values (1e-05).
std::string tick_text(double v);

/// Colours for series, distinguishable on white (matplotlib's tab10, darker yellow and grey).
const std::vector<std::string>& palette();
/// Dash patterns for a second distinguishing dimension: solid, dashed, dotted, dash-dot.
const std::vector<std::string>& dashes();

}  // namespace bench::report::svg
