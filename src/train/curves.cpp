// The training-curve pictures of a History (curves.hpp), drawn by plot.hpp.
#include "ember/train/curves.hpp"

#include <cmath>
#include <filesystem>
#include <set>

#include "ember/train/plot.hpp"

namespace ember::train {

void write_curves(const History& history, const std::string& dir, double smoothing) {
  EMBER_CHECK(smoothing >= 0 && smoothing < 1,
              "train::write_curves: smoothing must be in [0, 1), got " + std::to_string(smoothing));
  const std::string out = dir + "/curves";
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  EMBER_CHECK(!ec, "train::write_curves: cannot create " + out + ": " + ec.message());
  std::set<std::string> names;
  for (Split s : {Split::Train, Split::Valid})
    for (const std::string& m : history.metrics(s)) names.insert(m);
  for (const std::string& metric : names) {
    plot::Chart epochs{metric, "epoch", metric, {}};
    for (Split s : {Split::Train, Split::Valid}) {
      plot::Series series{name(s), {}, {}};
      for (const MetricPoint& p : history.epochs(s, metric)) {
        series.x.push_back(double(p.epoch));
        series.y.push_back(p.value);
      }
      if (!series.x.empty()) epochs.series.push_back(std::move(series));
    }
    if (!epochs.series.empty()) {
      plot::write_png(epochs, out + "/" + metric + ".png");
      plot::write_svg(epochs, out + "/" + metric + ".svg");
    }
    const auto& steps = history.steps(Split::Train, metric);
    if (steps.size() < 2) continue;
    plot::Chart per_step{metric + " per step (train)", "step", metric, {}};
    plot::Series raw{"step", {}, {}}, smooth{"moving average", {}, {}};
    double avg = NAN;
    for (const MetricPoint& p : steps) {
      raw.x.push_back(double(p.step));
      raw.y.push_back(p.value);
      if (std::isfinite(p.value))
        avg = std::isnan(avg) ? p.value : smoothing * avg + (1 - smoothing) * p.value;
      smooth.x.push_back(double(p.step));
      smooth.y.push_back(avg);
    }
    per_step.series = {std::move(raw), std::move(smooth)};
    plot::write_png(per_step, out + "/" + metric + "_steps.png");
    plot::write_svg(per_step, out + "/" + metric + "_steps.svg");
  }
}

}  // namespace ember::train
