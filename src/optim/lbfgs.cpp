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
// 3.59), kept inside [lo, hi]; the midpoint when the cubic has no minimiser there.
double cubic_min(double a, double fa, double ga, double b, double fb, double gb, double lo,
                 double hi) {
  const double d1 = ga + gb - 3.0 * (fa - fb) / (a - b);
  const double disc = d1 * d1 - ga * gb;
  if (disc >= 0.0 && std::isfinite(disc)) {
    const double d2 = std::copysign(std::sqrt(disc), b - a);
    const double x = b - (b - a) * ((gb + d2 - d1) / (gb - ga + 2.0 * d2));
    if (std::isfinite(x)) return std::clamp(x, lo, hi);
  }
  return 0.5 * (lo + hi);
}

struct Point {
  double t, f, gtd;
  std::vector<double> g;
};

}  // namespace

Lbfgs LbfgsConfig::init() const { return Lbfgs(*this); }

Lbfgs::Lbfgs(const LbfgsConfig& c) : config_(c) {
  const char* who = "optim::LbfgsConfig";
  EMBER_CHECK(c.max_iter > 0, std::string(who) + "::init: max_iter must be > 0, got 0");
  EMBER_CHECK(c.history_size > 0, std::string(who) + "::init: history_size must be > 0, got 0");
  detail::check_non_negative(who, "tolerance_grad", c.tolerance_grad);
  detail::check_non_negative(who, "tolerance_change", c.tolerance_change);
}

void Lbfgs::minimize(double lr, std::vector<double>& x, const detail::Objective& objective) {
  const std::size_t max_eval = config_.max_eval ? config_.max_eval : config_.max_iter * 5 / 4;
  std::size_t evals = 0;
  auto f_at = [&](const std::vector<double>& p, std::vector<double>& g) {
    ++evals;
    ++evals_;
    return objective(p, g);
  };
  std::vector<double> g;
  double f = f_at(x, g);
  last_loss_ = f;
  if (max_abs(g) <= config_.tolerance_grad) return;
  const std::size_t n = x.size();
  for (std::size_t iter = 0; iter < config_.max_iter; ++iter) {
    ++iters_;
    // The direction: -H g by the two-loop recursion (Algorithm 7.4), H0 = s'y / y'y.
    std::vector<double> d(n);
    for (std::size_t i = 0; i < n; ++i) d[i] = -g[i];
    const bool first = s_.empty();
    if (!first) {
      const std::size_t m = s_.size();
      std::vector<double> alpha(m), rho(m);
      for (std::size_t k = m; k-- > 0;) {
        rho[k] = 1.0 / dot(y_[k], s_[k]);
        alpha[k] = rho[k] * dot(s_[k], d);
        for (std::size_t i = 0; i < n; ++i) d[i] -= alpha[k] * y_[k][i];
      }
      const double gamma = dot(s_.back(), y_.back()) / dot(y_.back(), y_.back());
      for (double& v : d) v *= gamma;
      for (std::size_t k = 0; k < m; ++k) {
        const double beta = rho[k] * dot(y_[k], d);
        for (std::size_t i = 0; i < n; ++i) d[i] += (alpha[k] - beta) * s_[k][i];
      }
    }
    const double gtd = dot(g, d);
    if (gtd > -config_.tolerance_change) break;  // not a descent direction any more
    double g_l1 = 0.0;
    for (double v : g) g_l1 += std::abs(v);
    const double t0 = first ? std::min(1.0, 1.0 / g_l1) * lr : lr;

    Point next;
    if (config_.strong_wolfe) {
      // Algorithm 3.5 with c1 = 1e-4, c2 = 0.9; zoom is Algorithm 3.6.
      constexpr double c1 = 1e-4, c2 = 0.9;
      const double dmax = max_abs(d);
      auto eval = [&](double t) {
        Point p{t, 0.0, 0.0, {}};
        p.f = f_at(along(x, t, d), p.g);
        p.gtd = dot(p.g, d);
        return p;
      };
      auto zoom = [&](Point lo, Point hi) {
        for (int j = 0; j < 25; ++j) {
          const double a = std::min(lo.t, hi.t), b = std::max(lo.t, hi.t);
          if ((b - a) * dmax < config_.tolerance_change) break;
          const double margin = 0.1 * (b - a);
          Point p = eval(cubic_min(lo.t, lo.f, lo.gtd, hi.t, hi.f, hi.gtd, a + margin, b - margin));
          if (p.f > f + c1 * p.t * gtd || p.f >= lo.f) {
            hi = std::move(p);
          } else {
            if (std::abs(p.gtd) <= -c2 * gtd) return p;
            if (p.gtd * (hi.t - lo.t) >= 0.0) hi = lo;
            lo = std::move(p);
          }
        }
        return lo;
      };
      Point prev{0.0, f, gtd, g};
      double t = t0;
      for (int i = 0;; ++i) {
        Point p = eval(t);
        if (p.f > f + c1 * t * gtd || (i > 0 && p.f >= prev.f)) {
          next = zoom(std::move(prev), std::move(p));
          break;
        }
        if (std::abs(p.gtd) <= -c2 * gtd) {
          next = std::move(p);
          break;
        }
        if (p.gtd >= 0.0) {
          next = zoom(std::move(p), std::move(prev));
          break;
        }
        if (i >= 24 || evals >= max_eval) {
          next = std::move(p);
          break;
        }
        const double lo = t + 0.01 * (t - prev.t), hi = 10.0 * t;
        const double t_new = cubic_min(prev.t, prev.f, prev.gtd, p.t, p.f, p.gtd, lo, hi);
        prev = std::move(p);
        t = t_new;
      }
      if (next.t == 0.0) break;  // no decrease found along d
    } else {
      next.t = t0;
      next.f = f_at(along(x, t0, d), next.g);
    }

    std::vector<double> s(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      s[i] = next.t * d[i];
      y[i] = next.g[i] - g[i];
    }
    if (dot(y, s) > 1e-10) {  // keep the pair only where the curvature condition holds
      if (s_.size() == config_.history_size) {
        s_.erase(s_.begin());
        y_.erase(y_.begin());
      }
      s_.push_back(s);
      y_.push_back(std::move(y));
    }
    for (std::size_t i = 0; i < n; ++i) x[i] += s[i];
    const double f_old = f;
    f = next.f;
    g = std::move(next.g);
    if (evals >= max_eval) break;
    if (max_abs(g) <= config_.tolerance_grad) break;
    if (max_abs(s) <= config_.tolerance_change) break;
    if (std::abs(f - f_old) < config_.tolerance_change) break;
  }
}

}  // namespace ember::optim
