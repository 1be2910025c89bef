// The terminal dashboard (in place, ANSI) and the plain progress lines; braille curves.
#include "ember/train/dashboard.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace ember::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

namespace {

// Braille dot bits by (column 0..1, row 0..3) within a cell (Unicode's numbering).
constexpr unsigned kDot[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};

std::string utf8(unsigned cp) {
  std::string s;
  s += char(0xE0 | (cp >> 12));
  s += char(0x80 | ((cp >> 6) & 0x3F));
  s += char(0x80 | (cp & 0x3F));
  return s;
}

std::string format_value(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e5)) return fmt::format("{:.3e}", v);
  if (a >= 100) return fmt::format("{:.1f}", v);
  return fmt::format("{:.4f}", v);
}

std::string metrics_line(const MetricValues& m) {
  std::string s;
  for (const auto& [n, v] : m) s += fmt::format("  {} {}", n, format_value(v));
  return s;
}

std::string bar(double fraction, std::size_t width) {
  fraction = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const auto full = std::size_t(fraction * double(width) + 0.5);
  std::string s;
  for (std::size_t i = 0; i < width; ++i) s += i < full ? "\u2588" : "\u2591";
  return s;
}

// A training curve downsampled to at most `buckets` points (each the mean of its bucket:
// smoothing that keeps the curve readable whatever the number of steps).
std::vector<std::pair<double, double>> bucketed(const std::vector<MetricPoint>& pts,
                                                std::size_t buckets) {
  std::vector<std::pair<double, double>> out;
  std::vector<const MetricPoint*> finite;
  for (const auto& p : pts)
    if (std::isfinite(p.value)) finite.push_back(&p);
  if (finite.empty()) return out;
  const std::size_t per = std::max<std::size_t>(1, (finite.size() + buckets - 1) / buckets);
  for (std::size_t i = 0; i < finite.size(); i += per) {
    const std::size_t end = std::min(finite.size(), i + per);
    double sx = 0, sy = 0;
    for (std::size_t k = i; k < end; ++k) {
      sx += double(finite[k]->step);
      sy += finite[k]->value;
    }
    out.emplace_back(sx / double(end - i), sy / double(end - i));
  }
  return out;
}

std::vector<std::pair<double, double>> points_of(const std::vector<MetricPoint>& pts) {
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts)
    if (std::isfinite(p.value)) out.emplace_back(double(p.step), p.value);
  return out;
}

// The terminal's width in columns (80 when it cannot be asked).
std::size_t terminal_columns(std::FILE* out) {
  winsize ws{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// `line` cut to `columns` visible columns: ANSI escapes take none, a UTF-8 character one.
// A wrapped line would break the redraw (it moves the cursor up by lines written).
std::string fit_width(const std::string& line, std::size_t columns) {
  std::string out;
  std::size_t visible = 0;
  bool cut = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c == 0x1b) {  // CSI: ESC [ parameters final-byte
      std::size_t j = i + 1;
      if (j < line.size() && line[j] == '[') {
        ++j;
        while (j < line.size() && !(line[j] >= 0x40 && line[j] <= 0x7e)) ++j;
      }
      out.append(line, i, j + 1 - i);
      i = j;
      continue;
    }
    const bool continuation = (c & 0xC0) == 0x80;
    if (!continuation) {
      if (visible == columns) cut = true;
      if (!cut) ++visible;
    }
    if (!cut) out += char(c);
  }
  if (cut) out += "\x1b[0m";
  return out;
}

class NoDashboard final : public Dashboard {
 public:
  void update(const Progress&, const MetricValues&, const History&) override {}
  void epoch_end(Split, std::size_t, const MetricValues&, const History&) override {}
  void message(const std::string&) override {}
  void finish() override {}
};

std::string epoch_line(Split split, std::size_t epoch, const MetricValues& m) {
  return fmt::format("epoch {} {}:{}", epoch, name(split), metrics_line(m));
}

// One line every `interval` seconds, a line per finished epoch.
class PlainDashboard final : public Dashboard {
 public:
  PlainDashboard(std::FILE* out, double interval) : out_(out), interval_(interval) {}
  void update(const Progress& p, const MetricValues& m, const History&) override {
    const auto now = std::chrono::steady_clock::now();
    if (printed_ && std::chrono::duration<double>(now - last_).count() < interval_) return;
    printed_ = true;
    last_ = now;
    std::string line = fmt::format("{} epoch {}/{} batch {}/{} ({:.0f}%)", name(p.split), p.epoch,
                                   p.epochs, p.batch, p.batches,
                                   p.batches ? 100.0 * double(p.batch) / double(p.batches) : 0.0);
    if (p.split == Split::Train && p.run_batches > 0) {
      line +=
          fmt::format(" run {:.0f}% eta {}", 100.0 * double(p.run_batch) / double(p.run_batches),
                      format_duration(p.run_eta));
    }
    line += fmt::format(" {:.0f} items/s", p.items_per_second) + metrics_line(m);
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }
  void epoch_end(Split split, std::size_t epoch, const MetricValues& m, const History&) override {
    std::fprintf(out_, "%s\n", epoch_line(split, epoch, m).c_str());
    std::fflush(out_);
  }
  void message(const std::string& text) override {
    std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
  }
  void finish() override { std::fflush(out_); }

 private:
  std::FILE* out_;
  double interval_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point last_;
};

// Redrawn in place: the block of lines is rewritten after moving the cursor up over it.
class TerminalDashboard final : public Dashboard {
 public:
  TerminalDashboard(std::FILE* out, std::vector<std::string> curves)
      : out_(out), curves_(std::move(curves)) {
    if (curves_.empty()) curves_ = {"loss"};
    if (curves_.size() > 2) curves_.resize(2);
    std::fputs("\x1b[?25l", out_);  // hide the cursor while drawing
  }
  ~TerminalDashboard() override { finish(); }

  void update(const Progress& p, const MetricValues& m, const History& h) override {
    progress_ = p;
    (p.split == Split::Train ? train_ : valid_) = m;
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.batch == p.batches;
    if (drawn_ > 0 && !last && std::chrono::duration<double>(now - last_draw_).count() < 0.1)
      return;
    last_draw_ = now;
    draw(h);
  }
  void epoch_end(Split split, std::size_t epoch, const MetricValues& m, const History& h) override {
    (split == Split::Train ? train_ : valid_) = m;
    message(epoch_line(split, epoch, m));
    draw(h);
  }
  void message(const std::string& text) override {
    erase();
    std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
  }
  void finish() override {
    if (finished_) return;
    finished_ = true;
    std::fputs("\x1b[?25h", out_);
    std::fflush(out_);
  }

 private:
  void erase() {
    if (drawn_ == 0) return;
    std::fprintf(out_, "\x1b[%zuA", drawn_);
    for (std::size_t i = 0; i < drawn_; ++i) std::fputs("\x1b[2K\n", out_);
    std::fprintf(out_, "\x1b[%zuA", drawn_);
    drawn_ = 0;
  }

  void draw(const History& h) {
    const Progress& p = progress_;
    std::vector<std::string> lines;
    lines.push_back(fmt::format(
        "\x1b[1m{:<5}\x1b[0m epoch {}/{} {} {:3.0f}% {}/{}  {} < {}  {:.0f} items/s", name(p.split),
        p.epoch, p.epochs, bar(p.batches ? double(p.batch) / double(p.batches) : 0, 30),
        p.batches ? 100.0 * double(p.batch) / double(p.batches) : 0.0, p.batch, p.batches,
        format_duration(p.epoch_seconds), format_duration(p.epoch_eta), p.items_per_second));
    const double run_frac = p.run_batches ? double(p.run_batch) / double(p.run_batches) : 0;
    lines.push_back(fmt::format("run   {} {:3.0f}% {}/{}  {} < {}",
                                bar(run_frac, 30 + std::to_string(p.epochs).size() * 2 + 7),
                                100.0 * run_frac, p.run_batch, p.run_batches,
                                format_duration(p.run_seconds), format_duration(p.run_eta)));
    lines.push_back("\x1b[36mtrain\x1b[0m" + metrics_line(train_));
    lines.push_back("\x1b[33mvalid\x1b[0m" + metrics_line(valid_));
    const std::size_t columns = terminal_columns(out_);
    // Each chart takes its width plus 10 columns (a border and the gap).
    const std::size_t chart_width = std::clamp<std::size_t>(columns / curves_.size(), 20, 60) - 10;
    constexpr std::size_t chart_height = 6;
    std::vector<BrailleCanvas> canvases;
    for (const auto& c : curves_) {
      canvases.push_back(braille_plot({bucketed(h.steps(Split::Train, c), 2 * chart_width),
                                       points_of(h.epochs(Split::Valid, c))},
                                      chart_width, chart_height));
    }
    std::string titles;
    for (std::size_t k = 0; k < curves_.size(); ++k) {
      const auto& cv = canvases[k];
      std::string t =
          fmt::format("{} [{} .. {}]", curves_[k], format_value(cv.y_min), format_value(cv.y_max));
      t.resize(chart_width + 10, ' ');
      titles += t;
    }
    // The curves take the colours of the split labels above: train cyan, valid yellow.
    lines.push_back(titles);
    for (std::size_t r = 0; r < chart_height; ++r) {
      std::string row;
      for (std::size_t k = 0; k < canvases.size(); ++k) {
        const auto& cv = canvases[k];
        row += "\u2502";
        // Each cell is one 3-byte braille character in the row string.
        for (std::size_t c = 0; c < chart_width; ++c) {
          const int s = cv.cell_series[r][c];
          const std::string cell = cv.rows[r].substr(3 * c, 3);
          if (s < 0)
            row += cell;
          else
            row += (s == 0 ? "\x1b[36m" : "\x1b[33m") + cell + "\x1b[0m";
        }
        row += std::string(9, ' ');
      }
      lines.push_back(row);
    }
    erase();
    for (const auto& l : lines) std::fprintf(out_, "%s\x1b[K\n", fit_width(l, columns - 1).c_str());
    std::fflush(out_);
    drawn_ = lines.size();
  }

  std::FILE* out_;
  std::vector<std::string> curves_;
  Progress progress_;
  MetricValues train_, valid_;
  std::size_t drawn_ = 0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace

BrailleCanvas braille_plot(const std::vector<std::vector<std::pair<double, double>>>& series,
                           std::size_t width, std::size_t height) {
  BrailleCanvas cv;
  std::vector<std::vector<unsigned>> bits(height, std::vector<unsigned>(width, 0));
  cv.cell_series.assign(height, std::vector<int>(width, -1));
  bool any = false;
  for (const auto& s : series) {
    for (const auto& [x, y] : s) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) {
        cv.x_min = cv.x_max = x;
        cv.y_min = cv.y_max = y;
        any = true;
      }
      cv.x_min = std::min(cv.x_min, x);
      cv.x_max = std::max(cv.x_max, x);
      cv.y_min = std::min(cv.y_min, y);
      cv.y_max = std::max(cv.y_max, y);
    }
  }
  const long W = long(2 * width), H = long(4 * height);
  auto dot = [&](long px, long py, int s) {
    if (px < 0 || py < 0 || px >= W || py >= H) return;
    const std::size_t col = std::size_t(px / 2), row = std::size_t(py / 4);
    bits[row][col] |= kDot[px % 2][py % 4];
    cv.cell_series[row][col] = s;
  };
  // Pixel coordinates: x from the left, y from the top (the maximum at row 0).
  auto to_px = [&](double x, double y) {
    const double fx = cv.x_max > cv.x_min ? (x - cv.x_min) / (cv.x_max - cv.x_min) : 0.5;
    const double fy = cv.y_max > cv.y_min ? (y - cv.y_min) / (cv.y_max - cv.y_min) : 0.5;
    return std::pair<long, long>{std::lround(fx * double(W - 1)),
                                 std::lround((1.0 - fy) * double(H - 1))};
  };
  if (any && width > 0 && height > 0) {
    for (std::size_t si = 0; si < series.size(); ++si) {
      std::optional<std::pair<long, long>> prev;
      for (const auto& [x, y] : series[si]) {
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        const auto cur = to_px(x, y);
        if (!prev) {
          dot(cur.first, cur.second, int(si));
        } else {
          // Bresenham's line from the previous point.
          long x0 = prev->first, y0 = prev->second;
          const long x1 = cur.first, y1 = cur.second;
          const long dx = std::labs(x1 - x0), dy = -std::labs(y1 - y0);
          const long sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
          long err = dx + dy;
          while (true) {
            dot(x0, y0, int(si));
            if (x0 == x1 && y0 == y1) break;
            const long e2 = 2 * err;
            if (e2 >= dy) {
              err += dy;
              x0 += sx;
            }
            if (e2 <= dx) {
              err += dx;
              y0 += sy;
            }
          }
        }
        prev = cur;
      }
    }
  }
  for (std::size_t r = 0; r < height; ++r) {
    std::string row;
    for (std::size_t c = 0; c < width; ++c) row += utf8(0x2800 + bits[r][c]);
    cv.rows.push_back(std::move(row));
  }
  return cv;
}

std::unique_ptr<Dashboard> make_dashboard(DashboardMode mode, std::FILE* out,
                                          double plain_interval_seconds,
                                          std::vector<std::string> curves) {
  if (mode == DashboardMode::Auto) {
    const char* term = std::getenv("TERM");
    const bool tty = out != nullptr && ::isatty(::fileno(out)) == 1 &&
                     !(term != nullptr && std::strcmp(term, "dumb") == 0);
    mode = tty ? DashboardMode::Terminal : DashboardMode::Plain;
  }
  switch (mode) {
    case DashboardMode::Terminal:
      return std::make_unique<TerminalDashboard>(out, std::move(curves));
    case DashboardMode::Plain:
      return std::make_unique<PlainDashboard>(out, plain_interval_seconds);
    default:
      return std::make_unique<NoDashboard>();
  }
}

}  // namespace ember::train
