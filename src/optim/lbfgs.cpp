// L-BFGS: the two-loop recursion and the strong-Wolfe line search (Nocedal & Wright,
// Algorithms 7.4, 3.5 and 3.6), on host f64 vectors.
#include "ember/optim/lbfgs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "config_checks.hpp"

namespace ember::optim {

namespace detail {

void FlatParams::gather(const nn::TensorEntry& e) {
  if (!e.is_param() || !e.trainable) return;
  for (const Slot& s : slots)
    if (s.id == e.id) return;  // a tied param: once
  auto v = ops::cast(e.tensor, DType::F64).to_data().to_vector<double>();
  slots.push_back(Slot{e.id, values.size(), v.size()});
  values.insert(values.end(), v.begin(), v.end());
}

void FlatParams::scatter(nn::TensorEntry& e, const std::vector<double>& x) const {
  if (!e.is_param() || !e.trainable) return;
  for (const Slot& s : slots) {
    if (s.id != e.id) continue;
    const Device& dev = e.tensor.device();
    const Device inner = dev.is_autodiff() ? dev.inner() : dev;
    std::vector<double> v(x.begin() + std::ptrdiff_t(s.offset),
                          x.begin() + std::ptrdiff_t(s.offset + s.size));
    DynTensor t =
        ops::cast(ops::from_data(TensorData::from<double>(v, e.shape()), inner), e.dtype());
    e.tensor = dev.is_autodiff() ? ops::from_inner(t, dev) : t;
    return;
  }
}

void FlatParams::grads(const GradientsParams& gp, std::vector<double>& g) const {
  g.assign(values.size(), 0.0);  // a param without a gradient has gradient 0
  for (const Slot& s : slots) {
    auto t = gp.get(s.id);
    if (!t) continue;
    EMBER_CHECK(t->num_elements() == s.size,
                "optim::Lbfgs::step: the closure's gradient of param " + std::to_string(s.id) +
                    " has shape " + t->shape().to_string() + ", not " + std::to_string(s.size) +
                    " elements as the param");
    auto v = ops::cast(*t, DType::F64).to_data().to_vector<double>();
    std::copy(v.begin(), v.end(), g.begin() + std::ptrdiff_t(s.offset));
  }
}

}  // namespace detail

namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}
double max_abs(const std::vector<double>& a) {
  double m = 0.0;
  for (double v : a) m = std::max(m, std::abs(v));
  return m;
}
std::vector<double> along(const std::vector<double>& x, double t, const std::vector<double>& d) {
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = x[i] + t * d[i];
  return r;
}

// The minimiser of the cubic through (a, fa, ga) and (b, fb, gb) (Nocedal & Wright eq.
// 3.59), clamped to [lo, hi]; the interval's midpoint when the cubic has no minimiser.
double cubic_min(double a, double fa, double ga, double b, double fb, double gb, double lo,
                 double hi) {
  const double d1 = ga + gb - 3.0 * (fa - fb) / (a - b);
  const double disc = d1 * d1 - ga * gb;
  if (!(disc >= 0.0)) return 0.5 * (lo + hi);
  const double d2 = std::sqrt(disc);
  // Written from the farther point, as eq. 3.59.
  const double x = a <= b ? b - (b - a) * ((gb + d2 - d1) / (gb - ga + 2.0 * d2))
                          : a - (a - b) * ((ga + d2 - d1) / (ga - gb + 2.0 * d2));
  return std::min(std::max(x, lo), hi);
}
double cubic_min(double a, double fa, double ga, double b, double fb, double gb) {
  return cubic_min(a, fa, ga, b, fb, gb, std::min(a, b), std::max(a, b));
}

struct Point {
  double t = 0.0, f = 0.0, gtd = 0.0;
  std::vector<double> g;
};

// The strong-Wolfe line search from x along d (Algorithms 3.5 and 3.6; Note [L-BFGS as
// torch.optim.LBFGS]): f, g and gtd are the loss, gradient and slope at t = 0, t the first
// trial. Returns the accepted point; `evals` counts the objective's calls.
Point strong_wolfe(const detail::Objective& objective, const std::vector<double>& x, double t,
                   const std::vector<double>& d, double f, const std::vector<double>& g, double gtd,
                   double tolerance_change, std::size_t& evals) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int max_ls = 25;
  const double d_norm = max_abs(d);
  auto eval = [&](double at) {
    Point p;
    p.t = at;
    p.f = objective(along(x, at, d), p.g);
    p.gtd = dot(p.g, d);
    ++evals;
    return p;
  };
  Point cur = eval(t);
  Point prev{0.0, f, gtd, g};
  std::vector<Point> bracket;  // one point (done) or two
  bool done = false;
  int ls_iter = 0;
  // Bracketing (Algorithm 3.5).
  while (ls_iter < max_ls) {
    if (cur.f > f + c1 * cur.t * gtd || (ls_iter > 1 && cur.f >= prev.f)) {
      bracket = {prev, cur};
      break;
    }
    if (std::abs(cur.gtd) <= -c2 * gtd) {
      bracket = {cur};
      done = true;
      break;
    }
    if (cur.gtd >= 0.0) {
      bracket = {prev, cur};
      break;
    }
    const double lo = cur.t + 0.01 * (cur.t - prev.t), hi = cur.t * 10.0;
    const double next = cubic_min(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd, lo, hi);
    prev = std::move(cur);
    cur = eval(next);
    ++ls_iter;
  }
  if (ls_iter == max_ls) bracket = {Point{0.0, f, gtd, g}, cur};
  // Zoom (Algorithm 3.6) inside the bracket.
  std::size_t low = 0, high = 1;
  auto order = [&] {
    low = bracket.front().f <= bracket.back().f ? 0 : 1;
    high = 1 - low;
  };
  order();
  bool insufficient = false;
  while (!done && ls_iter < max_ls) {
    Point& b0 = bracket[0];
    Point& b1 = bracket[1];
    if (std::abs(b1.t - b0.t) * d_norm < tolerance_change) break;
    double trial = cubic_min(b0.t, b0.f, b0.gtd, b1.t, b1.f, b1.gtd);
    const double bmax = std::max(b0.t, b1.t), bmin = std::min(b0.t, b1.t);
    const double eps = 0.1 * (bmax - bmin);
    if (std::min(bmax - trial, trial - bmin) < eps) {
      // Close to an end: move away from it when the last trial was close too, or at it.
      if (insufficient || trial >= bmax || trial <= bmin) {
        trial = std::abs(trial - bmax) < std::abs(trial - bmin) ? bmax - eps : bmin + eps;
        insufficient = false;
      } else {
        insufficient = true;
      }
    } else {
      insufficient = false;
    }
    Point p = eval(trial);
    ++ls_iter;
    if (p.f > f + c1 * p.t * gtd || p.f >= bracket[low].f) {
      bracket[high] = std::move(p);
      order();
    } else {
      if (std::abs(p.gtd) <= -c2 * gtd) {
        done = true;
      } else if (p.gtd * (bracket[high].t - bracket[low].t) >= 0.0) {
        bracket[high] = bracket[low];
      }
      bracket[low] = std::move(p);
    }
  }
  return std::move(bracket[low]);
}

}  // namespace

Lbfgs LbfgsConfig::init() const { return Lbfgs(*this); }

Lbfgs::Lbfgs(const LbfgsConfig& c) : config_(c) {
  const char* who = "optim::LbfgsConfig";
  EMBER_CHECK(c.max_iter > 0, std::string(who) + "::init: max_iter must be > 0, got 0");
  EMBER_CHECK(c.history_size > 0, std::string(who) + "::init: history_size must be > 0, got 0");
  detail::check_non_negative(who, "tolerance_grad", c.tolerance_grad);
  detail::check_non_negative(who, "tolerance_change", c.tolerance_change);
}

void Lbfgs::check_state_fits(std::size_t n) const {
  EMBER_CHECK(d_.empty() || d_.size() == n,
              "optim::Lbfgs::step: the optimizer's state is for " + std::to_string(d_.size()) +
                  " parameter values, the model has " + std::to_string(n) +
                  " (a state from another model?)");
}

void Lbfgs::minimize(double lr, std::vector<double>& x, const detail::Objective& objective) {
  const std::size_t n = x.size();
  check_state_fits(n);
  const std::size_t max_eval = config_.max_eval ? config_.max_eval : config_.max_iter * 5 / 4;
  std::vector<double> g;
  double f = objective(x, g);
  std::size_t evals = 1;
  last_loss_ = f;
  if (max_abs(g) <= config_.tolerance_grad) {
    evals_ += evals;
    return;
  }
  for (std::size_t iter = 1; iter <= config_.max_iter; ++iter) {
    ++iters_;
    // The direction: -H g by the two-loop recursion (Algorithm 7.4), after adding the last
    // iteration's curvature pair (Note [L-BFGS as torch.optim.LBFGS]).
    if (iters_ == 1) {
      d_.assign(n, 0.0);
      for (std::size_t i = 0; i < n; ++i) d_[i] = -g[i];
      s_.clear();
      y_.clear();
      ro_.clear();
      h_diag_ = 1.0;
    } else {
      std::vector<double> y(n), s(n);
      for (std::size_t i = 0; i < n; ++i) {
        y[i] = g[i] - g_prev_[i];
        s[i] = d_[i] * t_;
      }
      const double ys = dot(y, s);
      if (ys > 1e-10) {
        if (s_.size() == config_.history_size) {
          s_.erase(s_.begin());
          y_.erase(y_.begin());
          ro_.erase(ro_.begin());
        }
        h_diag_ = ys / dot(y, y);
        s_.push_back(std::move(s));
        y_.push_back(std::move(y));
        ro_.push_back(1.0 / ys);
      }
      const std::size_t m = s_.size();
      std::vector<double> q(n), alpha(m);
      for (std::size_t i = 0; i < n; ++i) q[i] = -g[i];
      for (std::size_t k = m; k-- > 0;) {
        alpha[k] = dot(s_[k], q) * ro_[k];
        for (std::size_t i = 0; i < n; ++i) q[i] -= alpha[k] * y_[k][i];
      }
      for (std::size_t i = 0; i < n; ++i) q[i] *= h_diag_;
      for (std::size_t k = 0; k < m; ++k) {
        const double beta = dot(y_[k], q) * ro_[k];
        for (std::size_t i = 0; i < n; ++i) q[i] += (alpha[k] - beta) * s_[k][i];
      }
      d_ = std::move(q);
    }
    g_prev_ = g;
    prev_loss_ = f;
    if (iters_ == 1) {
      double g_l1 = 0.0;
      for (double v : g) g_l1 += std::abs(v);
      t_ = std::min(1.0, 1.0 / g_l1) * lr;
    } else {
      t_ = lr;
    }
    const double gtd = dot(g, d_);
    if (gtd > -config_.tolerance_change) break;  // not a descent direction any more

    bool optimal = false;
    if (config_.strong_wolfe) {
      Point p = strong_wolfe(objective, x, t_, d_, f, g, gtd, config_.tolerance_change, evals);
      t_ = p.t;
      f = p.f;
      g = std::move(p.g);
      for (std::size_t i = 0; i < n; ++i) x[i] += t_ * d_[i];
      optimal = max_abs(g) <= config_.tolerance_grad;
    } else {
      for (std::size_t i = 0; i < n; ++i) x[i] += t_ * d_[i];
      if (iter != config_.max_iter) {  // the last iteration's point is evaluated next step
        f = objective(x, g);
        ++evals;
        optimal = max_abs(g) <= config_.tolerance_grad;
      }
    }
    if (iter == config_.max_iter || evals >= max_eval || optimal) break;
    double moved = 0.0;
    for (std::size_t i = 0; i < n; ++i) moved = std::max(moved, std::abs(d_[i] * t_));
    if (moved <= config_.tolerance_change) break;
    if (std::abs(f - prev_loss_) < config_.tolerance_change) break;
  }
  evals_ += evals;
}

OptimizerState Lbfgs::state() const {
  OptimizerState st;
  auto host = [](const std::vector<double>& v) {
    return ops::from_data(TensorData::from<double>(v, Shape{v.size()}), Device::cpu());
  };
  st.meta["optimizer"] = name();
  st.meta["t"] = t_;
  st.meta["h_diag"] = h_diag_;
  st.meta["prev_loss"] = prev_loss_;
  st.meta["iterations"] = iters_;
  st.meta["evaluations"] = evals_;
  st.meta["num_params"] = d_.size();
  st.meta["history"] = s_.size();
  if (!d_.empty()) {
    st.tensors.emplace_back("direction", host(d_));
    st.tensors.emplace_back("prev_grad", host(g_prev_));
  }
  for (std::size_t k = 0; k < s_.size(); ++k) {
    st.tensors.emplace_back("history." + std::to_string(k) + ".s", host(s_[k]));
    st.tensors.emplace_back("history." + std::to_string(k) + ".y", host(y_[k]));
  }
  return st;
}

void Lbfgs::load_state(const OptimizerState& st) {
  const std::string who = std::string(name()) + "::load_state: ";
  const nn::Json& m = st.meta;
  EMBER_CHECK(m.is_object() && m.contains("optimizer") && m["optimizer"].is_string(),
              who + "the state has no \"optimizer\" name in its meta");
  const std::string saved = m["optimizer"].get<std::string>();
  EMBER_CHECK(saved == name(), who + "the state is from " + saved + ", not " + name());
  for (const char* key : {"t", "h_diag", "prev_loss"})
    EMBER_CHECK(m.contains(key) && m[key].is_number(),
                who + "the meta has no number \"" + key + "\"");
  for (const char* key : {"iterations", "evaluations", "num_params", "history"})
    EMBER_CHECK(m.contains(key) && m[key].is_number_unsigned(),
                who + "the meta has no non-negative integer \"" + key + "\"");
  const auto n = m["num_params"].get<std::size_t>();
  const auto history = m["history"].get<std::size_t>();
  auto vec = [&](const std::string& key) {
    const DynTensor* t = st.find(key);
    EMBER_CHECK(t != nullptr, who + "the state has no tensor '" + key + "'");
    EMBER_CHECK(t->shape() == Shape{n}, who + "'" + key + "' has shape " + t->shape().to_string() +
                                            ", expected [" + std::to_string(n) + "]");
    return ops::cast(*t, DType::F64).to_data().to_vector<double>();
  };
  std::vector<std::vector<double>> s, y;
  std::vector<double> ro;
  for (std::size_t k = 0; k < history; ++k) {
    s.push_back(vec("history." + std::to_string(k) + ".s"));
    y.push_back(vec("history." + std::to_string(k) + ".y"));
    ro.push_back(1.0 / dot(y.back(), s.back()));
  }
  d_ = n ? vec("direction") : std::vector<double>{};
  g_prev_ = n ? vec("prev_grad") : std::vector<double>{};
  s_ = std::move(s);
  y_ = std::move(y);
  ro_ = std::move(ro);
  t_ = m["t"].get<double>();
  h_diag_ = m["h_diag"].get<double>();
  prev_loss_ = m["prev_loss"].get<double>();
  iters_ = m["iterations"].get<std::size_t>();
  evals_ = m["evaluations"].get<std::size_t>();
}

}  // namespace ember::optim
