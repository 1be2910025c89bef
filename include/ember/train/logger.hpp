// MetricLogger: the metric logs of a run in its artifact folder, as CSV (one file per split
// and granularity, one column per metric) and JSON lines (one object per row, with the
// split), written as the run goes:
//
//   <dir>/train_steps.csv   split-less rows: epoch,step,<metric>...
//   <dir>/valid_steps.csv
//   <dir>/train_epochs.csv
//   <dir>/valid_epochs.csv
//   <dir>/steps.jsonl       {"split": "train", "epoch": 1, "step": 12, "loss": 0.53, ...}
//   <dir>/epochs.jsonl
//
// A value that is not a number is an empty CSV cell and a JSON null. A resumed run
// rewrites the files from the checkpoint's History, so they hold exactly what an
// uninterrupted run would have written.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/train/history.hpp"

namespace ember::train {

using MetricValues = std::vector<std::pair<std::string, double>>;

class MetricLogger {
 public:
  // Creates `dir` when missing; an ember::Error naming it when it cannot be written.
  MetricLogger(std::string dir, std::vector<std::string> train_metrics,
               std::vector<std::string> valid_metrics);
  ~MetricLogger();
  MetricLogger(const MetricLogger&) = delete;
  MetricLogger& operator=(const MetricLogger&) = delete;

  void step(Split split, std::size_t epoch, std::size_t step, const MetricValues& values);
  void epoch(Split split, std::size_t epoch, std::size_t step, const MetricValues& values);
  // Replaces every file's rows by the history's.
  void rewrite(const History& history);
  void flush();
  const std::string& dir() const { return dir_; }

 private:
  struct File;
  void open(bool truncate);
  void write_row(Split split, bool epoch_row, std::size_t epoch, std::size_t step,
                 const MetricValues& values);

  std::string dir_;
  std::vector<std::string> names_[2];
  std::unique_ptr<File> csv_[2][2];  // [split][epoch_row]
  std::unique_ptr<File> jsonl_[2];   // [epoch_row]
};

}  // namespace ember::train
