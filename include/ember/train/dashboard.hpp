// The terminal dashboard of a training run. On a terminal it redraws in place (plain ANSI
// escapes): a progress bar for the epoch and one for the run, each with its ETA and the
// items/s, the current metrics of both splits, and live train/valid curves drawn with
// braille characters (2 x 4 dots a cell). When the output is not a terminal (CI, a log
// file) it prints one plain progress line every `plain_interval` seconds and a line per
// finished epoch instead.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/train/history.hpp"
#include "ember/train/logger.hpp"

namespace ember::train {

// Where a run stands, as the dashboard shows it.
struct Progress {
  Split split = Split::Train;
  std::size_t epoch = 1, epochs = 1;           // the epoch in progress (1-based) of the run's
  std::size_t batch = 0, batches = 0;          // batches done in this split's pass, of
  std::size_t run_batch = 0, run_batches = 0;  // training batches done in the run, of
  double epoch_seconds = 0, run_seconds = 0;   // wall time of this pass, of this fit call
  double epoch_eta = -1, run_eta = -1;         // seconds left (negative: unknown)
  double items_per_second = 0;
};

class Dashboard {
 public:
  virtual ~Dashboard() = default;
  // `metrics`: the current aggregates of the split in progress.
  virtual void update(const Progress& p, const MetricValues& metrics, const History& h) = 0;
  virtual void epoch_end(Split split, std::size_t epoch, const MetricValues& metrics,
                         const History& h) = 0;
  // A line above the dashboard (checkpoints, early stopping, resume).
  virtual void message(const std::string& text) = 0;
  // Leaves the terminal as it was found (cursor shown, below the dashboard).
  virtual void finish() = 0;
};

enum class DashboardMode {
  Auto,      // Terminal when `out` is a terminal (and TERM is not "dumb"), else Plain
  Terminal,  // redrawn in place
  Plain,     // a line every plain_interval seconds
  None,      // nothing
};

// `out` must outlive the dashboard. `curves`: the metric names drawn as curves (at most
// the first two are drawn; empty: "loss").
std::unique_ptr<Dashboard> make_dashboard(DashboardMode mode, std::FILE* out,
                                          double plain_interval_seconds = 10.0,
                                          std::vector<std::string> curves = {});

// A curve drawn with braille characters: `series` (x, y) polylines on a grid of `width` x
// `height` cells (2 x 4 dots each), x and y scaled to the ranges of all points together.
// Returns `height` rows of `width` braille characters (U+2800 .. U+28FF, UTF-8). Each
// row's cells also say which series drew last in it (for colour): cell_series[row][col]
// is the series index, or -1 for an empty cell.
struct BrailleCanvas {
  std::vector<std::string> rows;
  std::vector<std::vector<int>> cell_series;
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
};
BrailleCanvas braille_plot(const std::vector<std::vector<std::pair<double, double>>>& series,
                           std::size_t width, std::size_t height);

// "1:02:03", "4:05", "0:07"; "--:--" for a negative or non-finite time.
std::string format_duration(double seconds);

}  // namespace ember::train
