// Reduction, scan and sorting cases: full and per-dim reductions (sum mean prod max min
// argmax argmin any all), var / var_mean, max/min with indices, cumulative scans, sort,
// argsort and topk. The reference walks each reduced line of the row-major input.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

using ember::ir::ReduceFn;
using ember::ir::ScanFn;
namespace ops = ember::ops;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Integer results wrap into their dtype (sums and products keep the input dtype).
double wrap(DType dt, double v) {
  if (is_float_dtype(dt) || dt == DType::Bool || dt == DType::I64) return v;
  const double m = std::ldexp(1.0, static_cast<int>(ember::size_of(dt)) * 8);
  double r = std::fmod(v, m);
  if (r < 0) r += m;
  if (dt != DType::U8 && r >= m / 2) r -= m;
  return r;
}

// Calls f(line values, out positions) for every line along dim; out has extent `out_n`
// along dim (1 for reductions, the input extent for scans).
template <class F>
void for_lines(const HostTensor& x, std::size_t dim, F&& f) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < dim; ++i) outer *= x.shape[i];
  for (std::size_t i = dim + 1; i < x.rank(); ++i) inner *= x.shape[i];
  const std::size_t n = x.shape[dim];
  std::vector<double> line(n);
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t j = 0; j < inner; ++j) {
      for (std::size_t r = 0; r < n; ++r) line[r] = x.v[(o * n + r) * inner + j];
      f(line, o, j, inner);
    }
  }
}

struct RShape {
  Shape s;
  std::int64_t dim;
  Layout l;
};
std::vector<RShape> reduce_shapes(Scale scale) {
  using L = Layout;
  if (scale == Scale::Perf)
    return {{Shape{1024, 4096}, 1, L::Contiguous}, {Shape{1024, 4096}, 0, L::Contiguous}};
  return {{Shape{7}, 0, L::Contiguous},
          {Shape{0}, 0, L::Contiguous},
          {Shape{1}, -1, L::Sliced},
          {Shape{3, 0, 4}, 1, L::Contiguous},
          {Shape{3, 0, 4}, 2, L::Contiguous},
          {Shape{2, 3, 4}, 0, L::Permuted},
          {Shape{2, 3, 4}, 1, L::Contiguous},
          {Shape{2, 3, 4}, -1, L::Flipped},
          {Shape{5, 1, 33}, 1, L::Contiguous},
          {Shape{1023}, 0, L::Contiguous},
          {Shape{4097}, 0, L::Sliced},
          {Shape{17, 130}, 1, L::Flipped},
          {Shape{17, 130}, 0, L::Expanded},
          {Shape{70001}, 0, L::Contiguous},
          {Shape{3, 257, 90}, 1, L::Contiguous},
          {Shape{3, 257, 90}, 2, L::Permuted},
          {Shape{130, 4, 3}, 0, L::Contiguous}};
}

std::vector<Trial> reduce_trials(DType dt, Scale scale, Domain d, bool specials, bool allow_empty,
                                 std::uint64_t seed, std::size_t max_line = 0) {
  Rng rng(seed);
  std::vector<Trial> out;
  for (const RShape& r : reduce_shapes(scale)) {
    const std::size_t dim = normalize(r.dim, r.s.rank());
    if (!allow_empty && r.s[dim] == 0) continue;
    if (max_line && r.s[dim] > max_line) continue;
    HostTensor x = random_host(r.s, dt, rng, d);
    if (specials) add_specials(x, rng);
    out.push_back({r.s.to_string() + " dim " + std::to_string(r.dim) + " " + name(r.l),
                   {x},
                   {r.l},
                   {static_cast<double>(r.dim)}});
  }
  return out;
}

// Reference of one reduction along dim (kept with extent 1).
HostTensor reduce_ref(ReduceFn fn, const HostTensor& x, std::size_t dim) {
  Shape os = x.shape;
  os[dim] = 1;
  DType out = x.dtype;
  if (fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin) out = DType::I64;
  if (fn == ReduceFn::Any || fn == ReduceFn::All) out = DType::Bool;
  HostTensor y(os, out);
  const bool fl = is_float_dtype(x.dtype);
  for_lines(
      x, dim,
      [&](const std::vector<double>& line, std::size_t o, std::size_t j, std::size_t inner) {
        double r = 0;
        const std::size_t n = line.size();
        switch (fn) {
          case ReduceFn::Sum:
            for (double v : line) r = wrap(x.dtype, r + v);
            break;
          case ReduceFn::Mean:
            for (double v : line) r = wrap(x.dtype, r + v);
            r = n == 0 ? (fl ? kNaN : 0.0)
                       : (fl ? r / static_cast<double>(n) : std::trunc(r / static_cast<double>(n)));
            break;
          case ReduceFn::Prod:
            r = 1;
            for (double v : line) r = wrap(x.dtype, r * v);
            break;
          case ReduceFn::Max:
          case ReduceFn::Min: {
            r = line[0];
            for (double v : line) {
              if (std::isnan(r)) break;
              if (std::isnan(v) || (fn == ReduceFn::Max ? v > r : v < r)) r = v;
            }
            break;
          }
          case ReduceFn::ArgMax:
          case ReduceFn::ArgMin: {
            // The first extreme; a NaN is the extreme.
            std::size_t best = 0;
            for (std::size_t i = 1; i < n; ++i) {
              if (std::isnan(line[best])) break;
              if (std::isnan(line[i]) ||
                  (fn == ReduceFn::ArgMax ? line[i] > line[best] : line[i] < line[best])) {
                best = i;
              }
            }
            r = static_cast<double>(best);
            break;
          }
          case ReduceFn::Any:
            r = 0;
            for (double v : line) r = (r != 0 || v != 0) ? 1 : 0;
            break;
          case ReduceFn::All:
            r = 1;
            for (double v : line) r = (r != 0 && v != 0) ? 1 : 0;
            break;
          default:
            break;
        }
        y.v[o * inner + j] = r;
      });
  return y;
}

Tolerance sum_tolerance(DType dt) {
  // Accumulation over up to 70001 terms of magnitude <= 4: f32 error grows with the count.
  switch (dt) {
    case DType::F64:
      return {1e-9, 1e-9};
    case DType::F32:
      return {1e-4, 2e-2};
    case DType::F16:
      return {4e-3, 5e-2};
    default:
      return {2e-2, 5e-1};
  }
}

void add_reduce(std::vector<Case>& cs, const std::string& fn, ReduceFn f, std::vector<DType> dts,
                bool full, Domain d, bool specials, bool allow_empty, std::size_t max_line = 0) {
  Case c;
  c.fn = fn;
  c.family = "reduction";
  c.dtypes = std::move(dts);
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [=](DType dt, Scale s) {
    auto ts = reduce_trials(dt, s, d, specials, allow_empty, seed, max_line);
    if (full) {
      for (auto& t : ts) t.params = {};  // full reductions: one trial per shape suffices
      if (!allow_empty) std::erase_if(ts, [](const Trial& t) { return t.inputs[0].numel() == 0; });
    }
    return ts;
  };
  c.run = [f, full](Tensors&& x, const Params& p) {
    return Tensors{full ? ops::reduce_all(f, std::move(x[0]))
                        : ops::reduce(f, std::move(x[0]), static_cast<std::int64_t>(p[0]))};
  };
  c.ref = [f, full](const std::vector<HostTensor>& in, const Params& p) {
    if (full) {
      HostTensor flat(Shape{in[0].numel()}, in[0].dtype, in[0].v);
      return std::vector<HostTensor>{reduce_ref(f, flat, 0)};
    }
    return std::vector<HostTensor>{
        reduce_ref(f, in[0], normalize(static_cast<std::int64_t>(p[0]), in[0].rank()))};
  };
  if (f == ReduceFn::Sum || f == ReduceFn::Mean || f == ReduceFn::Prod) c.tol = sum_tolerance;
  c.ir_call =
      IrCall{full ? IrCall::Kind::ReduceAll : IrCall::Kind::Reduce, static_cast<std::uint8_t>(f)};
  cs.push_back(std::move(c));
}

HostTensor scan_ref(ScanFn fn, const HostTensor& x, std::size_t dim) {
  HostTensor y(x.shape, x.dtype);
  const std::size_t n = x.shape[dim];
  for_lines(x, dim,
            [&](const std::vector<double>& line, std::size_t o, std::size_t j, std::size_t inner) {
              double acc = 0;
              for (std::size_t r = 0; r < n; ++r) {
                const double v = line[r];
                if (r == 0) {
                  acc = v;
                } else {
                  switch (fn) {
                    case ScanFn::Sum:
                      acc = wrap(x.dtype, acc + v);
                      break;
                    case ScanFn::Prod:
                      acc = wrap(x.dtype, acc * v);
                      break;
                    case ScanFn::Max:
                      acc = (std::isnan(acc) || std::isnan(v)) ? kNaN : std::max(acc, v);
                      break;
                    case ScanFn::Min:
                      acc = (std::isnan(acc) || std::isnan(v)) ? kNaN : std::min(acc, v);
                      break;
                    default:
                      break;
                  }
                }
                y.v[(o * n + r) * inner + j] = acc;
              }
            });
  return y;
}

// Stable sort of one line; NaN is the largest value.
std::vector<std::size_t> sort_order(const std::vector<double>& line, bool desc) {
  std::vector<std::size_t> idx(line.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto less = [](double a, double b) {
    if (std::isnan(b)) return !std::isnan(a);
    if (std::isnan(a)) return false;
    return a < b;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return desc ? less(line[b], line[a]) : less(line[a], line[b]);
  });
  return idx;
}

std::vector<HostTensor> sort_ref(const HostTensor& x, std::size_t dim, bool desc, std::size_t k) {
  Shape os = x.shape;
  os[dim] = k;
  HostTensor v(os, x.dtype), i(os, DType::I64);
  for_lines(x, dim,
            [&](const std::vector<double>& line, std::size_t o, std::size_t j, std::size_t inner) {
              const auto order = sort_order(line, desc);
              for (std::size_t r = 0; r < k; ++r) {
                v.v[(o * k + r) * inner + j] = line[order[r]];
                i.v[(o * k + r) * inner + j] = static_cast<double>(order[r]);
              }
            });
  return {v, i};
}

}  // namespace

void add_reduce_cases(std::vector<Case>& cs) {
  const auto FI = concat(kAllFloats, kInts);
  const auto FIB = concat(FI, {DType::Bool});
  using D = Domain;
  add_reduce(cs, "sum", ReduceFn::Sum, FI, true, D::Any, false, true);
  add_reduce(cs, "sum_dim", ReduceFn::Sum, FI, false, D::Any, false, true);
  // The mean of ints is refused (as PyTorch): tests/tensor/test_hardening.cpp checks it.
  add_reduce(cs, "mean", ReduceFn::Mean, kAllFloats, true, D::Any, false, false);
  add_reduce(cs, "mean_dim", ReduceFn::Mean, kAllFloats, false, D::Any, false, true);
  // Products over short lines with values near 1 stay finite in every dtype.
  add_reduce(cs, "prod", ReduceFn::Prod, FI, true, D::Small, false, true, 8);
  add_reduce(cs, "prod_dim", ReduceFn::Prod, FI, false, D::Small, false, true, 33);
  add_reduce(cs, "max", ReduceFn::Max, FI, true, D::Any, true, false);
  add_reduce(cs, "max_dim", ReduceFn::Max, FI, false, D::Any, true, false);
  add_reduce(cs, "min", ReduceFn::Min, FI, true, D::Any, true, false);
  add_reduce(cs, "min_dim", ReduceFn::Min, FI, false, D::Any, true, false);
  add_reduce(cs, "argmax", ReduceFn::ArgMax, FI, true, D::Small, true, false);
  add_reduce(cs, "argmax_dim", ReduceFn::ArgMax, FI, false, D::Small, true, false);
  add_reduce(cs, "argmin", ReduceFn::ArgMin, FI, true, D::Small, true, false);
  add_reduce(cs, "argmin_dim", ReduceFn::ArgMin, FI, false, D::Small, true, false);
  add_reduce(cs, "any", ReduceFn::Any, FIB, true, D::Small, false, true);
  add_reduce(cs, "any_dim", ReduceFn::Any, FIB, false, D::Small, false, true);
  add_reduce(cs, "all", ReduceFn::All, FIB, true, D::Small, false, true);
  add_reduce(cs, "all_dim", ReduceFn::All, FIB, false, D::Small, false, true);
  for (auto& c : cs) {
    // any() / all() are their own functions (ops::any, ops::all), not reduce_all.
    if (c.fn == "any" || c.fn == "all") {
      const bool is_any = c.fn == "any";
      c.run = [is_any](Tensors&& x, const Params&) {
        return Tensors{is_any ? ops::any(std::move(x[0])) : ops::all(std::move(x[0]))};
      };
    }
    // Bool inputs of any/all mostly true or mostly false would hide bugs; Small ints and
    // floats contain zeros often enough.
  }

  // var, var_mean (correction 1 and 0).
  for (const std::string fn : {"var", "var_mean"}) {
    Case c;
    c.fn = fn;
    c.family = "reduction";
    c.dtypes = kFloats;
    c.trials = [](DType dt, Scale s) {
      auto ts = reduce_trials(dt, s, D::Any, false, false, 21);
      for (std::size_t i = 0; i < ts.size(); ++i) ts[i].params.push_back(i % 2 == 0 ? 1 : 0);
      // correction 1 needs two elements per line.
      std::erase_if(ts, [](const Trial& t) {
        const auto d = normalize(static_cast<std::int64_t>(t.params[0]), t.inputs[0].rank());
        return t.inputs[0].shape[d] <= t.params[1];
      });
      return ts;
    };
    const bool with_mean = fn == "var_mean";
    c.run = [with_mean](Tensors&& x, const Params& p) {
      const auto dim = static_cast<std::int64_t>(p[0]);
      const auto corr = static_cast<std::size_t>(p[1]);
      if (!with_mean) return Tensors{ops::var(std::move(x[0]), dim, corr)};
      auto [v, m] = ops::var_mean(std::move(x[0]), dim, corr);
      return Tensors{std::move(v), std::move(m)};
    };
    c.ref = [with_mean](const std::vector<HostTensor>& in, const Params& p) {
      const std::size_t dim = normalize(static_cast<std::int64_t>(p[0]), in[0].rank());
      Shape os = in[0].shape;
      os[dim] = 1;
      HostTensor var(os, in[0].dtype), mean(os, in[0].dtype);
      for_lines(
          in[0], dim,
          [&](const std::vector<double>& line, std::size_t o, std::size_t j, std::size_t inner) {
            double m = 0, ss = 0;
            for (double v : line) m += v;
            m /= static_cast<double>(line.size());
            for (double v : line) ss += (v - m) * (v - m);
            var.v[o * inner + j] = ss / (static_cast<double>(line.size()) - p[1]);
            mean.v[o * inner + j] = m;
          });
      if (!with_mean) return std::vector<HostTensor>{var};
      return std::vector<HostTensor>{var, mean};
    };
    c.tol = sum_tolerance;
    cs.push_back(std::move(c));
  }

  // logsumexp along a dim, through its Tensor method: the reference sums exp(v - max) in
  // f64; a line holding NaN gives NaN, +inf gives +inf, all -inf (or none) gives -inf.
  {
    Case c;
    c.fn = "logsumexp_dim";
    c.also = {"logsumexp"};  // the ops:: function behind the method
    c.family = "reduction";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {  // finite lines (the grad mode's) and special values
      auto ts = reduce_trials(dt, s, D::Any, false, true, 57);
      for (Trial& t : reduce_trials(dt, s, D::Any, true, true, 58)) ts.push_back(std::move(t));
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const auto dim = static_cast<std::int64_t>(p[0]);
      return Tensors{with_typed(std::move(x[0]), [dim](auto t) { return t.logsumexp_dim(dim); })};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const std::size_t dim = normalize(static_cast<std::int64_t>(p[0]), in[0].rank());
      Shape os = in[0].shape;
      os[dim] = 1;
      HostTensor y(os, in[0].dtype);
      for_lines(
          in[0], dim,
          [&](const std::vector<double>& line, std::size_t o, std::size_t j, std::size_t inner) {
            double m = -kInf;
            bool nan = false;
            for (double v : line) {
              nan = nan || std::isnan(v);
              m = std::max(m, v);
            }
            double r = m;
            if (nan) {
              r = kNaN;
            } else if (std::isfinite(m)) {
              double sum = 0;
              for (double v : line) sum += std::exp(v - m);
              r = m + std::log(sum);
            }
            y.v[o * inner + j] = r;
          });
      return std::vector<HostTensor>{y};
    };
    c.tol = sum_tolerance;
    cs.push_back(std::move(c));
  }

  for (const bool is_max : {true, false}) {
    Case c;
    c.fn = is_max ? "max_dim_with_indices" : "min_dim_with_indices";
    c.family = "reduction";
    c.dtypes = FI;
    c.trials = [](DType dt, Scale s) { return reduce_trials(dt, s, D::Small, true, false, 23); };
    c.run = [is_max](Tensors&& x, const Params& p) {
      const auto dim = static_cast<std::int64_t>(p[0]);
      auto [v, i] = is_max ? ops::max_dim_with_indices(std::move(x[0]), dim)
                           : ops::min_dim_with_indices(std::move(x[0]), dim);
      return Tensors{std::move(v), std::move(i)};
    };
    c.ref = [is_max](const std::vector<HostTensor>& in, const Params& p) {
      const std::size_t dim = normalize(static_cast<std::int64_t>(p[0]), in[0].rank());
      return std::vector<HostTensor>{
          reduce_ref(is_max ? ReduceFn::Max : ReduceFn::Min, in[0], dim),
          reduce_ref(is_max ? ReduceFn::ArgMax : ReduceFn::ArgMin, in[0], dim)};
    };
    cs.push_back(std::move(c));
  }

  // ---- scans ----
  const std::pair<const char*, ScanFn> scans[] = {{"cumsum", ScanFn::Sum},
                                                  {"cumprod", ScanFn::Prod},
                                                  {"cummax", ScanFn::Max},
                                                  {"cummin", ScanFn::Min}};
  for (const auto& [fn, f] : scans) {
    Case c;
    c.fn = fn;
    c.family = "scan";
    c.dtypes = FI;
    const ScanFn sf = f;
    const bool specials = sf == ScanFn::Max || sf == ScanFn::Min;
    const std::size_t max_line = sf == ScanFn::Prod ? 12 : 0;
    c.trials = [=](DType dt, Scale s) {
      return reduce_trials(dt, s, sf == ScanFn::Prod ? D::Small : D::Any, specials, true, 31,
                           max_line);
    };
    c.run = [sf](Tensors&& x, const Params& p) {
      return Tensors{ops::scan(sf, std::move(x[0]), static_cast<std::int64_t>(p[0]))};
    };
    c.ref = [sf](const std::vector<HostTensor>& in, const Params& p) {
      return std::vector<HostTensor>{
          scan_ref(sf, in[0], normalize(static_cast<std::int64_t>(p[0]), in[0].rank()))};
    };
    if (sf == ScanFn::Sum || sf == ScanFn::Prod) c.tol = sum_tolerance;
    cs.push_back(std::move(c));
  }

  // ---- sorting: stable (ties keep order), NaN largest ----
  enum class S { Sort, Argsort, SortWithIndices, Topk, TopkWithIndices };
  const std::pair<const char*, S> sorts[] = {{"sort", S::Sort},
                                             {"argsort", S::Argsort},
                                             {"sort_with_indices", S::SortWithIndices},
                                             {"topk", S::Topk},
                                             {"topk_with_indices", S::TopkWithIndices}};
  for (const auto& [fn, kind] : sorts) {
    Case c;
    c.fn = fn;
    c.family = "sort";
    c.dtypes = concat(FI, {DType::Bool});
    const S k = kind;
    const bool topk = k == S::Topk || k == S::TopkWithIndices;
    if (topk) c.dtypes = FI;
    c.trials = [topk](DType dt, Scale s) {
      // Small values (halves for floats) make ties frequent, to check stability.
      auto ts = reduce_trials(dt, s, D::Small, true, !topk, 41);
      for (std::size_t i = 0; i < ts.size(); ++i) {
        for (double& v : ts[i].inputs[0].v) v = std::isfinite(v) ? std::round(v * 2) / 2 : v;
        const auto d =
            normalize(static_cast<std::int64_t>(ts[i].params[0]), ts[i].inputs[0].rank());
        const double n = static_cast<double>(ts[i].inputs[0].shape[d]);
        ts[i].params.push_back(topk ? std::ceil(n / 2) : (i % 2 == 0 ? 0 : 1));  // k or descending
      }
      return ts;
    };
    c.run = [k](Tensors&& x, const Params& p) {
      const auto dim = static_cast<std::int64_t>(p[0]);
      switch (k) {
        case S::Sort:
          return Tensors{ops::sort(std::move(x[0]), dim, p[1] != 0)};
        case S::Argsort:
          return Tensors{ops::argsort(std::move(x[0]), dim, p[1] != 0)};
        case S::SortWithIndices: {
          auto [v, i] = ops::sort_with_indices(std::move(x[0]), dim, p[1] != 0);
          return Tensors{std::move(v), std::move(i)};
        }
        case S::Topk:
          return Tensors{ops::topk(std::move(x[0]), static_cast<std::size_t>(p[1]), dim)};
        case S::TopkWithIndices: {
          auto [v, i] =
              ops::topk_with_indices(std::move(x[0]), static_cast<std::size_t>(p[1]), dim);
          return Tensors{std::move(v), std::move(i)};
        }
      }
      return Tensors{};
    };
    c.ref = [k, topk](const std::vector<HostTensor>& in, const Params& p) {
      const std::size_t dim = normalize(static_cast<std::int64_t>(p[0]), in[0].rank());
      const std::size_t kk = topk ? static_cast<std::size_t>(p[1]) : in[0].shape[dim];
      auto r = sort_ref(in[0], dim, topk || p[1] != 0, kk);
      switch (k) {
        case S::Sort:
        case S::Topk:
          return std::vector<HostTensor>{r[0]};
        case S::Argsort:
          return std::vector<HostTensor>{r[1]};
        default:
          return r;
      }
    };
    cs.push_back(std::move(c));
  }
}

}  // namespace conformance
