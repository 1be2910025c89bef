// Line charts and confusion matrices, laid out once against detail::Canvas (canvas.hpp).
#include <ember/train/plot.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <ember/base/error.hpp>

#include "train/canvas.hpp"

namespace ember::train::plot {
namespace {

using detail::Anchor;
using detail::Canvas;
using detail::Rgb;
using detail::TextStyle;

constexpr Rgb kWhite{1, 1, 1};
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kAxis{0.25, 0.25, 0.25};
constexpr Rgb kGrid{0.88, 0.88, 0.88};
constexpr Rgb kText{0.1, 0.1, 0.1};
// The series colours, in order (a colour-blind-safe qualitative palette).
constexpr Rgb kPalette[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                            {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                            {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                            {0.09, 0.75, 0.81}};
constexpr std::size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

void check_size(int width, int height, const char* function) {
  EMBER_CHECK(width >= 64 && width <= 16384 && height >= 64 && height <= 16384,
              std::string(function) + ": size " + std::to_string(width) + " x " +
                  std::to_string(height) +
                  " is out of range; expected 64 to 16384 pixels each way");
}

// ---- axes ----

// Ticks at multiples of a nice step (1, 2 or 5 times a power of ten) spanning [lo, hi].
struct Axis {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> ticks;
};

double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;  // the nearest of 1, 2, 5, 10
}

Axis make_axis(double lo, double hi, bool whole_decades) {
  if (hi - lo <= std::abs(hi) * 1e-12) {  // one value: a unit-wide window around it
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  Axis a;
  a.step = nice_step((hi - lo) / 5);
  if (whole_decades) a.step = std::max(1.0, std::round(a.step));
  const double first = std::floor(lo / a.step + 1e-9), last = std::ceil(hi / a.step - 1e-9);
  a.lo = first * a.step;
  a.hi = last * a.step;
  // Ticks by index, not by repeated addition: no drift, and a bounded count (5 to 11).
  const auto count = static_cast<int>(std::min(last - first, 20.0));
  for (int i = 0; i <= count; ++i) a.ticks.push_back((first + i) * a.step + 0.0);
  return a;
}

std::string tick_label(double v, double step, bool log) {
  char buf[48];
  if (log) {
    std::snprintf(buf, sizeof buf, "%g", std::pow(10.0, v));
    return buf;
  }
  const double magnitude = std::max(std::abs(v), step);
  if (magnitude >= 1e6 || step < 1e-4) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v + 0.0);
  }
  return buf;
}

// ---- line charts ----

std::string shortened(const std::string& s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 start
  return s.substr(0, cut) + "...";
}

void draw_chart(const Chart& chart, Canvas& c, int width, int height, const char* function) {
  EMBER_CHECK(!chart.series.empty(), std::string(function) + ": chart '" + chart.title +
                                         "' has no series; expected at least one");
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  auto usable = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!chart.log_y || y > 0);
  };
  for (const Series& s : chart.series) {
    EMBER_CHECK(s.x.size() == s.y.size(),
                std::string(function) + ": series '" + s.name + "' of chart '" + chart.title +
                    "' has " + std::to_string(s.x.size()) + " x values but " +
                    std::to_string(s.y.size()) + " y values; expected as many of each");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) continue;
      const double y = chart.log_y ? std::log10(s.y[i]) : s.y[i];
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  }
  EMBER_CHECK(x_lo <= x_hi, std::string(function) + ": chart '" + chart.title +
                                "' has no point with finite x and y" +
                                (chart.log_y ? " (and y > 0, for its log scale)" : "") +
                                "; nothing to draw");
  constexpr double kLargest = 1e300;  // leaves room for the axis arithmetic
  EMBER_CHECK(std::max({-x_lo, x_hi, -y_lo, y_hi}) <= kLargest,
              std::string(function) + ": chart '" + chart.title +
                  "' has values beyond +-1e300; they cannot be drawn");
  const Axis xa = make_axis(x_lo, x_hi, false);
  const Axis ya = make_axis(y_lo, y_hi, chart.log_y);

  const double font = 12, title_font = 15;
  const Rgb ink = kText;
  double tick_w = 0;
  for (double t : ya.ticks)
    tick_w = std::max(tick_w, c.text_width(tick_label(t, ya.step, chart.log_y), font, false));
  double legend_w = 0;
  for (const Series& s : chart.series) {
    legend_w = std::max(legend_w, c.text_width(shortened(s.name, 40), font, false));
  }
  legend_w += 36;  // the colour sample and padding
  const double left = 14 + (chart.y_label.empty() ? 0 : font + 10) + tick_w + 8;
  const double top = chart.title.empty() ? 16 : title_font + 26;
  const double bottom = 14 + font + 10 + (chart.x_label.empty() ? 0 : font + 10);
  const double right = std::min(legend_w + 24, width * 0.4);
  const double pw = width - left - right, ph = height - top - bottom;
  EMBER_CHECK(pw > 20 && ph > 20, std::string(function) + ": size " + std::to_string(width) +
                                      " x " + std::to_string(height) +
                                      " leaves no room for the plot area of chart '" + chart.title +
                                      "'");
  auto px = [&](double x) { return left + (x - xa.lo) / (xa.hi - xa.lo) * pw; };
  auto py = [&](double y) { return top + ph - (y - ya.lo) / (ya.hi - ya.lo) * ph; };

  c.fill_rect(0, 0, width, height, kWhite);
  if (!chart.title.empty()) {
    c.text(left + pw / 2, 10 + title_font, chart.title, {title_font, ink, Anchor::Middle, true});
  }
  // Grid and ticks.
  for (double t : xa.ticks) {
    c.line(px(t), top, px(t), top + ph, kGrid, 1);
    c.line(px(t), top + ph, px(t), top + ph + 5, kAxis, 1);
    c.text(px(t), top + ph + 8 + font, tick_label(t, xa.step, false), {font, ink, Anchor::Middle});
  }
  for (double t : ya.ticks) {
    c.line(left, py(t), left + pw, py(t), kGrid, 1);
    c.line(left - 5, py(t), left, py(t), kAxis, 1);
    c.text(left - 8, py(t) + font * 0.35, tick_label(t, ya.step, chart.log_y),
           {font, ink, Anchor::End});
  }
  c.stroke_rect(left, top, pw, ph, kAxis, 1);
  if (!chart.x_label.empty()) {
    c.text(left + pw / 2, height - 12, chart.x_label, {font, ink, Anchor::Middle});
  }
  if (!chart.y_label.empty()) {
    c.text(14 + font, top + ph / 2, chart.y_label, {font, ink, Anchor::Middle, false, true});
  }
  // The series: a polyline per run of usable points, a dot for a point alone.
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const Series& s = chart.series[k];
    const Rgb colour = kPalette[k % kPaletteSize];
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() == 1) c.dot(run[0].first, run[0].second, 3, colour);
      c.polyline(run, colour, 2);
      run.clear();
    };
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) {
        flush();
        continue;
      }
      run.emplace_back(px(s.x[i]), py(chart.log_y ? std::log10(s.y[i]) : s.y[i]));
    }
    flush();
  }
  // The legend, right of the plot area.
  const double lx = left + pw + 16;
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    const double ly = top + 8 + static_cast<double>(k) * (font + 8);
    const Rgb colour = kPalette[k % kPaletteSize];
    c.line(lx, ly, lx + 20, ly, colour, 3);
    c.text(lx + 26, ly + font * 0.35, shortened(chart.series[k].name, 40),
           {font, ink, Anchor::Start});
  }
}

std::string render_chart(const Chart& chart, int width, int height, bool svg,
                         const char* function) {
  check_size(width, height, function);
  auto canvas =
      svg ? detail::make_svg_canvas(width, height) : detail::make_png_canvas(width, height);
  draw_chart(chart, *canvas, width, height, function);
  return canvas->finish(function);
}

// ---- the confusion matrix ----

// White to dark blue as t goes from 0 to 1.
Rgb shade(double t) {
  const Rgb dark{0.03, 0.19, 0.42};
  return {1 + (dark.r - 1) * t, 1 + (dark.g - 1) * t, 1 + (dark.b - 1) * t};
}

}  // namespace

void write_png(const Chart& chart, const std::string& path, int width, int height) {
  detail::write_file_atomically(path, render_chart(chart, width, height, false, "plot::write_png"),
                                "plot::write_png");
}

void write_svg(const Chart& chart, const std::string& path, int width, int height) {
  detail::write_file_atomically(path, render_chart(chart, width, height, true, "plot::write_svg"),
                                "plot::write_svg");
}

void write_confusion_matrix(const std::vector<std::vector<std::int64_t>>& counts,
                            const std::vector<std::string>& class_names, const std::string& path) {
  const char* function = "plot::write_confusion_matrix";
  const std::size_t n = counts.size();
  EMBER_CHECK(n > 0, std::string(function) + ": the matrix has no class; expected counts [C][C]");
  EMBER_CHECK(n <= 1000, std::string(function) + ": " + std::to_string(n) +
                             " classes; at most 1000 can be drawn");
  std::int64_t max_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    EMBER_CHECK(counts[i].size() == n, std::string(function) + ": row " + std::to_string(i) +
                                           " has " + std::to_string(counts[i].size()) +
                                           " counts; expected a square matrix of " +
                                           std::to_string(n));
    for (std::size_t j = 0; j < n; ++j) {
      EMBER_CHECK(counts[i][j] >= 0, std::string(function) + ": count [" + std::to_string(i) +
                                         "][" + std::to_string(j) + "] is " +
                                         std::to_string(counts[i][j]) + "; expected >= 0");
      max_count = std::max(max_count, counts[i][j]);
    }
  }
  EMBER_CHECK(class_names.empty() || class_names.size() == n,
              std::string(function) + ": " + std::to_string(class_names.size()) +
                  " class names for " + std::to_string(n) + " classes; expected as many (or none)");
  const auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  EMBER_CHECK(ext == ".png" || ext == ".svg",
              std::string(function) + ": '" + path + "' ends in neither .png nor .svg");
  std::vector<std::string> names(n);
  for (std::size_t i = 0; i < n; ++i) {
    names[i] = class_names.empty() ? std::to_string(i) : shortened(class_names[i], 24);
  }

  const double cell = std::clamp(560.0 / static_cast<double>(n), 12.0, 64.0);
  const double font = std::clamp(cell * 0.3, 6.0, 13.0), label_font = 13, title_font = 15;
  // Measure with a scratch canvas of the chosen format: both measure with the same font.
  auto scratch = detail::make_png_canvas(64, 64);
  double name_w = 0;
  for (const std::string& s : names) name_w = std::max(name_w, scratch->text_width(s, font, false));
  const bool vertical_columns = name_w > cell - 4;
  const double left = 16 + label_font + 12 + name_w + 8;
  const double top = 16 + title_font + 14;
  const double bottom = 10 + (vertical_columns ? name_w : font) + 12 + label_font + 12;
  const double side = cell * static_cast<double>(n);
  const int width = std::max(64, static_cast<int>(std::ceil(left + side + 24)));
  const int height = std::max(64, static_cast<int>(std::ceil(top + side + bottom)));
  check_size(width, height, function);
  auto canvas = ext == ".svg" ? detail::make_svg_canvas(width, height)
                              : detail::make_png_canvas(width, height);
  Canvas& c = *canvas;
  c.fill_rect(0, 0, width, height, kWhite);
  c.text(left + side / 2, 16 + title_font, "Confusion matrix",
         {title_font, kText, Anchor::Middle, true});
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const double t =
          max_count == 0 ? 0.0 : static_cast<double>(counts[i][j]) / static_cast<double>(max_count);
      const double x = left + cell * static_cast<double>(j),
                   y = top + cell * static_cast<double>(i);
      c.fill_rect(x, y, cell, cell, shade(t));
      const std::string number = std::to_string(counts[i][j]);
      if (c.text_width(number, font, false) <= cell - 2) {
        c.text(x + cell / 2, y + cell / 2 + font * 0.35, number,
               {font, t > 0.5 ? kWhite : kBlack, Anchor::Middle});
      }
    }
    const double mid = top + cell * (static_cast<double>(i) + 0.5);
    c.text(left - 6, mid + font * 0.35, names[i], {font, kText, Anchor::End});
    const double col = left + cell * (static_cast<double>(i) + 0.5);
    if (vertical_columns) {
      c.text(col + font * 0.35, top + side + 6, names[i], {font, kText, Anchor::End, false, true});
    } else {
      c.text(col, top + side + 6 + font, names[i], {font, kText, Anchor::Middle});
    }
  }
  c.stroke_rect(left, top, side, side, kAxis, 1);
  c.text(left + side / 2, height - 12.0, "Predicted", {label_font, kText, Anchor::Middle});
  c.text(16 + label_font, top + side / 2, "True", {label_font, kText, Anchor::Middle, false, true});
  detail::write_file_atomically(path, c.finish(function), function);
}

}  // namespace ember::train::plot
