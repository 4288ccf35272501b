// plot.cpp — `cannl plot METRICS.jsonl -o curve.svg`: the curves of a training run's metrics log.
//
// Reads the JSONL a training program writes (--metrics): one JSON object per line, numbers by
// name. The x axis is the optimiser step ("step"; a record without one, such as an epoch's test
// record of an older log, sits at the last step seen before it, or at its "epoch" when the log has
// no steps at all). Every other numeric field is a series, drawn in one of three panels stacked
// on one page: losses (names containing "loss": train_loss, test_loss, val_loss), other metrics
// (accuracy, val_accuracy, ...), and the learning rate when it varies. Bookkeeping fields
// (epoch, elapsed seconds) are not drawn. The SVG is self-contained (no scripts, no fonts to
// fetch) and written atomically, never over anything but a regular file of this user's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "driver/commands.h"
#include "driver/out_file.h"

namespace cannl {

namespace {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in log order
};

bool is_bookkeeping(const std::string& k) {
  return k == "step" || k == "epoch" || k == "elapsed" || k == "elapsed_s" || k == "elapsed_seconds" ||
         k == "time" || k == "seconds";
}

enum class Panel { Loss, Metric, Lr };

Panel panel_of(const std::string& k) {
  if (k == "lr") return Panel::Lr;
  return k.find("loss") != std::string::npos ? Panel::Loss : Panel::Metric;
}

// Reads the log; false with `error` on a line that is not JSON or not an object.
bool read_log(const std::string& path, const std::string& text, std::vector<Series>& series, std::string& xname,
              std::string& error) {
  std::map<std::string, size_t> index;
  bool any_step = false;
  std::vector<nlohmann::json> records;
  size_t line_no = 0, start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (end == text.size()) break;
      continue;
    }
    nlohmann::json j;
    std::string why;  // the parser's own words: "number overflow parsing '1e999'", ...
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      why = e.what();
      if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
      if (auto p = why.find("at line 1, "); p != std::string::npos) why.erase(p + 3, 8);  // one line at a time
    }
    if (!why.empty() && end == text.size() && line_no > 1) break;  // a line still being written
    if (!why.empty()) {
      error = fmt::format("{}:{}: not valid JSON ({}; a metrics log has one object per line)", path, line_no, why);
      return false;
    }
    if (!j.is_object()) {
      error = fmt::format("{}:{}: not a JSON object (a metrics log has one object per line)", path, line_no);
      return false;
    }
    any_step = any_step || (j.contains("step") && j["step"].is_number());
    records.push_back(std::move(j));
    if (end == text.size()) break;
  }
  xname = any_step ? "step" : "epoch";
  double x = 0;
  bool have_x = false;
  for (size_t r = 0; r < records.size(); ++r) {
    const auto& j = records[r];
    if (j.contains(xname) && j[xname].is_number() && std::isfinite(j[xname].get<double>())) {
      x = j[xname].get<double>();
      have_x = true;
    } else if (!any_step && !j.contains("epoch")) {
      x = static_cast<double>(r + 1);  // neither steps nor epochs: the record's position
      have_x = true;
    }
    if (!have_x) continue;  // before the first step: nothing to place it at
    for (const auto& [k, v] : j.items()) {
      if (!v.is_number() || is_bookkeeping(k)) continue;
      double y = v.get<double>();
      if (!std::isfinite(y)) continue;
      auto it = index.find(k);
      if (it == index.end()) {
        it = index.emplace(k, series.size()).first;
        series.push_back({k, {}});
      }
      series[it->second].points.push_back({x, y});
    }
  }
  return true;
}

// (v - lo) / (hi - lo) for lo < hi, without overflow: near the largest doubles the span is not
// finite, the span of the halves is.
double fraction(double v, double lo, double hi) {
  const double span = hi - lo;
  return std::isfinite(span) ? (v - lo) / span : (v / 2 - lo / 2) / (hi / 2 - lo / 2);
}

// [lo, hi] widened by 5% of its span on each side (a little around a single value), within the
// finite doubles.
void pad_range(double& lo, double& hi) {
  const double half_span = hi / 2 - lo / 2;  // finite for finite lo and hi
  const double pad = half_span < 0.5e-12 * std::max(1.0, std::abs(hi)) ? std::max(std::abs(hi) * 0.05, 1e-6)
                                                                          : half_span * 0.1;
  lo = std::max(lo - pad, -std::numeric_limits<double>::max());
  hi = std::min(hi + pad, std::numeric_limits<double>::max());
}

// About `want` round tick values covering [lo, hi], increasing. Each is computed from its index
// (never by adding steps, which stall where a step is below the values' precision: ticks one
// ulp apart near 1e20 looped forever), at most 4 * want + 1 of them; none for a range that is
// empty, not finite, or narrower than the doubles can step through.
std::vector<double> ticks(double lo, double hi, int want) {
  std::vector<double> t;
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi)) return t;
  const double raw = hi / want - lo / want;  // the span / want, without overflow
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  if (!(mag > 0) || !std::isfinite(mag)) return t;
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (!std::isfinite(step)) step = 5.0 * mag;
  const double first = std::ceil(lo / step), last = std::floor(hi / step + 1e-9);
  if (!(last >= first && last - first <= 4.0 * want)) return t;
  for (int i = 0; i <= 8 * want && first + i <= last; ++i) {  // (first + i rounds where first > 2^53)
    const double v = (first + i) * step;
    if (!std::isfinite(v) || (!t.empty() && v <= t.back())) continue;  // steps below the precision
    t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  return t;
}

std::string number(double v) {
  std::string s = fmt::format("{:.6g}", v);
  return s;
}

// Text for the SVG's text and attributes: markup escaped, and what XML 1.0 does not allow in a
// document (control characters, which a JSON key may hold as \u0001, and U+FFFE, U+FFFF) as
// U+FFFD: a browser refuses the whole file for one of them.
std::string escape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else if (c < 0x20 || c == 0x7F) o += "\xEF\xBF\xBD";  // U+FFFD
    else if (c == 0xEF && s.compare(i, 2, "\xEF\xBF") == 0 && i + 2 < s.size() &&
             (static_cast<unsigned char>(s[i + 2]) & 0xFE) == 0xBE) {
      o += "\xEF\xBF\xBD";  // U+FFFD
      i += 2;
    } else o += s[i];
  }
  return o;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// One panel: a frame, ticks and grid, a polyline (and dots, for short series) per series, a legend.
void draw_panel(std::string& svg, const std::string& title, const std::vector<const Series*>& ss, double x0, double x1,
                const std::string& xname, double top, double height) {
  const double left = 80, width = 640, bottom = top + height;
  double y0 = INFINITY, y1 = -INFINITY;
  for (const Series* s : ss)
    for (auto [x, y] : s->points) y0 = std::min(y0, y), y1 = std::max(y1, y);
  pad_range(y0, y1);
  auto px = [&](double x) { return left + (x1 > x0 ? fraction(x, x0, x1) : 0.5) * width; };
  auto py = [&](double y) { return bottom - fraction(y, y0, y1) * height; };
  svg += fmt::format("<g class=\"panel\" data-panel=\"{}\">\n", escape(title));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", left, top - 8,
                     escape(title));
  for (double t : ticks(y0, y1, 5)) {
    double y = py(t);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", left, y,
                       left + width, y);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", left - 6,
                       y + 4, number(t));
  }
  if (x1 > x0)
    for (double t : ticks(x0, x1, 8)) {
      double x = px(t);
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", x, top, x,
                         bottom);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", x,
                         bottom + 15, number(t));
    }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", left, top,
                     width, height);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", left + width / 2,
                     bottom + 30, escape(xname));
  for (size_t i = 0; i < ss.size(); ++i) {
    const Series& s = *ss[i];
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string pts;
    for (auto [x, y] : s.points) pts += fmt::format("{}{:.2f},{:.2f}", pts.empty() ? "" : " ", px(x), py(y));
    svg += fmt::format("<polyline class=\"series\" data-series=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" "
                       "points=\"{}\"/>\n",
                       escape(s.name), color, pts);
    if (s.points.size() <= 40)
      for (auto [x, y] : s.points)
        svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\" fill=\"{}\"/>\n", px(x), py(y), color);
    double ly = top + 14 + 16 * static_cast<double>(i);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       left + width + 12, ly - 4, left + width + 32, ly - 4, color);
    svg += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n", left + width + 38, ly,
                       escape(s.name));
  }
  svg += "</g>\n";
}

}  // namespace

int plot_svg(const std::string& path, const std::string& text, const std::string& title, std::string& svg,
             std::string& error) {
  std::vector<Series> series;
  std::string xname;
  if (!read_log(path, text, series, xname, error)) return 1;
  std::vector<const Series*> panels[3];
  for (const Series& s : series) {
    Panel p = panel_of(s.name);
    if (p == Panel::Lr) {
      bool varies = false;
      for (auto [x, y] : s.points) varies = varies || y != s.points.front().second;
      if (!varies) continue;
    }
    panels[static_cast<int>(p)].push_back(&s);
  }
  if (panels[0].empty() && panels[1].empty() && panels[2].empty()) {
    error = path + ": no numeric series to draw (expected records such as {\"step\": 100, \"train_loss\": 0.52})";
    return 1;
  }
  double x0 = INFINITY, x1 = -INFINITY;
  for (const auto& p : panels)
    for (const Series* s : p)
      for (auto [x, y] : s->points) x0 = std::min(x0, x), x1 = std::max(x1, x);
  const char* titles[] = {"loss", "metrics", "learning rate"};
  const double panel_h = 240, gap = 70, top0 = 60;
  int n = 0;
  for (const auto& p : panels) n += !p.empty();
  const double height = top0 + n * (panel_h + gap);
  svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"{0}\" viewBox=\"0 0 900 {0}\" "
      "font-family=\"sans-serif\">\n<rect width=\"900\" height=\"{0}\" fill=\"white\"/>\n"
      "<text x=\"450\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">{1}</text>\n",
      height, escape(title.empty() ? std::filesystem::path(path).filename().string() : title));
  double top = top0;
  for (int p = 0; p < 3; ++p) {
    if (panels[p].empty()) continue;
    draw_panel(svg, titles[p], panels[p], x0, x1, xname, top, panel_h);
    top += panel_h + gap;
  }
  svg += "</svg>\n";
  return 0;
}

int plot_file(const PlotOptions& opt, std::ostream& err) {
  namespace fs = std::filesystem;
  std::string text, error, svg;
  std::error_code same_ec;
  if (fs::equivalent(opt.log, opt.out, same_ec)) {  // the SVG would replace the log
    err << "cannl: error: -o " << opt.out << " is the metrics log itself: write the plot to another file\n";
    return 2;
  }
  if (!read_file(opt.log, text, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  if (plot_svg(opt.log, text, opt.title, svg, error) != 0) {
    err << "cannl: error: " << error << "\n";
    return 1;
  }
  // Atomically, and only over a regular file of this user's (out_file.h).
  if (!replace_file(opt.out, svg, error)) {
    err << "cannl: error: " << error << "\n";
    return 2;
  }
  return 0;
}

}  // namespace cannl
