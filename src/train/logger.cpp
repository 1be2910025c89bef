// MetricLogger: CSV and JSON-lines metric logs (the layout is in logger.hpp).
#include "ember/train/logger.hpp"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ember/base/error.hpp"
#include "ember/nn/config.hpp"
#include "ember/train/checkpoint.hpp"

namespace ember::train {

struct MetricLogger::File {
  std::string path;
  std::FILE* f = nullptr;
  File(std::string p, bool truncate) : path(std::move(p)) {
    f = std::fopen(path.c_str(), truncate ? "w" : "a");
    EMBER_CHECK(f != nullptr, "train::MetricLogger: cannot open '" + path + "' for writing");
  }
  ~File() {
    if (f) std::fclose(f);
  }
  bool empty() const { return std::ftell(f) == 0; }
  void write(const std::string& s) {
    EMBER_CHECK(std::fwrite(s.data(), 1, s.size(), f) == s.size(),
                "train::MetricLogger: cannot write to '" + path + "'");
  }
};

namespace {
const char* kCsvNames[2][2] = {{"train_steps.csv", "train_epochs.csv"},
                               {"valid_steps.csv", "valid_epochs.csv"}};
const char* kJsonlNames[2] = {"steps.jsonl", "epochs.jsonl"};
int index(Split s) { return s == Split::Train ? 0 : 1; }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}
std::string csv_value(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : ""; }
}  // namespace

MetricLogger::MetricLogger(std::string dir, std::vector<std::string> train_metrics,
                           std::vector<std::string> valid_metrics)
    : dir_(std::move(dir)) {
  names_[0] = std::move(train_metrics);
  names_[1] = std::move(valid_metrics);
  ensure_writable_dir(dir_, "train::MetricLogger");
  open(/*truncate=*/true);
}
MetricLogger::~MetricLogger() = default;

void MetricLogger::open(bool truncate) {
  for (int s = 0; s < 2; ++s) {
    for (int e = 0; e < 2; ++e) {
      csv_[s][e] = std::make_unique<File>(dir_ + "/" + kCsvNames[s][e], truncate);
      if (csv_[s][e]->empty()) {
        std::string header = "epoch,step";
        for (const auto& n : names_[s]) {
          header += ',';
          header += csv_field(n);
        }
        header += '\n';
        csv_[s][e]->write(header);
      }
    }
  }
  for (int e = 0; e < 2; ++e)
    jsonl_[e] = std::make_unique<File>(dir_ + "/" + kJsonlNames[e], truncate);
}

void MetricLogger::write_row(Split split, bool epoch_row, std::size_t epoch, std::size_t step,
                             const MetricValues& values) {
  const int s = index(split);
  std::map<std::string, double> by_name(values.begin(), values.end());
  std::string row = fmt::format("{},{}", epoch, step);
  for (const auto& n : names_[s]) {
    auto it = by_name.find(n);
    row += ',';
    if (it != by_name.end()) row += csv_value(it->second);
  }
  row += '\n';
  csv_[s][epoch_row ? 1 : 0]->write(row);
  nn::Json j = {{"split", name(split)}, {"epoch", epoch}, {"step", step}};
  for (const auto& [n, v] : values) j[n] = std::isfinite(v) ? nn::Json(v) : nn::Json(nullptr);
  jsonl_[epoch_row ? 1 : 0]->write(j.dump() + "\n");
}

void MetricLogger::step(Split split, std::size_t epoch, std::size_t step,
                        const MetricValues& values) {
  write_row(split, false, epoch, step, values);
}
void MetricLogger::epoch(Split split, std::size_t epoch, std::size_t step,
                         const MetricValues& values) {
  write_row(split, true, epoch, step, values);
  flush();
}

void MetricLogger::rewrite(const History& history) {
  open(/*truncate=*/true);
  // Rows are (epoch, step) keys gathering every metric's value there, in order. The JSON
  // lines then hold the training rows before the validation rows (a live run interleaves
  // them by epoch); each row carries its split, epoch and step.
  for (int epoch_row = 0; epoch_row < 2; ++epoch_row) {
    for (Split split : {Split::Train, Split::Valid}) {
      std::map<std::pair<std::size_t, std::size_t>, MetricValues> rows;
      for (const auto& m : history.metrics(split)) {
        const auto& pts = epoch_row ? history.epochs(split, m) : history.steps(split, m);
        for (const auto& p : pts) rows[{p.epoch, p.step}].emplace_back(m, p.value);
      }
      for (const auto& [key, values] : rows)
        write_row(split, epoch_row != 0, key.first, key.second, values);
    }
  }
  flush();
}

void MetricLogger::flush() {
  for (auto& s : csv_)
    for (auto& f : s)
      if (f) std::fflush(f->f);
  for (auto& f : jsonl_)
    if (f) std::fflush(f->f);
}

}  // namespace ember::train
