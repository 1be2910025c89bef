// History: per-step and per-epoch metric values of both splits, and their JSON form.
#include "ember/train/history.hpp"

#include <cmath>
#include <limits>

#include "ember/base/error.hpp"

namespace ember::train {

const char* name(Split s) { return s == Split::Train ? "train" : "valid"; }

namespace {
const std::vector<MetricPoint>& no_points() {
  static const std::vector<MetricPoint> empty;
  return empty;
}
nn::Json value_json(double v) { return std::isfinite(v) ? nn::Json(v) : nn::Json(nullptr); }
double value_of(const nn::Json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}
nn::Json points_json(const std::vector<MetricPoint>& ps) {
  nn::Json a = nn::Json::array();
  for (const auto& p : ps) a.push_back({p.epoch, p.step, value_json(p.value)});
  return a;
}
std::vector<MetricPoint> points_of(const nn::Json& a) {
  std::vector<MetricPoint> out;
  for (const auto& p : a) {
    EMBER_CHECK(p.is_array() && p.size() == 3,
                "train::History::from_json: a point must be [epoch, step, value], got " + p.dump());
    out.push_back({p[0].get<std::size_t>(), p[1].get<std::size_t>(), value_of(p[2])});
  }
  return out;
}
}  // namespace

History::Series& History::series(Split split, const std::string& metric) {
  auto& map = split == Split::Train ? train_ : valid_;
  auto it = map.find(metric);
  if (it == map.end()) {
    (split == Split::Train ? train_order_ : valid_order_).push_back(metric);
    it = map.emplace(metric, Series{}).first;
  }
  return it->second;
}
const History::Series* History::find(Split split, const std::string& metric) const {
  const auto& map = split == Split::Train ? train_ : valid_;
  auto it = map.find(metric);
  return it == map.end() ? nullptr : &it->second;
}

void History::add_step(Split split, const std::string& metric, MetricPoint p) {
  series(split, metric).steps.push_back(p);
}
void History::add_epoch(Split split, const std::string& metric, MetricPoint p) {
  series(split, metric).epochs.push_back(p);
}
const std::vector<MetricPoint>& History::steps(Split split, const std::string& metric) const {
  const Series* s = find(split, metric);
  return s ? s->steps : no_points();
}
const std::vector<MetricPoint>& History::epochs(Split split, const std::string& metric) const {
  const Series* s = find(split, metric);
  return s ? s->epochs : no_points();
}
std::vector<std::string> History::metrics(Split split) const {
  return split == Split::Train ? train_order_ : valid_order_;
}
std::optional<double> History::last_epoch(Split split, const std::string& metric) const {
  const auto& e = epochs(split, metric);
  if (e.empty()) return std::nullopt;
  return e.back().value;
}
std::optional<MetricPoint> History::best_epoch(Split split, const std::string& metric,
                                               bool higher_is_better) const {
  std::optional<MetricPoint> best;
  for (const auto& p : epochs(split, metric)) {
    if (std::isnan(p.value)) continue;
    if (!best || (higher_is_better ? p.value > best->value : p.value < best->value)) best = p;
  }
  return best;
}

nn::Json History::to_json() const {
  nn::Json j = nn::Json::object();
  for (Split split : {Split::Train, Split::Valid}) {
    nn::Json metrics = nn::Json::array();
    for (const auto& m : this->metrics(split)) {
      const Series& s = *find(split, m);
      metrics.push_back(
          {{"name", m}, {"steps", points_json(s.steps)}, {"epochs", points_json(s.epochs)}});
    }
    j[name(split)] = std::move(metrics);
  }
  return j;
}

History History::from_json(const nn::Json& j) {
  EMBER_CHECK(j.is_object(),
              "train::History::from_json: expected an object, got " + j.dump().substr(0, 80));
  History h;
  for (Split split : {Split::Train, Split::Valid}) {
    if (!j.contains(name(split))) continue;
    for (const auto& m : j.at(name(split))) {
      EMBER_CHECK(
          m.is_object() && m.contains("name") && m.contains("steps") && m.contains("epochs"),
          "train::History::from_json: a metric needs name, steps and epochs, got " +
              m.dump().substr(0, 80));
      Series& s = h.series(split, m.at("name").get<std::string>());
      s.steps = points_of(m.at("steps"));
      s.epochs = points_of(m.at("epochs"));
    }
  }
  return h;
}

}  // namespace ember::train
