// Cases of the functions the tensor layer composes from other ops: reductions over several
// dims, max_abs, cummax / cummin with indices, searchsorted, bucketize, histc, movedim,
// roll, take, one_hot_fill, cross, diag, diag_embed, trace, vector and matrix norms,
// softmin, quiet_softmax and grid_sample. The references are plain f64 loops with the
// semantics of the PyTorch (or Burn) function each is named after.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;
using ember::ir::ReduceFn;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<HostTensor> one(HostTensor t) { return {std::move(t)}; }

// Integer results wrap into their dtype (sums and products keep the input dtype).
double wrap(DType dt, double v) {
  if (is_float_dtype(dt) || dt == DType::Bool || dt == DType::I64) return v;
  const double m = std::ldexp(1.0, static_cast<int>(ember::size_of(dt)) * 8);
  double r = std::fmod(v, m);
  if (r < 0) r += m;
  if (dt != DType::U8 && r >= m / 2) r -= m;
  return r;
}

Tolerance accumulating(DType dt) {
  switch (dt) {
    case DType::F64:
      return {1e-9, 1e-9};
    case DType::F32:
      return {1e-4, 1e-4};
    case DType::F16:
      return {4e-3, 2e-2};
    default:
      return {2e-2, 2e-1};
  }
}

std::vector<std::int64_t> ints_of(const Params& p, std::size_t from, std::size_t n) {
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<std::int64_t>(p[from + i]));
  return v;
}

// ---- reductions over several dims ----
// Trials carry the dims as params.
struct DimsShape {
  Shape s;
  std::vector<std::int64_t> dims;
  Layout l;
};
std::vector<Trial> dims_trials(DType dt, Scale scale, bool allow_empty, Domain d,
                               std::uint64_t seed) {
  using L = Layout;
  std::vector<DimsShape> shapes = {
      {Shape{2, 3, 4}, {0, 2}, L::Contiguous}, {Shape{2, 3, 4}, {-1, 0, 1}, L::Permuted},
      {Shape{2, 3, 4}, {1}, L::Flipped},       {Shape{3, 0, 4}, {0, 1}, L::Contiguous},
      {Shape{5, 1, 33}, {2, 0}, L::Sliced},    {Shape{6, 4, 3}, {0, -1}, L::Expanded},
      {Shape{7}, {0}, L::Contiguous},          {Shape{2, 3, 2, 5}, {3, 1}, L::Permuted}};
  if (scale == Scale::Perf) shapes = {{Shape{64, 256, 64}, {0, 2}, L::Contiguous}};
  Rng rng(seed);
  std::vector<Trial> out;
  for (const auto& ds : shapes) {
    if (!allow_empty && ds.s.num_elements() == 0) continue;
    Params p;
    for (auto v : ds.dims) p.push_back(static_cast<double>(v));
    out.push_back({ds.s.to_string() + " dims " + std::to_string(ds.dims.size()) + " " + name(ds.l),
                   {random_host(ds.s, dt, rng, d)},
                   {ds.l},
                   p});
  }
  return out;
}

// The fold of fn over each group of x's elements that share the kept coordinates.
HostTensor reduce_dims_ref(ReduceFn fn, const HostTensor& x, const std::vector<std::size_t>& ds) {
  Shape os = x.shape;
  for (auto d : ds) os[d] = 1;
  std::vector<std::vector<double>> groups(os.num_elements());
  for (std::size_t p = 0; p < x.numel(); ++p) {
    auto idx = unravel(p, x.shape);
    for (auto d : ds) idx[d] = 0;
    groups[ravel(idx, os)].push_back(x.v[p]);
  }
  HostTensor y(os, x.dtype);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& vs = groups[g];
    double r = 0;
    switch (fn) {
      case ReduceFn::Sum:
        for (double v : vs) r = wrap(x.dtype, r + v);
        break;
      case ReduceFn::Mean:
        for (double v : vs) r += v;
        r = vs.empty() ? kNaN : r / static_cast<double>(vs.size());
        break;
      case ReduceFn::Prod:
        r = 1;
        for (double v : vs) r = wrap(x.dtype, r * v);
        break;
      default: {  // Max, Min: NaN propagates
        const bool mx = fn == ReduceFn::Max;
        r = vs[0];
        for (double v : vs) {
          if (std::isnan(r)) break;
          if (std::isnan(v) || (mx ? v > r : v < r)) r = v;
        }
      }
    }
    y.v[g] = r;
  }
  return y;
}

std::vector<std::size_t> norm_dims(const Params& p, std::size_t from, std::size_t rank) {
  std::vector<std::size_t> ds;
  for (std::size_t i = from; i < p.size(); ++i) {
    ds.push_back(normalize(static_cast<std::int64_t>(p[i]), rank));
  }
  return ds;
}

void add_reduce_dims(std::vector<Case>& cs, const std::string& fn, ReduceFn f,
                     std::vector<DType> dts, bool squeeze) {
  Case c;
  c.fn = fn;
  c.family = "reduction";
  c.dtypes = std::move(dts);
  const bool empty_ok = f == ReduceFn::Sum || f == ReduceFn::Mean || f == ReduceFn::Prod;
  const Domain d = f == ReduceFn::Prod ? Domain::Small : Domain::Any;
  const bool specials = f == ReduceFn::Max || f == ReduceFn::Min;
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [=](DType dt, Scale s) {
    auto ts = dims_trials(dt, s, empty_ok, d, seed);
    if (specials) {
      Rng rng(seed + 1);
      for (auto& t : ts) add_specials(t.inputs[0], rng);
    }
    if (f == ReduceFn::Prod) {  // short groups keep products finite and exact enough
      std::erase_if(ts, [](const Trial& t) { return t.inputs[0].numel() > 40; });
    }
    return ts;
  };
  c.run = [f, squeeze](Tensors&& x, const Params& p) {
    const auto ds = ints_of(p, 0, p.size());
    return Tensors{squeeze ? ops::reduce_dims_squeeze(f, std::move(x[0]), ds)
                           : ops::reduce_dims(f, std::move(x[0]), ds)};
  };
  c.ref = [f, squeeze](const std::vector<HostTensor>& in, const Params& p) {
    const auto ds = norm_dims(p, 0, in[0].rank());
    HostTensor y = reduce_dims_ref(f, in[0], ds);
    if (squeeze) {
      std::vector<std::size_t> kept;
      for (std::size_t i = 0; i < y.rank(); ++i) {
        if (std::find(ds.begin(), ds.end(), i) == ds.end()) kept.push_back(y.shape[i]);
      }
      y.shape = Shape(kept);
    }
    return one(y);
  };
  if (!specials) c.tol = accumulating;
  cs.push_back(std::move(c));
}

// ---- cummax / cummin with indices (torch.cummax: ties and NaNs take the later position) ----
std::vector<HostTensor> cum_extreme_ref(bool is_max, const HostTensor& x, std::size_t dim) {
  HostTensor v(x.shape, x.dtype), i(x.shape, DType::I64);
  std::size_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < dim; ++k) outer *= x.shape[k];
  for (std::size_t k = dim + 1; k < x.rank(); ++k) inner *= x.shape[k];
  const std::size_t n = x.shape[dim];
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t j = 0; j < inner; ++j) {
      double best = 0;
      std::size_t at = 0;
      for (std::size_t r = 0; r < n; ++r) {
        const std::size_t p = (o * n + r) * inner + j;
        const double e = x.v[p];
        if (r == 0 || std::isnan(e) || (!std::isnan(best) && (is_max ? e >= best : e <= best))) {
          best = e;
          at = r;
        }
        v.v[p] = best;
        i.v[p] = static_cast<double>(at);
      }
    }
  }
  return {v, i};
}

// ---- searchsorted: the count of entries e with !(e >= v) (right: !(e > v)) ----
HostTensor searchsorted_ref(const HostTensor& sorted, const HostTensor& values, bool right) {
  HostTensor y(values.shape, DType::I64);
  const std::size_t n = sorted.shape[sorted.rank() - 1];
  const std::size_t m = values.rank() ? values.shape[values.rank() - 1] : 1;
  for (std::size_t p = 0; p < values.numel(); ++p) {
    const std::size_t row = sorted.rank() == 1 ? 0 : p / m;
    const double v = values.v[p];
    double count = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double e = sorted.v[row * n + k];
      count += right ? !(e > v) : !(e >= v);
    }
    y.v[p] = count;
  }
  return y;
}

// Rows sorted ascending, with repeats (values on a coarse grid) so that ties occur.
HostTensor sorted_rows(Shape s, DType dt, Rng& rng) {
  HostTensor t = random_host(s, dt, rng, Domain::Small);
  const std::size_t n = s[s.rank() - 1];
  for (double& v : t.v) v = is_float_dtype(dt) ? std::round(v * 2) / 2 : v;
  for (std::size_t r = 0; n && r < t.numel() / n; ++r) {
    std::sort(t.v.begin() + static_cast<std::ptrdiff_t>(r * n),
              t.v.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
  }
  return t;
}

// ---- grid_sample, as torch.nn.functional.grid_sample (2 spatial dims) ----
struct GridOpts {
  bool nearest, border, align;
};
HostTensor grid_sample_ref(const HostTensor& in, const HostTensor& grid, GridOpts o) {
  const std::size_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
  const std::size_t ho = grid.shape[1], wo = grid.shape[2];
  HostTensor y(Shape{n, c, ho, wo}, in.dtype);
  const auto unnorm = [&](double g, std::size_t size) {
    const double s = static_cast<double>(size);
    double p = o.align ? (g + 1) / 2 * (s - 1) : ((g + 1) * s - 1) / 2;
    if (o.border) p = std::min(std::max(p, 0.0), s - 1);
    return p;
  };
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t i = 0; i < ho; ++i) {
      for (std::size_t j = 0; j < wo; ++j) {
        const std::size_t gp = ((b * ho + i) * wo + j) * 2;
        const double x = unnorm(grid.v[gp], w), yy = unnorm(grid.v[gp + 1], h);
        for (std::size_t ch = 0; ch < c; ++ch) {
          const auto at = [&](double xi, double yi) {
            if (xi < 0 || yi < 0 || xi > double(w) - 1 || yi > double(h) - 1) return 0.0;
            return in.v[((b * c + ch) * h + static_cast<std::size_t>(yi)) * w +
                        static_cast<std::size_t>(xi)];
          };
          double r;
          if (o.nearest) {
            r = at(std::nearbyint(x), std::nearbyint(yy));
          } else {
            const double x0 = std::floor(x), y0 = std::floor(yy);
            const double ax = x - x0, ay = yy - y0;
            r = at(x0, y0) * (1 - ax) * (1 - ay) + at(x0 + 1, y0) * ax * (1 - ay) +
                at(x0, y0 + 1) * (1 - ax) * ay + at(x0 + 1, y0 + 1) * ax * ay;
          }
          y.v[((b * c + ch) * ho + i) * wo + j] = r;
        }
      }
    }
  }
  return y;
}

// ---- interpolate, as torch.nn.functional.interpolate (1 to 3 spatial dims) ----
// The source taps of output index o along a dim of `in` entries resampled to `out`, from
// PyTorch's documented definitions in f64: nearest reads floor(o * s), nearest-exact
// floor((o + 1/2) * s) (s = in / out, or 1 / scale_factor when given); linear blends the
// two entries around max((o + 1/2) * s - 1/2, 0) (o * (in - 1) / (out - 1) with
// align_corners); bicubic takes Keys' cubic (A = -0.75) over the four entries around the
// unclamped source position, the indices clamped to the image.
using InterpMode = ember::module_ops::InterpolateMode;
struct Tap1 {
  std::vector<std::size_t> index;
  std::vector<double> weight;
};
std::vector<Tap1> interp_taps(std::size_t in, std::size_t out, double scale_factor, InterpMode mode,
                              bool align) {
  const double s = align              ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0)
                   : scale_factor > 0 ? 1.0 / scale_factor
                                      : double(in) / double(out);
  const auto clamp = [&](double i) {
    return static_cast<std::size_t>(std::min(std::max(i, 0.0), double(in) - 1));
  };
  std::vector<Tap1> taps(out);
  for (std::size_t o = 0; o < out; ++o) {
    const double od = static_cast<double>(o);
    Tap1& t = taps[o];
    if (mode == InterpMode::Nearest || mode == InterpMode::NearestExact) {
      const double src = mode == InterpMode::Nearest ? od * s : (od + 0.5) * s;
      t.index = {clamp(std::floor(src))};
      t.weight = {1.0};
    } else if (mode == InterpMode::Linear) {
      const double src = align ? od * s : std::max((od + 0.5) * s - 0.5, 0.0);
      const double i0 = std::min(std::floor(src), double(in) - 1), l = src - i0;
      t.index = {clamp(i0), clamp(i0 + 1)};
      t.weight = {1 - l, l};
    } else {
      const double src = align ? od * s : (od + 0.5) * s - 0.5;
      const double i0 = std::floor(src), x = src - i0, a = -0.75;
      const auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
      const auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
      t.index = {clamp(i0 - 1), clamp(i0), clamp(i0 + 1), clamp(i0 + 2)};
      t.weight = {far(x + 1), near(x), near(1 - x), far(2 - x)};
    }
  }
  return taps;
}
// in [N, C, *spatial] resampled to out_sizes: the sum over every combination of one tap
// per spatial dim of the product of their weights times the entry they read.
HostTensor interpolate_ref(const HostTensor& in, const std::vector<std::size_t>& out_sizes,
                           const std::vector<double>& scales, InterpMode mode, bool align) {
  const std::size_t sd = out_sizes.size(), planes = in.shape[0] * in.shape[1];
  std::vector<std::size_t> dims{in.shape[0], in.shape[1]};
  dims.insert(dims.end(), out_sizes.begin(), out_sizes.end());
  HostTensor y{Shape(dims), in.dtype};
  std::vector<std::vector<Tap1>> taps;
  std::size_t in_plane = 1, out_plane = 1;
  for (std::size_t d = 0; d < sd; ++d) {
    taps.push_back(
        interp_taps(in.shape[2 + d], out_sizes[d], scales.empty() ? 0.0 : scales[d], mode, align));
    in_plane *= in.shape[2 + d];
    out_plane *= out_sizes[d];
  }
  std::vector<std::size_t> o(sd), k(sd);
  for (std::size_t p = 0; p < planes; ++p) {
    for (std::size_t flat = 0; flat < out_plane; ++flat) {
      for (std::size_t d = sd, r = flat; d-- > 0;) {
        o[d] = r % out_sizes[d];
        r /= out_sizes[d];
      }
      double acc = 0;
      std::fill(k.begin(), k.end(), 0);
      for (bool more = true; more;) {
        double w = 1;
        std::size_t at = 0;
        for (std::size_t d = 0; d < sd; ++d) {
          const Tap1& t = taps[d][o[d]];
          w *= t.weight[k[d]];
          at = at * in.shape[2 + d] + t.index[k[d]];
        }
        acc += w * in.v[p * in_plane + at];
        more = false;
        for (std::size_t d = sd; d-- > 0;) {  // the next combination of taps
          if (++k[d] < taps[d][o[d]].index.size()) {
            more = true;
            break;
          }
          k[d] = 0;
        }
      }
      y.v[p * out_plane + flat] = acc;
    }
  }
  return y;
}

// The singular values of each matrix of a [..., m, n], descending, in [..., k]: the square
// roots of the eigenvalues of the smaller Gram matrix (a^T a or a a^T), found by cyclic
// Jacobi rotations of that symmetric matrix — a method independent of the kernel's
// one-sided Jacobi on a itself.
HostTensor singular_values_ref(const HostTensor& a) {
  const std::size_t r = a.rank(), m = a.shape[r - 2], n = a.shape[r - 1], k = std::min(m, n);
  std::vector<std::size_t> dims(a.shape.dims().begin(), a.shape.dims().end() - 2);
  dims.push_back(k);
  HostTensor out(Shape(dims), a.dtype);
  const std::size_t batch = m * n == 0 ? 0 : a.numel() / (m * n);
  for (std::size_t b = 0; b < batch; ++b) {
    const double* x = a.v.data() + b * m * n;
    std::vector<double> g(k * k, 0.0);  // the k x k Gram matrix
    for (std::size_t i = 0; i < k; ++i) {
      for (std::size_t j = 0; j < k; ++j) {
        double acc = 0;
        if (m >= n) {
          for (std::size_t t = 0; t < m; ++t) acc += x[t * n + i] * x[t * n + j];
        } else {
          for (std::size_t t = 0; t < n; ++t) acc += x[i * n + t] * x[j * n + t];
        }
        g[i * k + j] = acc;
      }
    }
    for (int sweep = 0; sweep < 100; ++sweep) {
      double off = 0;
      for (std::size_t p = 0; p < k; ++p) {
        for (std::size_t q = p + 1; q < k; ++q) off += g[p * k + q] * g[p * k + q];
      }
      if (off == 0) break;
      for (std::size_t p = 0; p < k; ++p) {
        for (std::size_t q = p + 1; q < k; ++q) {
          const double apq = g[p * k + q];
          if (apq == 0) continue;
          const double theta = (g[q * k + q] - g[p * k + p]) / (2 * apq);
          const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::hypot(1.0, theta));
          const double c = 1 / std::hypot(1.0, t), sn = t * c;
          for (std::size_t i = 0; i < k; ++i) {  // G <- G J (columns p, q)
            const double gp = g[i * k + p], gq = g[i * k + q];
            g[i * k + p] = c * gp - sn * gq;
            g[i * k + q] = sn * gp + c * gq;
          }
          for (std::size_t i = 0; i < k; ++i) {  // G <- J^T G (rows p, q)
            const double gp = g[p * k + i], gq = g[q * k + i];
            g[p * k + i] = c * gp - sn * gq;
            g[q * k + i] = sn * gp + c * gq;
          }
        }
      }
    }
    // The Gram matrix's eigenvalues carry an absolute error of about eps * sigma_max^2: one
    // below a few times that is zero to this reference's precision (a rank-deficient trial).
    double top = 0;
    for (std::size_t i = 0; i < k; ++i) top = std::max(top, g[i * k + i]);
    std::vector<double> sv(k);
    for (std::size_t i = 0; i < k; ++i) {
      const double e = g[i * k + i];
      sv[i] = e <= 64 * std::numeric_limits<double>::epsilon() * top ? 0.0 : std::sqrt(e);
    }
    std::sort(sv.begin(), sv.end(), std::greater<>());
    for (std::size_t i = 0; i < k; ++i) out.v[b * k + i] = sv[i];
  }
  return out;
}

}  // namespace

void add_composite_cases(std::vector<Case>& cs) {
  const auto FI = concat(kAllFloats, kInts);
  using D = Domain;
  add_reduce_dims(cs, "sum_dims", ReduceFn::Sum, FI, false);
  add_reduce_dims(cs, "mean_dims", ReduceFn::Mean, kAllFloats, false);
  add_reduce_dims(cs, "prod_dims", ReduceFn::Prod, FI, false);
  add_reduce_dims(cs, "max_dims", ReduceFn::Max, FI, false);
  add_reduce_dims(cs, "min_dims", ReduceFn::Min, FI, false);
  add_reduce_dims(cs, "sum_dims_squeeze", ReduceFn::Sum, FI, true);
  add_reduce_dims(cs, "max_dims_squeeze", ReduceFn::Max, FI, true);
  add_reduce_dims(cs, "mean_dims_squeeze", ReduceFn::Mean, kAllFloats, true);
  add_reduce_dims(cs, "prod_dims_squeeze", ReduceFn::Prod, FI, true);
  add_reduce_dims(cs, "min_dims_squeeze", ReduceFn::Min, FI, true);

  // max_abs (full) and max_abs_dim.
  for (const bool full : {true, false}) {
    Case c;
    c.fn = full ? "max_abs" : "max_abs_dim";
    c.family = "reduction";
    c.dtypes = concat(kAllFloats, kSignedInts);
    c.trials = [](DType dt, Scale s) {
      auto ts = dims_trials(dt, s, false, D::Any, 71);
      std::erase_if(ts,
                    [](const Trial& t) { return t.params.size() != 1 && t.params.size() != 2; });
      for (auto& t : ts) t.params.resize(1);
      return ts;
    };
    c.run = [full](Tensors&& x, const Params& p) {
      return Tensors{full ? ops::max_abs(std::move(x[0]))
                          : ops::max_abs_dim(std::move(x[0]), static_cast<std::int64_t>(p[0]))};
    };
    c.ref = [full](const std::vector<HostTensor>& in, const Params& p) {
      HostTensor a = in[0];
      for (double& v : a.v) v = std::fabs(v);
      if (full) {
        a.shape = Shape{a.numel()};
        return one(reduce_dims_ref(ReduceFn::Max, a, {0}));
      }
      return one(reduce_dims_ref(ReduceFn::Max, a, norm_dims(p, 0, a.rank())));
    };
    cs.push_back(std::move(c));
  }

  // cummax_with_indices / cummin_with_indices: ties (values on a grid of halves) and NaNs.
  for (const bool is_max : {true, false}) {
    Case c;
    c.fn = is_max ? "cummax_with_indices" : "cummin_with_indices";
    c.family = "scan";
    c.dtypes = FI;
    c.trials = [](DType dt, Scale s) {
      auto ts = dims_trials(dt, s, true, D::Small, 73);
      Rng rng(74);
      for (auto& t : ts) {
        t.params.resize(1);
        for (double& v : t.inputs[0].v) v = std::round(v * 2) / 2;
        add_specials(t.inputs[0], rng);
      }
      return ts;
    };
    c.run = [is_max](Tensors&& x, const Params& p) {
      const auto d = static_cast<std::int64_t>(p[0]);
      auto [v, i] = is_max ? ops::cummax_with_indices(std::move(x[0]), d)
                           : ops::cummin_with_indices(std::move(x[0]), d);
      return Tensors{std::move(v), std::move(i)};
    };
    c.ref = [is_max](const std::vector<HostTensor>& in, const Params& p) {
      return cum_extreme_ref(is_max, in[0],
                             normalize(static_cast<std::int64_t>(p[0]), in[0].rank()));
    };
    cs.push_back(std::move(c));
  }

  // searchsorted (left and right) and bucketize.
  for (const std::string fn : {"searchsorted", "bucketize"}) {
    Case c;
    c.fn = fn;
    c.family = "sort";
    c.dtypes = FI;
    const bool bucket = fn == "bucketize";
    c.trials = [bucket](DType dt, Scale s) {
      Rng rng(81);
      const std::size_t big = s == Scale::Perf ? 512 : 1;
      struct SV {
        Shape sorted, values;
      };
      std::vector<SV> shapes = {{Shape{9}, Shape{13}}, {Shape{9}, Shape{2, 3}},
                                {Shape{1}, Shape{4}},  {Shape{0}, Shape{3}},
                                {Shape{6}, Shape{0}},  {Shape{33 * big}, Shape{70, big}}};
      if (!bucket) {
        shapes.push_back({Shape{3, 8}, Shape{3, 5}});
        shapes.push_back({Shape{2, 2, 7}, Shape{2, 2, 4}});
      }
      std::vector<Trial> ts;
      for (std::size_t k = 0; k < shapes.size(); ++k) {
        HostTensor sorted = sorted_rows(shapes[k].sorted, dt, rng);
        HostTensor values = random_host(shapes[k].values, dt, rng, D::Any);
        for (double& v : values.v) v = is_float_dtype(dt) ? std::round(v * 2) / 2 : v;
        if (is_float_dtype(dt) && values.numel() > 2) values.v[1] = kNaN;
        const Layout l = k % 2 ? Layout::Flipped : Layout::Contiguous;
        ts.push_back({shapes[k].sorted.to_string() + " " + shapes[k].values.to_string() +
                          (k % 2 ? " right" : " left"),
                      {sorted, values},
                      {Layout::Contiguous, l},
                      {k % 2 ? 1.0 : 0.0}});
      }
      return ts;
    };
    c.run = [bucket](Tensors&& x, const Params& p) {
      return Tensors{bucket ? ops::bucketize(std::move(x[1]), std::move(x[0]), p[0] != 0)
                            : ops::searchsorted(std::move(x[0]), std::move(x[1]), p[0] != 0)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      return one(searchsorted_ref(in[0], in[1], p[0] != 0));
    };
    cs.push_back(std::move(c));
  }

  // histc: values near bin centres (bins of width 0.5 over [-2, 2], exact in every float
  // dtype), the edges themselves, values outside and NaN; and the data's own range.
  {
    Case c;
    c.fn = "histc";
    c.family = "reduction";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(91);
      std::uniform_int_distribution<int> bin(0, 7), jit(-1, 1);
      std::vector<Trial> ts;
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{37}, std::size_t{200}}) {
        if (s == Scale::Perf) n *= 1000;
        HostTensor x(Shape{n}, dt);
        for (double& v : x.v) v = -2 + 0.5 * bin(rng) + 0.25 + 0.125 * jit(rng);
        if (n >= 37) {
          x.v[0] = -2, x.v[1] = 2, x.v[2] = 2.5, x.v[3] = -3, x.v[4] = kNaN, x.v[5] = kInf;
        }
        ts.push_back({"n " + std::to_string(n) + " range [-2, 2]", {x}, {}, {8, -2, 2}});
        if (n > 0) {
          // The data's range: [-2, 2] where the edges are in it, 3 bins (edges at +-2/3,
          // never a value's).
          if (n >= 37) x.v[2] = 1, x.v[3] = -1;
          ts.push_back(
              {"n " + std::to_string(n) + " data range", {x}, {Layout::Flipped}, {3, 0, 0}});
        }
      }
      HostTensor same(Shape{5}, dt, std::vector<double>(5, 0.5));
      ts.push_back({"one value", {same}, {}, {4, 0, 0}});
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::histc(std::move(x[0]), static_cast<std::size_t>(p[0]), p[1], p[2])};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const auto bins = static_cast<std::size_t>(p[0]);
      double lo = p[1], hi = p[2];
      if (lo == hi) {
        bool any = false;
        for (double v : in[0].v) {
          if (!std::isfinite(v)) continue;
          lo = any ? std::min(lo, v) : v;
          hi = any ? std::max(hi, v) : v;
          any = true;
        }
      }
      if (lo == hi) lo -= 1, hi += 1;
      HostTensor y(Shape{bins}, in[0].dtype);
      for (double v : in[0].v) {
        if (!(v >= lo && v <= hi)) continue;
        auto b = static_cast<std::size_t>(std::floor((v - lo) * double(bins) / (hi - lo)));
        y.v[std::min(b, bins - 1)] += 1;
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // movedim(x, {0, 1}, {2, 0}): out[i, j, k] = x[k, i, j].
  {
    Case c;
    c.fn = "movedim";
    c.family = "layout";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(101);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{2, 3, 4}, Shape{3, 0, 2}, Shape{5, 1, 7}}) {
        for (Layout l : {Layout::Contiguous, Layout::Permuted, Layout::Sliced}) {
          ts.push_back({s.to_string() + " " + name(l), {random_host(s, dt, rng)}, {l}});
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::movedim(std::move(x[0]), {0, 1}, {-1, 0})};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const Shape& s = in[0].shape;
      HostTensor y(Shape{s[1], s[2], s[0]}, in[0].dtype);
      for (std::size_t p = 0; p < y.numel(); ++p) {
        const auto i = unravel(p, y.shape);
        y.v[p] = in[0].v[ravel({i[2], i[0], i[1]}, s)];
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // roll: per dim (shifts of either sign, beyond the extent) and flattened.
  for (const bool flat : {false, true}) {
    Case c;
    c.fn = flat ? "roll_flat" : "roll";
    if (!flat) c.also = {"roll_dim"};  // roll over one dim
    c.family = "layout";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(111);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{2, 3, 4}, Shape{3, 0, 2}, Shape{5, 1, 7}, Shape{4, 6, 9}}) {
        for (Layout l : {Layout::Contiguous, Layout::Flipped, Layout::Expanded}) {
          ts.push_back({s.to_string() + " " + name(l), {random_host(s, dt, rng)}, {l}});
        }
      }
      return ts;
    };
    c.run = [flat](Tensors&& x, const Params&) {
      return Tensors{flat ? ops::roll(std::move(x[0]), {-7}, {})
                          : ops::roll(std::move(x[0]), {1, -5, 13}, {0, -1, 1})};
    };
    c.ref = [flat](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor& x = in[0];
      HostTensor y(x.shape, x.dtype);
      const auto mod = [](std::int64_t a, std::size_t n) {
        const auto m = static_cast<std::int64_t>(n);
        return static_cast<std::size_t>(((a % m) + m) % m);
      };
      for (std::size_t p = 0; p < x.numel(); ++p) {
        if (flat) {
          y.v[mod(static_cast<std::int64_t>(p) - 7, x.numel())] = x.v[p];
          continue;
        }
        auto i = unravel(p, x.shape);
        i[0] = mod(static_cast<std::int64_t>(i[0]) + 1, x.shape[0]);
        i[2] = mod(static_cast<std::int64_t>(i[2]) - 5, x.shape[2]);
        i[1] = mod(static_cast<std::int64_t>(i[1]) + 13, x.shape[1]);
        y.v[ravel(i, x.shape)] = x.v[p];
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // take: indices of any shape, negative ones from the end.
  {
    Case c;
    c.fn = "take";
    c.family = "indexing";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(121);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{2, 3, 4}, Shape{7}, Shape{1, 5, 1}}) {
        const auto n = static_cast<std::int64_t>(s.num_elements());
        std::uniform_int_distribution<std::int64_t> u(-n, n - 1);
        for (const Shape& is : {Shape{2, 3}, Shape{9}, Shape{0}, Shape{1, 1, 4}}) {
          HostTensor idx(is, DType::I64);
          for (double& v : idx.v) v = static_cast<double>(u(rng));
          ts.push_back({s.to_string() + " at " + is.to_string(),
                        {random_host(s, dt, rng), idx},
                        {Layout::Permuted, Layout::Contiguous}});
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::take(std::move(x[0]), std::move(x[1]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      HostTensor y(in[1].shape, in[0].dtype);
      const auto n = static_cast<double>(in[0].numel());
      for (std::size_t p = 0; p < y.numel(); ++p) {
        const double i = in[1].v[p] < 0 ? in[1].v[p] + n : in[1].v[p];
        y.v[p] = in[0].v[static_cast<std::size_t>(i)];
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // one_hot_fill: the case's dtype is the result's (carried in the trial's params, after the
  // axis); indices I64 or I32, negatives among them.
  {
    Case c;
    c.fn = "one_hot_fill";
    c.family = "indexing";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(131);
      std::uniform_int_distribution<std::int64_t> u(-5, 4);
      std::vector<Trial> ts;
      const std::pair<Shape, double> shapes[] = {
          {Shape{6}, -1}, {Shape{2, 3}, 0}, {Shape{2, 3}, 1}, {Shape{0, 2}, -2}, {Shape{3, 1}, 2}};
      for (const auto& [s, axis] : shapes) {
        for (DType it : {DType::I64, DType::I32}) {
          HostTensor idx(s, it);
          for (double& v : idx.v) v = static_cast<double>(u(rng));
          ts.push_back(
              {s.to_string() + " axis " + std::to_string(int(axis)) + " " + ember::name(it),
               {idx},
               {Layout::Sliced},
               {axis, static_cast<double>(static_cast<int>(dt))}});
        }
      }
      return ts;
    };
    const auto on_off = [](DType dt) {
      return dt == DType::Bool ? std::pair{1.0, 0.0} : std::pair{5.0, 2.0};
    };
    c.run = [on_off](Tensors&& x, const Params& p) {
      const auto dt = static_cast<DType>(static_cast<int>(p[1]));
      const auto [on, off] = on_off(dt);
      return Tensors{
          ops::one_hot_fill(std::move(x[0]), 5, on, off, static_cast<std::int64_t>(p[0]), dt)};
    };
    c.ref = [on_off](const std::vector<HostTensor>& in, const Params& p) {
      const auto dt = static_cast<DType>(static_cast<int>(p[1]));
      const auto [on, off] = on_off(dt);
      const std::size_t a = normalize(static_cast<std::int64_t>(p[0]), in[0].rank() + 1);
      std::vector<std::size_t> dims = in[0].shape.dims();
      dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(a), 5);
      HostTensor y(Shape(dims), dt);
      for (std::size_t q = 0; q < y.numel(); ++q) {
        auto i = unravel(q, y.shape);
        const std::size_t cls = i[a];
        i.erase(i.begin() + static_cast<std::ptrdiff_t>(a));
        double k = in[0].v[ravel(i, in[0].shape)];
        if (k < 0) k += 5;
        y.v[q] = static_cast<std::size_t>(k) == cls ? on : off;
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // lerp: weights on both sides of 0.5 (the two formulas), at 0, 1 and outside [0, 1],
  // broadcasting, over views.
  {
    Case c;
    c.fn = "lerp";
    c.family = "binary";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      Rng rng(151);
      struct AB {
        Shape a, b;
        double w;
      };
      const AB shapes[] = {{Shape{7}, Shape{7}, 0.3},          {Shape{4, 5}, Shape{4, 5}, 0.75},
                           {Shape{2, 1, 3}, Shape{5, 3}, 0.0}, {Shape{6}, Shape{3, 6}, 1.0},
                           {Shape{0, 3}, Shape{0, 3}, 0.5},    {Shape{3, 4}, Shape{3, 4}, -0.4},
                           {Shape{1031}, Shape{1031}, 1.7}};
      std::vector<Trial> ts;
      for (const auto& s : shapes) {
        ts.push_back({s.a.to_string() + " x " + s.b.to_string() + " w " + std::to_string(s.w),
                      {random_host(s.a, dt, rng, D::Any), random_host(s.b, dt, rng, D::Any)},
                      {Layout::Flipped, Layout::Permuted},
                      {s.w}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {  // through the Tensor method where it applies
      if (x[0].rank() != x[1].rank())
        return Tensors{ops::lerp(std::move(x[0]), std::move(x[1]), p[0])};
      DynTensor end = std::move(x[1]);
      return Tensors{with_typed(std::move(x[0]),
                                [&](auto a) { return a.lerp(decltype(a)(std::move(end)), p[0]); })};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const Shape out = broadcast(in[0].shape, in[1].shape);
      HostTensor y(out, in[0].dtype);
      for (std::size_t q = 0; q < y.numel(); ++q) {
        const auto i = unravel(q, out);
        const double a = in[0].v[broadcast_index(i, in[0].shape)];
        const double b = in[1].v[broadcast_index(i, in[1].shape)];
        y.v[q] = a + p[0] * (b - a);
      }
      return one(y);
    };
    c.tol_scale = 2;
    cs.push_back(std::move(c));
  }

  // cross: along the last dim, along dim 0, and broadcasting.
  {
    Case c;
    c.fn = "cross";
    c.family = "linalg";
    c.dtypes = concat(kAllFloats, kSignedInts);
    c.trials = [](DType dt, Scale) {
      Rng rng(141);
      struct AB {
        Shape a, b;
        double dim;
      };
      const AB shapes[] = {{Shape{4, 3}, Shape{4, 3}, -1},
                           {Shape{3, 5}, Shape{3, 5}, 0},
                           {Shape{2, 1, 3}, Shape{5, 3}, 2},
                           {Shape{0, 3}, Shape{0, 3}, 1},
                           {Shape{3}, Shape{6, 3}, -1}};
      std::vector<Trial> ts;
      for (const auto& s : shapes) {
        ts.push_back({s.a.to_string() + " x " + s.b.to_string(),
                      {random_host(s.a, dt, rng, D::Small), random_host(s.b, dt, rng, D::Small)},
                      {Layout::Flipped, Layout::Contiguous},
                      {s.dim}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::cross(std::move(x[0]), std::move(x[1]), static_cast<std::int64_t>(p[0]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const Shape out = broadcast(in[0].shape, in[1].shape);
      const std::size_t d = normalize(static_cast<std::int64_t>(p[0]), out.rank());
      HostTensor y(out, in[0].dtype);
      for (std::size_t q = 0; q < y.numel(); ++q) {
        auto i = unravel(q, out);
        const std::size_t k = i[d];
        const auto comp = [&](const HostTensor& t, std::size_t j) {
          auto ii = i;
          ii[d] = j;
          return t.v[broadcast_index(ii, t.shape)];
        };
        const std::size_t j1 = (k + 1) % 3, j2 = (k + 2) % 3;
        y.v[q] = wrap(in[0].dtype,
                      comp(in[0], j1) * comp(in[1], j2) - comp(in[0], j2) * comp(in[1], j1));
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // diag (rank 1 -> 2 and rank 2 -> 1), diag_embed and trace.
  {
    Case c;
    c.fn = "diag";
    c.family = "linalg";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(151);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{4}, Shape{0}, Shape{3, 5}, Shape{5, 3}, Shape{0, 2}}) {
        for (double k : {0.0, 2.0, -1.0, 6.0}) {
          ts.push_back({s.to_string() + " diagonal " + std::to_string(int(k)),
                        {random_host(s, dt, rng)},
                        {s.rank() == 2 ? Layout::Permuted : Layout::Sliced},
                        {k}});
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::diag(std::move(x[0]), static_cast<std::int64_t>(p[0]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const auto k = static_cast<std::int64_t>(p[0]);
      const HostTensor& x = in[0];
      if (x.rank() == 1) {
        const std::size_t n = x.numel(), m = n + static_cast<std::size_t>(std::abs(k));
        HostTensor y(Shape{m, m}, x.dtype);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t r = k >= 0 ? i : i + static_cast<std::size_t>(-k);
          const std::size_t col = k >= 0 ? i + static_cast<std::size_t>(k) : i;
          y.v[r * m + col] = x.v[i];
        }
        return one(y);
      }
      std::vector<double> v;
      for (std::size_t r = 0; r < x.shape[0]; ++r) {
        const std::int64_t col = static_cast<std::int64_t>(r) + k;
        if (col >= 0 && col < static_cast<std::int64_t>(x.shape[1])) {
          v.push_back(x.v[r * x.shape[1] + static_cast<std::size_t>(col)]);
        }
      }
      return one(HostTensor(Shape{v.size()}, x.dtype, v));
    };
    cs.push_back(std::move(c));
  }
  {
    Case c;
    c.fn = "diag_embed";
    c.family = "linalg";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale) {
      Rng rng(161);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{4}, Shape{2, 3}, Shape{2, 0}, Shape{3, 1, 2}}) {
        for (double k : {0.0, 1.0, -2.0}) {
          ts.push_back({s.to_string() + " offset " + std::to_string(int(k)),
                        {random_host(s, dt, rng)},
                        {Layout::Flipped},
                        {k}});
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::diag_embed(std::move(x[0]), static_cast<std::int64_t>(p[0]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const auto k = static_cast<std::int64_t>(p[0]);
      const HostTensor& x = in[0];
      const std::size_t n = x.shape[x.rank() - 1], m = n + static_cast<std::size_t>(std::abs(k));
      std::vector<std::size_t> dims = x.shape.dims();
      dims.back() = m;
      dims.push_back(m);
      HostTensor y(Shape(dims), x.dtype);
      for (std::size_t q = 0; q < x.numel(); ++q) {
        const std::size_t b = q / n, i = q % n;
        const std::size_t r = k >= 0 ? i : i + static_cast<std::size_t>(-k);
        const std::size_t col = k >= 0 ? i + static_cast<std::size_t>(k) : i;
        y.v[(b * m + r) * m + col] = x.v[q];
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }
  {
    Case c;
    c.fn = "trace";
    c.family = "linalg";
    c.dtypes = FI;
    c.trials = [](DType dt, Scale) {
      Rng rng(171);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{3, 4}, Shape{5, 2}, Shape{0, 3}, Shape{1, 1}}) {
        ts.push_back({s.to_string(), {random_host(s, dt, rng)}, {Layout::Permuted}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) { return Tensors{ops::trace(std::move(x[0]))}; };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      HostTensor y(Shape{1}, in[0].dtype);
      for (std::size_t i = 0; i < std::min(in[0].shape[0], in[0].shape[1]); ++i) {
        y.v[0] = wrap(in[0].dtype, y.v[0] + in[0].v[i * in[0].shape[1] + i]);
      }
      return one(y);
    };
    c.tol = accumulating;
    cs.push_back(std::move(c));
  }

  // vector_norm: every ord kind, over everything and over dims; zeros among the values.
  {
    Case c;
    c.fn = "vector_norm";
    c.also = {"vector_norm_dims"};  // the method of the overload over dims
    c.family = "linalg";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      auto base = dims_trials(dt, s, true, D::Any, 181);
      std::vector<Trial> ts;
      std::size_t k = 0;
      for (double ord : {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5}) {
        for (const auto& b : base) {
          if (std::isinf(ord) && b.inputs[0].numel() == 0) continue;
          Trial t = b;
          if (t.inputs[0].numel() > 2) t.inputs[0].v[k % t.inputs[0].numel()] = 0;
          t.label += " ord " + std::to_string(ord);
          t.params.insert(t.params.begin(), ord);
          if (++k % 3 == 0) t.params.resize(1);  // every element
          ts.push_back(std::move(t));
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      if (p.size() == 1) return Tensors{ops::vector_norm(std::move(x[0]), p[0])};
      return Tensors{ops::vector_norm(std::move(x[0]), p[0], ints_of(p, 1, p.size() - 1))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      HostTensor x = in[0];
      std::vector<std::size_t> ds;
      if (p.size() == 1) {
        x.shape = Shape{x.numel()};
        ds = {0};
      } else {
        ds = norm_dims(p, 1, x.rank());
      }
      const double ord = p[0];
      HostTensor a = x;
      for (double& v : a.v) {
        v = std::isinf(ord) ? std::fabs(v)
            : ord == 0      ? (v != 0 ? 1.0 : 0.0)
                            : std::pow(std::fabs(v), ord);
      }
      HostTensor y = reduce_dims_ref(
          std::isinf(ord) ? (ord > 0 ? ReduceFn::Max : ReduceFn::Min) : ReduceFn::Sum, a, ds);
      if (!std::isinf(ord) && ord != 0) {
        for (double& v : y.v) v = std::pow(v, 1 / ord);
      }
      return one(y);
    };
    c.tol = accumulating;
    cs.push_back(std::move(c));
  }

  // matrix_norm: Frobenius, One, NegOne, Inf, NegInf over the last two dims.
  {
    Case c;
    c.fn = "matrix_norm";
    c.family = "linalg";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      Rng rng(191);
      std::vector<Trial> ts;
      for (const Shape& s : {Shape{3, 4}, Shape{2, 3, 5}, Shape{1, 1}, Shape{2, 4, 1}}) {
        for (double ord = 0; ord < 8; ++ord) {
          ts.push_back({s.to_string() + " ord " + std::to_string(int(ord)),
                        {random_host(s, dt, rng)},
                        {Layout::Permuted},
                        {ord}});
        }
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::matrix_norm(std::move(x[0]), static_cast<ops::MatrixNorm>(int(p[0])))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const auto ord = static_cast<ops::MatrixNorm>(int(p[0]));
      HostTensor a = in[0];
      const std::size_t r = a.rank();
      if (ord == ops::MatrixNorm::Frobenius) {
        for (double& v : a.v) v = v * v;
        HostTensor y = reduce_dims_ref(ReduceFn::Sum, a, {r - 2, r - 1});
        for (double& v : y.v) v = std::sqrt(v);
        return one(y);
      }
      if (ord == ops::MatrixNorm::Two || ord == ops::MatrixNorm::NegTwo ||
          ord == ops::MatrixNorm::Nuclear) {
        const HostTensor sv = singular_values_ref(a);
        const ReduceFn fn = ord == ops::MatrixNorm::Two      ? ReduceFn::Max
                            : ord == ops::MatrixNorm::NegTwo ? ReduceFn::Min
                                                             : ReduceFn::Sum;
        HostTensor y = reduce_dims_ref(fn, sv, {r - 2});
        std::vector<std::size_t> d = y.shape.dims();
        d.push_back(1);
        y.shape = Shape(d);
        return one(y);
      }
      for (double& v : a.v) v = std::fabs(v);
      const bool cols = ord == ops::MatrixNorm::One || ord == ops::MatrixNorm::NegOne;
      const bool mx = ord == ops::MatrixNorm::One || ord == ops::MatrixNorm::Inf;
      HostTensor sums = reduce_dims_ref(ReduceFn::Sum, a, {cols ? r - 2 : r - 1});
      return one(reduce_dims_ref(mx ? ReduceFn::Max : ReduceFn::Min, sums, {cols ? r - 1 : r - 2}));
    };
    c.tol = accumulating;
    cs.push_back(std::move(c));
  }

  // svdvals (ir::Svd's S) against the reference's singular values; svd's U diag(S) Vh
  // against x and U^T U, Vh Vh^T against the identity (the vectors are unique only up to
  // sign, so they are checked by what they must satisfy). Tall, wide, square, batched and
  // one-column matrices, and (svdvals) a rank-deficient one.
  const auto svd_trials = [](DType dt, Scale s, bool rank_one) {
    Rng rng(193);
    std::vector<Trial> ts;
    std::vector<Shape> shapes = {Shape{3, 4},    Shape{4, 3},    Shape{2, 3, 3}, Shape{1, 1},
                                 Shape{2, 5, 1}, Shape{2, 1, 4}, Shape{6, 5}};
    if (s == Scale::Perf) shapes = {Shape{64, 32, 32}};
    for (const Shape& sh : shapes) {
      ts.push_back({sh.to_string(), {random_host(sh, dt, rng)}, {Layout::Permuted}, {}});
    }
    if (!rank_one) return ts;
    // Rank 1: the outer product of two vectors (one non-zero singular value).
    HostTensor low(Shape{4, 3}, dt);
    for (std::size_t i = 0; i < 4; ++i) {
      for (std::size_t j = 0; j < 3; ++j) low.v[i * 3 + j] = quantize(dt, (i + 1.0) * (j - 1.5));
    }
    ts.push_back({"rank 1 [4, 3]", {low}, {}, {}});
    return ts;
  };
  {
    Case c;
    c.fn = "svdvals";
    c.family = "linalg";
    c.dtypes = kAllFloats;
    c.trials = [=](DType dt, Scale s) { return svd_trials(dt, s, true); };
    c.run = [](Tensors&& x, const Params&) { return Tensors{ops::svdvals(std::move(x[0]))}; };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      return one(singular_values_ref(in[0]));
    };
    c.tol = accumulating;
    cs.push_back(std::move(c));
  }
  {
    Case c;
    c.fn = "svd";
    c.family = "linalg";
    c.dtypes = kAllFloats;
    c.trials = [=](DType dt, Scale s) { return svd_trials(dt, s, false); };
    c.run = [](Tensors&& x, const Params&) {
      auto [u, sv, vh] = ops::svd(std::move(x[0]));
      auto us = ops::binary(ember::ir::BinaryFn::Mul, u, ops::unsqueeze(sv, -2));
      auto back = ops::matmul(std::move(us), vh);
      auto utu = ops::matmul(ops::swap_dims(u, -1, -2), u);
      auto vvt = ops::matmul(vh, ops::swap_dims(vh, -1, -2));
      return Tensors{std::move(back), std::move(utu), std::move(vvt)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor& a = in[0];
      const std::size_t r = a.rank(), k = std::min(a.shape[r - 2], a.shape[r - 1]);
      std::vector<std::size_t> d(a.shape.dims().begin(), a.shape.dims().end() - 2);
      d.push_back(k);
      d.push_back(k);
      HostTensor eye(Shape(d), a.dtype);
      for (std::size_t b = 0; b * k * k < eye.numel(); ++b) {
        for (std::size_t i = 0; i < k; ++i) eye.v[(b * k + i) * k + i] = 1.0;
      }
      return std::vector<HostTensor>{a, eye, eye};
    };
    c.tol = accumulating;
    c.no_grad =
        "U and Vh are detached (only S carries a gradient), so the reconstruction's "
        "gradient is not the identity's";
    cs.push_back(std::move(c));
  }

  // softmin and quiet_softmax along a dim, also with large logits.
  for (const bool quiet : {false, true}) {
    Case c;
    c.fn = quiet ? "quiet_softmax" : "softmin";
    c.family = "activation";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      auto ts = dims_trials(dt, s, false, D::Any, 201);
      for (auto& t : ts) t.params.resize(1);
      Rng rng(202);
      HostTensor big = random_host(Shape{3, 5}, dt, rng, D::Any);
      for (double& v : big.v) v = quantize(dt, v * 20 + (v > 0 ? 20 : -20));
      ts.push_back({"large logits", {big}, {}, {1}});
      HostTensor neg = random_host(Shape{2, 4}, dt, rng, D::Any);
      for (double& v : neg.v) v = quantize(dt, v - 30);
      ts.push_back({"negative logits", {neg}, {}, {-1}});
      return ts;
    };
    c.run = [quiet](Tensors&& x, const Params& p) {
      const auto d = static_cast<std::int64_t>(p[0]);
      return Tensors{quiet ? ops::quiet_softmax(std::move(x[0]), d)
                           : ops::softmin(std::move(x[0]), d)};
    };
    c.ref = [quiet](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const std::size_t d = normalize(static_cast<std::int64_t>(p[0]), x.rank());
      HostTensor y(x.shape, x.dtype);
      std::size_t outer = 1, inner = 1;
      for (std::size_t k = 0; k < d; ++k) outer *= x.shape[k];
      for (std::size_t k = d + 1; k < x.rank(); ++k) inner *= x.shape[k];
      const std::size_t n = x.shape[d];
      for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t j = 0; j < inner; ++j) {
          const auto at = [&](std::size_t r) { return (o * n + r) * inner + j; };
          double m = quiet ? 0.0 : -kInf;  // quiet: the extra logit 0
          for (std::size_t r = 0; r < n; ++r) m = std::max(m, quiet ? x.v[at(r)] : -x.v[at(r)]);
          double sum = quiet ? std::exp(-m) : 0.0;
          for (std::size_t r = 0; r < n; ++r)
            sum += std::exp((quiet ? x.v[at(r)] : -x.v[at(r)]) - m);
          for (std::size_t r = 0; r < n; ++r) {
            y.v[at(r)] = std::exp((quiet ? x.v[at(r)] : -x.v[at(r)]) - m) / sum;
          }
        }
      }
      return one(y);
    };
    c.tol = [](DType dt) {
      return dt == DType::BF16  ? Tolerance{3e-2, 1e-2}
             : dt == DType::F16 ? Tolerance{5e-3, 1e-3}
                                : Tolerance{1e-5 * (dt == DType::F32 ? 1 : 1e-5), 1e-7};
    };
    cs.push_back(std::move(c));
  }

  // grid_sample: each mode, padding and corner alignment; grids reach past the image.
  for (int variant = 0; variant < 8; ++variant) {
    const GridOpts o{(variant & 1) != 0, (variant & 2) != 0, (variant & 4) != 0};
    Case c;
    c.fn = std::string("grid_sample_") + (o.nearest ? "nearest" : "bilinear") +
           (o.border ? "_border" : "_zeros") + (o.align ? "_align" : "");
    c.also = {"grid_sample"};
    c.family = "sampling";
    c.dtypes = kAllFloats;
    c.trials = [o](DType dt, Scale s) {
      Rng rng(211);
      std::uniform_real_distribution<double> u(-1.25, 1.25), frac(-0.35, 0.35);
      struct IG {
        Shape in, grid;
      };
      std::vector<IG> shapes = {{Shape{2, 3, 4, 5}, Shape{2, 3, 4, 2}},
                                {Shape{1, 1, 1, 1}, Shape{1, 2, 2, 2}},
                                {Shape{1, 2, 6, 3}, Shape{1, 1, 7, 2}},
                                {Shape{2, 0, 3, 3}, Shape{2, 2, 2, 2}},
                                {Shape{1, 2, 3, 3}, Shape{1, 0, 4, 2}}};
      if (s == Scale::Perf) shapes = {{Shape{8, 16, 64, 64}, Shape{8, 64, 64, 2}}};
      std::vector<Trial> ts;
      for (const auto& sh : shapes) {
        HostTensor in = random_host(sh.in, dt, rng, D::Small);
        HostTensor g(sh.grid, dt);
        for (std::size_t q = 0; q < g.numel(); ++q) {
          double v = u(rng);
          if (o.nearest) {
            // Pixel positions kept away from the rounding ties k + 0.5.
            const std::size_t size = q % 2 == 0 ? sh.in[3] : sh.in[2];
            const double sz = static_cast<double>(size);
            const double p = std::round(((v + 1) * sz - 1) / 2) + frac(rng);
            v = o.align ? (sz > 1 ? p * 2 / (sz - 1) - 1 : 0.0) : (2 * p + 1) / sz - 1;
          }
          g.v[q] = quantize(dt, v);
        }
        ts.push_back({sh.in.to_string() + " grid " + sh.grid.to_string(),
                      {in, g},
                      {Layout::Permuted, Layout::Contiguous}});
      }
      return ts;
    };
    c.run = [o](Tensors&& x, const Params&) {
      return Tensors{ops::grid_sample(
          std::move(x[0]), std::move(x[1]),
          o.nearest ? ops::GridSampleMode::Nearest : ops::GridSampleMode::Bilinear,
          o.border ? ops::GridSamplePadding::Border : ops::GridSamplePadding::Zeros, o.align)};
    };
    c.ref = [o](const std::vector<HostTensor>& in, const Params&) {
      return one(grid_sample_ref(in[0], in[1], o));
    };
    // Positions computed in 16-bit floats carry the dtype's rounding into the weights.
    c.tol = [](DType dt) {
      return dt == DType::BF16  ? Tolerance{5e-2, 2.5e-1}
             : dt == DType::F16 ? Tolerance{1e-2, 4e-2}
             : dt == DType::F32 ? Tolerance{1e-5, 1e-5}
                                : Tolerance{1e-10, 1e-10};
    };
    cs.push_back(std::move(c));
  }
  // ---- interpolate: one case per mode; params = {spatial dims, by scale (0/1),
  // then per dim the output size (by size) or the scale factor} ----
  struct InterpVariant {
    const char* name;
    InterpMode mode;
    bool align;
  };
  for (const InterpVariant v : {InterpVariant{"nearest", InterpMode::Nearest, false},
                                InterpVariant{"nearest_exact", InterpMode::NearestExact, false},
                                InterpVariant{"linear", InterpMode::Linear, false},
                                InterpVariant{"linear_align", InterpMode::Linear, true},
                                InterpVariant{"bicubic", InterpMode::Bicubic, false},
                                InterpVariant{"bicubic_align", InterpMode::Bicubic, true}}) {
    Case c;
    c.fn = std::string("interpolate_") + v.name;
    c.also = {"interpolate"};
    c.family = "sampling";
    c.dtypes = kAllFloats;
    c.trials = [v](DType dt, Scale s) {
      Rng rng(213);
      struct T {
        Shape x;
        bool by_scale;
        std::vector<double> per_dim;  // output sizes or scale factors
      };
      // Ratios in / out that are exact in binary (2, 1/2, 3/2, 3/4, 5/4), so nearest's
      // source index (computed in f32, as PyTorch does) has no rounding to disagree on.
      std::vector<T> ts;
      if (v.mode == InterpMode::Bicubic) {
        ts = {{Shape{2, 3, 4, 5}, false, {8, 4}},
              {Shape{1, 2, 6, 8}, false, {4, 10}},
              {Shape{1, 1, 3, 4}, true, {2, 0.5}},
              {Shape{1, 2, 1, 5}, false, {3, 1}},
              {Shape{0, 2, 3, 3}, false, {6, 6}}};
        if (s == Scale::Perf) ts = {{Shape{8, 16, 64, 64}, true, {2, 2}}};
      } else {
        ts = {{Shape{2, 3, 6}, false, {4}},
              {Shape{1, 2, 5}, false, {4}},
              {Shape{2, 1, 3}, true, {2}},
              {Shape{1, 2, 4, 3}, false, {8, 4}},
              {Shape{2, 2, 6, 8}, true, {0.5, 2}},
              {Shape{1, 1, 4, 3, 5}, false, {3, 6, 4}},
              {Shape{1, 2, 2, 1, 3}, true, {2, 2, 1}},
              {Shape{1, 1, 1, 4}, false, {1, 3}},
              {Shape{0, 3, 4, 4}, false, {2, 2}}};
        if (s == Scale::Perf) ts = {{Shape{8, 16, 128, 128}, true, {2, 2}}};
      }
      std::vector<Trial> out;
      for (const T& t : ts) {
        Params p{double(t.x.rank() - 2), t.by_scale ? 1.0 : 0.0};
        p.insert(p.end(), t.per_dim.begin(), t.per_dim.end());
        std::string label = t.x.to_string() + (t.by_scale ? " scale" : " size");
        for (double d : t.per_dim) {
          char buf[32];
          std::snprintf(buf, sizeof buf, " %g", d);
          label += buf;
        }
        out.push_back({label, {random_host(t.x, dt, rng)}, {Layout::Permuted}, p});
      }
      return out;
    };
    const auto options = [v](const Params& p, const Shape& x) {
      ember::module_ops::InterpolateOptions o;
      o.mode = v.mode;
      o.align_corners = v.align;
      const auto sd = static_cast<std::size_t>(p[0]);
      for (std::size_t d = 0; d < sd; ++d) {
        if (p[1] != 0) {
          o.scale_factor.push_back(p[2 + d]);
        } else {
          o.size.push_back(static_cast<std::size_t>(p[2 + d]));
        }
      }
      std::vector<std::size_t> out_sizes(sd);
      for (std::size_t d = 0; d < sd; ++d) {
        out_sizes[d] = p[1] != 0 ? static_cast<std::size_t>(std::floor(double(x[2 + d]) * p[2 + d]))
                                 : static_cast<std::size_t>(p[2 + d]);
      }
      return std::pair{o, out_sizes};
    };
    c.run = [options](Tensors&& x, const Params& p) {
      const auto o = options(p, x[0].shape()).first;
      return Tensors{ember::module_ops::interpolate(std::move(x[0]), o)};
    };
    c.ref = [v, options](const std::vector<HostTensor>& in, const Params& p) {
      const auto [o, out_sizes] = options(p, in[0].shape);
      return one(interpolate_ref(in[0], out_sizes, o.scale_factor, v.mode, v.align));
    };
    // At most 4^2 taps with weights from the dtype's positions; 16-bit inputs carry their
    // rounding into the blend as every other blending case does.
    c.tol = [](DType dt) {
      return dt == DType::BF16  ? Tolerance{2e-2, 5e-2}
             : dt == DType::F16 ? Tolerance{4e-3, 1e-2}
             : dt == DType::F32 ? Tolerance{1e-5, 1e-5}
                                : Tolerance{1e-12, 1e-12};
    };
    cs.push_back(std::move(c));
  }
  // ---- adaptive pooling, as torch.nn.functional.adaptive_{avg,max}_pool{1,2,3}d; params =
  // {spatial dims, the output size per dim}. The reference reads each output's box directly:
  // input [floor(i in / out), ceil((i + 1) in / out)) along every dim, its mean or max. ----
  for (const bool is_max : {false, true}) {
    Case c;
    c.fn = is_max ? "adaptive_max_pool" : "adaptive_avg_pool";
    c.family = "conv";
    c.dtypes = is_max ? concat(kAllFloats, kInts) : kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(227);
      struct T {
        Shape x;
        std::vector<std::size_t> out;
      };
      // Windows that overlap (7 -> 3), grow past the input (5 -> 8), divide it exactly,
      // keep it (5 -> 5), in 1 to 3 dims, and an empty batch.
      std::vector<T> ts = {{Shape{2, 3, 7}, {3}},
                           {Shape{1, 2, 5}, {8}},
                           {Shape{2, 2, 6, 9}, {4, 3}},
                           {Shape{1, 1, 5, 4}, {5, 2}},
                           {Shape{1, 2, 3, 4, 5}, {2, 3, 2}},
                           {Shape{0, 2, 4, 4}, {2, 2}}};
      if (s == Scale::Perf) ts = {{Shape{8, 64, 56, 56}, {7, 7}}};
      std::vector<Trial> out;
      for (const T& t : ts) {
        Params p{double(t.out.size())};
        for (std::size_t o : t.out) p.push_back(double(o));
        out.push_back({t.x.to_string() + " -> " + Shape(t.out).to_string(),
                       {random_host(t.x, dt, rng)},
                       {Layout::Permuted},
                       p});
      }
      return out;
    };
    const auto sizes = [](const Params& p) {
      std::vector<std::size_t> out;
      for (std::size_t d = 0; d < static_cast<std::size_t>(p[0]); ++d)
        out.push_back(static_cast<std::size_t>(p[1 + d]));
      return out;
    };
    c.run = [is_max, sizes](Tensors&& x, const Params& p) {
      return Tensors{is_max ? ember::module_ops::adaptive_max_pool(std::move(x[0]), sizes(p))
                            : ember::module_ops::adaptive_avg_pool(std::move(x[0]), sizes(p))};
    };
    c.ref = [is_max, sizes](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const std::vector<std::size_t> out = sizes(p);
      const std::size_t sd = out.size();
      std::vector<std::size_t> dims{x.shape[0], x.shape[1]};
      dims.insert(dims.end(), out.begin(), out.end());
      HostTensor y{Shape(dims), x.dtype};
      for (std::size_t q = 0; q < y.numel(); ++q) {
        const auto i = unravel(q, y.shape);
        std::array<std::size_t, 3> lo{0, 0, 0}, hi{1, 1, 1};
        for (std::size_t d = 0; d < sd; ++d) {
          const std::size_t n_in = x.shape[2 + d], n_out = out[d];
          lo[d] = i[2 + d] * n_in / n_out;
          hi[d] = ((i[2 + d] + 1) * n_in + n_out - 1) / n_out;
        }
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        std::size_t count = 0;
        for (std::size_t a = lo[0]; a < hi[0]; ++a)
          for (std::size_t b = lo[1]; b < hi[1]; ++b)
            for (std::size_t e = lo[2]; e < hi[2]; ++e) {
              std::vector<std::size_t> at{i[0], i[1], a, b, e};
              at.resize(2 + sd);
              const double v = x.v[ravel(at, x.shape)];
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
        y.v[q] = is_max ? acc : acc / double(count);
      }
      return one(y);
    };
    // The average weighs each entry by 1 / window length, rounded to the dtype (as a matmul
    // with PyTorch's weights would be); the max is exact.
    c.tol = [](DType dt) {
      return dt == DType::BF16  ? Tolerance{2e-2, 2e-2}
             : dt == DType::F16 ? Tolerance{4e-3, 4e-3}
             : dt == DType::F32 ? Tolerance{1e-5, 1e-5}
                                : Tolerance{1e-12, 1e-12};
    };
    cs.push_back(std::move(c));
  }
  // ---- embedding, as torch.nn.functional.embedding: the rows of weight [n, d] that the ids
  // name, its gradient grad mode's (a scatter-add of g into the named rows). padding_idx,
  // whose row gets no gradient though the forward reads it (so finite differences cannot
  // check it), is checked against PyTorch by NnParity's embedding case. ----
  {
    Case c;
    c.fn = "embedding";
    c.family = "indexing";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(229);
      std::vector<std::pair<Shape, Shape>> ts = {{Shape{7, 4}, Shape{2, 5}},
                                                 {Shape{5, 3}, Shape{9}},
                                                 {Shape{6, 2}, Shape{2, 2, 3}},
                                                 {Shape{4, 3}, Shape{0}}};
      if (s == Scale::Perf) ts = {{Shape{30000, 256}, Shape{64, 128}}};
      std::vector<Trial> out;
      for (const auto& [w, id_shape] : ts) {
        HostTensor ids(id_shape, DType::I64);
        std::uniform_int_distribution<std::size_t> u(0, w[0] - 1);
        for (double& v : ids.v) v = static_cast<double>(u(rng));
        out.push_back({"weight " + w.to_string() + " ids " + id_shape.to_string(),
                       {random_host(w, dt, rng), ids},
                       {Layout::Sliced, Layout::Contiguous}});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ember::module_ops::embedding(std::move(x[0]), std::move(x[1]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor &w = in[0], &ids = in[1];
      const std::size_t d = w.shape[1];
      std::vector<std::size_t> dims(ids.shape.begin(), ids.shape.end());
      dims.push_back(d);
      HostTensor y{Shape(dims), w.dtype};
      for (std::size_t r = 0; r < ids.numel(); ++r)
        for (std::size_t j = 0; j < d; ++j)
          y.v[r * d + j] = w.v[static_cast<std::size_t>(ids.v[r]) * d + j];
      return one(y);
    };
    cs.push_back(std::move(c));
  }
  // ---- dropout, as torch.nn.functional.dropout; params = {p, training}. A random mask, so
  // checked by what it must satisfy: each element is 0 or x / (1 - p) (x itself when not
  // training), and the share of zeros of a non-zero x is p to within 6 standard errors. ----
  {
    Case c;
    c.fn = "dropout";
    c.family = "creation";
    c.dtypes = kAllFloats;
    c.no_grad =
        "a fresh mask per call: finite differences see another mask each time (the "
        "gradient, mask over (1 - p), is NnDropout's)";
    c.trials = [](DType dt, Scale) {
      Rng rng(233);
      std::vector<Trial> ts;
      for (const Params& p :
           std::vector<Params>{{0.25, 1}, {0.5, 1}, {0.9, 1}, {0, 1}, {1, 1}, {0.5, 0}}) {
        // Entries away from 0, so a kept one is never 0.
        HostTensor x = random_host(Shape{40, 250}, dt, rng);
        for (double& v : x.v) v = quantize(dt, v >= 0 ? v + 0.5 : v - 0.5);
        ts.push_back(
            {"p " + std::to_string(p[0]) + (p[1] != 0 ? "" : " eval"), {x}, {Layout::Flipped}, p});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ember::module_ops::dropout(std::move(x[0]), p[0], p[1] != 0)};
    };
    c.verify = [](const std::vector<HostTensor>& in, const std::vector<HostTensor>& out,
                  const Params& p) -> std::string {
      const HostTensor &x = in[0], &y = out[0];
      if (y.shape != x.shape) return "shape " + y.shape.to_string();
      const bool training = p[1] != 0;
      const double keep = 1 - p[0];
      // The dtype's relative rounding of x / (1 - p).
      const double rel = y.dtype == DType::BF16  ? 1.0 / 128
                         : y.dtype == DType::F16 ? 1.0 / 1024
                         : y.dtype == DType::F32 ? 1e-6
                                                 : 1e-14;
      std::size_t zeros = 0;
      for (std::size_t i = 0; i < y.numel(); ++i) {
        if (y.v[i] == 0) {
          ++zeros;
          continue;
        }
        const double want = training ? x.v[i] / keep : x.v[i];
        if (std::fabs(y.v[i] - want) > rel * std::fabs(want))
          return "element " + std::to_string(i) + ": " + std::to_string(y.v[i]) +
                 ", neither 0 nor " + std::to_string(want);
      }
      const double n = double(y.numel()), share = double(zeros) / n;
      const double want_share = training ? p[0] : 0.0;
      const double se = std::sqrt(want_share * (1 - want_share) / n);
      if (std::fabs(share - want_share) > 6 * se + 1e-12)
        return "zeroed " + std::to_string(share) + " of the elements, expected " +
               std::to_string(want_share);
      return "";
    };
    cs.push_back(std::move(c));
  }
}

}  // namespace conformance
