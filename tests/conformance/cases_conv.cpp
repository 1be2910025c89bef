// Sliding-window cases (ember::module_ops): unfold, fold, conv (1-, 2- and 3-d, groups,
// bias), conv_transpose2d, max_pool and avg_pool (1-d and 2-d). Each reference is written
// directly with nested loops over the definition of the op — output position times stride
// minus padding plus kernel offset times dilation — never through unfold, so the
// composites are checked against an independent statement of what they compute.
//
// A trial's params hold the geometry: [sp, kernel[sp], stride[sp], padding[sp],
// dilation[sp], extra...], with sp the number of spatial dims.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace mo = ember::module_ops;
using ember::Tensor;
using Sizes = std::vector<std::size_t>;

struct Geometry {
  std::size_t sp = 0;
  Sizes kernel, stride, padding, dilation;
  Params extra;  // what follows the geometry in the params
};

Params encode(const Geometry& g) {
  Params p{double(g.sp)};
  for (const Sizes* v : {&g.kernel, &g.stride, &g.padding, &g.dilation}) {
    for (std::size_t e : *v) p.push_back(double(e));
  }
  p.insert(p.end(), g.extra.begin(), g.extra.end());
  return p;
}

Geometry decode(const Params& p) {
  Geometry g;
  g.sp = std::size_t(p[0]);
  std::size_t at = 1;
  for (Sizes* v : {&g.kernel, &g.stride, &g.padding, &g.dilation}) {
    for (std::size_t i = 0; i < g.sp; ++i) v->push_back(std::size_t(p[at++]));
  }
  g.extra.assign(p.begin() + std::ptrdiff_t(at), p.end());
  return g;
}

mo::WindowOptions options(const Geometry& g) { return {g.stride, g.padding, g.dilation}; }

// The geometry padded in front to 3 spatial dims (extent 1, window 1), so one set of loops
// serves every rank.
struct Win {
  std::array<std::size_t, 3> in{}, k{}, s{}, p{}, d{}, out{};
  std::size_t image() const { return in[0] * in[1] * in[2]; }
  std::size_t ksize() const { return k[0] * k[1] * k[2]; }
  std::size_t positions() const { return out[0] * out[1] * out[2]; }
};

Win win(const Sizes& spatial, const Geometry& g) {
  Win w;
  const std::size_t off = 3 - g.sp;
  for (std::size_t i = 0; i < 3; ++i) {
    if (i < off) {
      w.in[i] = w.k[i] = w.s[i] = w.d[i] = w.out[i] = 1;
      continue;
    }
    const std::size_t j = i - off;
    w.in[i] = spatial[j];
    w.k[i] = g.kernel[j];
    w.s[i] = g.stride[j];
    w.p[i] = g.padding[j];
    w.d[i] = g.dilation[j];
    const double span = double(w.d[i] * (w.k[i] - 1) + 1);
    w.out[i] = std::size_t(std::floor((double(w.in[i] + 2 * w.p[i]) - span) / double(w.s[i]))) + 1;
  }
  return w;
}

Sizes spatial_of(const Shape& s) { return {s.begin() + 2, s.end()}; }

// Calls f(kernel index, position index, image index or -1) for every (kernel offset,
// window position) pair; the image index is -1 where the entry falls in the padding.
template <class F>
void for_each_entry(const Win& w, F&& f) {
  for (std::size_t kz = 0; kz < w.k[0]; ++kz)
    for (std::size_t ky = 0; ky < w.k[1]; ++ky)
      for (std::size_t kx = 0; kx < w.k[2]; ++kx)
        for (std::size_t oz = 0; oz < w.out[0]; ++oz)
          for (std::size_t oy = 0; oy < w.out[1]; ++oy)
            for (std::size_t ox = 0; ox < w.out[2]; ++ox) {
              const std::array<std::size_t, 3> k{kz, ky, kx}, o{oz, oy, ox};
              long long idx = 0;
              bool inside = true;
              for (int a = 0; a < 3; ++a) {
                const long long v = (long long)(o[a] * w.s[a] + k[a] * w.d[a]) - (long long)w.p[a];
                inside = inside && v >= 0 && v < (long long)w.in[a];
                idx = idx * (long long)w.in[a] + v;
              }
              f((kz * w.k[1] + ky) * w.k[2] + kx, (oz * w.out[1] + oy) * w.out[2] + ox,
                inside ? idx : -1);
            }
}

Shape image_shape(std::size_t n, std::size_t c, const Sizes& spatial) {
  Sizes d{n, c};
  d.insert(d.end(), spatial.begin(), spatial.end());
  return Shape(d);
}

Sizes out_spatial(const Win& w, std::size_t sp) {
  return Sizes(w.out.begin() + std::ptrdiff_t(3 - sp), w.out.end());
}

Tolerance sum_tolerance(DType dt) {  // sums of up to ~100 products of magnitude <= 8
  switch (dt) {
    case DType::F64:
      return {1e-10, 1e-10};
    case DType::F32:
      return {1e-4, 1e-3};
    case DType::F16:
      return {4e-3, 5e-2};
    default:
      return {2e-2, 3e-1};
  }
}

Geometry geo(Sizes k, Sizes s, Sizes p, Sizes d, Params extra = {}) {
  return {k.size(), std::move(k), std::move(s), std::move(p), std::move(d), std::move(extra)};
}

// ---- references ----
HostTensor unfold_ref(const HostTensor& x, const Geometry& g, double pad) {
  const Win w = win(spatial_of(x.shape), g);
  const std::size_t planes = x.shape[0] * x.shape[1], K = w.ksize(), L = w.positions();
  HostTensor y(Shape{x.shape[0], x.shape[1] * K, L}, x.dtype);
  for (std::size_t p = 0; p < planes; ++p) {
    for_each_entry(w, [&](std::size_t k, std::size_t l, long long i) {
      y.v[(p * K + k) * L + l] = i < 0 ? pad : x.v[p * w.image() + std::size_t(i)];
    });
  }
  return y;
}

HostTensor fold_ref(const HostTensor& x, const Sizes& output, const Geometry& g) {
  const Win w = win(output, g);
  const std::size_t K = w.ksize(), L = w.positions(), c = x.shape[1] / K;
  HostTensor y(image_shape(x.shape[0], c, output), x.dtype);
  for (std::size_t p = 0; p < x.shape[0] * c; ++p) {
    for_each_entry(w, [&](std::size_t k, std::size_t l, long long i) {
      if (i >= 0) y.v[p * w.image() + std::size_t(i)] += x.v[(p * K + k) * L + l];
    });
  }
  return y;
}

// in: x [N, C, *s], w [O, C/G, *k], optional bias [O]; extra = {groups}.
HostTensor conv_ref(const std::vector<HostTensor>& in, const Geometry& g) {
  const HostTensor &x = in[0], &wt = in[1];
  const std::size_t groups = std::size_t(g.extra[0]);
  const Win w = win(spatial_of(x.shape), g);
  const std::size_t n = x.shape[0], c = x.shape[1], o = wt.shape[0], cg = c / groups,
                    og = o / groups, K = w.ksize(), L = w.positions();
  HostTensor y(image_shape(n, o, out_spatial(w, g.sp)), x.dtype);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t oc = 0; oc < o; ++oc) {
      const std::size_t grp = oc / og;
      double* yp = &y.v[(b * o + oc) * L];
      for (std::size_t l = 0; l < L; ++l) yp[l] = in.size() > 2 ? in[2].v[oc] : 0.0;
      for (std::size_t ci = 0; ci < cg; ++ci) {
        const double* xp = &x.v[(b * c + grp * cg + ci) * w.image()];
        const double* wp = &wt.v[(oc * cg + ci) * K];
        for_each_entry(w, [&](std::size_t k, std::size_t l, long long i) {
          if (i >= 0) yp[l] += wp[k] * xp[i];
        });
      }
    }
  }
  return y;
}

// in: x [N, C, *s], w [C, O/G, *k], optional bias [O]; extra = {groups, output_padding...}.
HostTensor conv_transpose_ref(const std::vector<HostTensor>& in, const Geometry& g) {
  const HostTensor &x = in[0], &wt = in[1];
  const std::size_t groups = std::size_t(g.extra[0]);
  const Sizes xs = spatial_of(x.shape);
  Sizes out(g.sp);
  for (std::size_t i = 0; i < g.sp; ++i) {
    out[i] = (xs[i] - 1) * g.stride[i] + g.dilation[i] * (g.kernel[i] - 1) +
             std::size_t(g.extra[1 + i]) + 1 - 2 * g.padding[i];
  }
  // y's windows: the output image's window positions are exactly x's spatial positions.
  const Win w = win(out, g);
  const std::size_t n = x.shape[0], c = x.shape[1], cg = c / groups, og = wt.shape[1],
                    o = og * groups, K = w.ksize(), L = w.positions();
  HostTensor y(image_shape(n, o, out), x.dtype);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t oc = 0; oc < o; ++oc) {
      const std::size_t grp = oc / og;
      double* yp = &y.v[(b * o + oc) * w.image()];
      for (std::size_t j = 0; j < w.image(); ++j) yp[j] = in.size() > 2 ? in[2].v[oc] : 0.0;
      for (std::size_t ci = 0; ci < cg; ++ci) {
        const double* xp = &x.v[(b * c + grp * cg + ci) * L];
        const double* wp = &wt.v[((grp * cg + ci) * og + oc % og) * K];
        for_each_entry(w, [&](std::size_t k, std::size_t l, long long i) {
          if (i >= 0) yp[i] += wp[k] * xp[l];
        });
      }
    }
  }
  return y;
}

// extra = {count_include_pad} for avg; max ignores the padding.
HostTensor pool_ref(const HostTensor& x, const Geometry& g, bool max) {
  const Win w = win(spatial_of(x.shape), g);
  const std::size_t planes = x.shape[0] * x.shape[1], L = w.positions();
  HostTensor y(image_shape(x.shape[0], x.shape[1], out_spatial(w, g.sp)), x.dtype);
  const bool include_pad = !max && g.extra[0] != 0;
  for (std::size_t p = 0; p < planes; ++p) {
    std::vector<double> acc(L, max ? -std::numeric_limits<double>::infinity() : 0.0), cnt(L, 0);
    for_each_entry(w, [&](std::size_t, std::size_t l, long long i) {
      if (i < 0) return;
      const double v = x.v[p * w.image() + std::size_t(i)];
      acc[l] = max ? std::max(acc[l], v) : acc[l] + v;
      cnt[l] += 1;
    });
    for (std::size_t l = 0; l < L; ++l) {
      y.v[p * L + l] = max ? acc[l] : acc[l] / (include_pad ? double(w.ksize()) : cnt[l]);
    }
  }
  return y;
}

std::vector<HostTensor> one(HostTensor t) { return {std::move(t)}; }

std::string label(const Shape& x, const Geometry& g) {
  std::string s = x.to_string();
  const std::pair<const char*, const Sizes*> parts[] = {
      {" k", &g.kernel}, {" s", &g.stride}, {" p", &g.padding}, {" d", &g.dilation}};
  for (const auto& [tag, v] : parts) {
    s.append(tag);
    for (std::size_t e : *v) s.append(" ").append(std::to_string(e));
  }
  return s;
}

}  // namespace

void add_conv_cases(std::vector<Case>& cs) {
  using L = Layout;
  // ---- unfold: every dtype (pure data movement), pad values 0 and -inf ----
  {
    Case c;
    c.fn = "unfold";
    c.family = "conv";
    c.dtypes = concat(kAllFloats, kInts);
    c.trials = [](DType dt, Scale scale) {
      Rng rng(301);
      struct T {
        Shape x;
        Geometry g;
        Layout l;
      };
      std::vector<T> ts;
      if (scale == Scale::Perf) {
        ts = {{Shape{8, 64, 56, 56}, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}, {0}), L::Contiguous}};
      } else {
        ts = {{Shape{2, 3, 5, 6}, geo({2, 3}, {1, 1}, {0, 0}, {1, 1}, {0}), L::Contiguous},
              {Shape{1, 2, 7, 9}, geo({3, 3}, {2, 3}, {1, 2}, {2, 1}, {-1}), L::Permuted},
              {Shape{0, 3, 4, 4}, geo({2, 2}, {1, 1}, {0, 0}, {1, 1}, {0}), L::Contiguous},
              {Shape{2, 2, 3, 3}, geo({3, 3}, {1, 1}, {0, 0}, {1, 1}, {0}), L::Sliced},
              {Shape{3, 4, 13}, geo({4}, {3}, {2}, {2}, {0}), L::Flipped},
              {Shape{1, 2, 4, 5, 3}, geo({2, 3, 2}, {2, 1, 1}, {1, 1, 0}, {1, 2, 1}, {0}),
               L::Contiguous},
              {Shape{2, 3, 1, 1}, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}, {0}), L::Contiguous},
              {Shape{2, 40, 33, 35}, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}, {0}), L::Contiguous}};
      }
      std::vector<Trial> out;
      for (T& t : ts) {
        const bool neg_inf = t.g.extra[0] < 0;
        if (neg_inf) t.g.extra[0] = -std::numeric_limits<double>::infinity();
        if (neg_inf && !is_float_dtype(dt)) t.g.extra[0] = 0;  // ints: pad 0
        out.push_back({label(t.x, t.g) + (neg_inf ? " pad -inf" : ""),
                       {random_host(t.x, dt, rng)},
                       {t.l},
                       encode(t.g)});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      return Tensors{mo::unfold(std::move(x[0]), g.kernel, options(g), g.extra[0])};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const Geometry g = decode(p);
      return one(unfold_ref(in[0], g, g.extra[0]));
    };
    cs.push_back(std::move(c));
  }

  // ---- fold: floats; extra = output spatial size ----
  {
    Case c;
    c.fn = "fold";
    c.family = "conv";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale scale) {
      Rng rng(302);
      struct T {
        Sizes out;
        std::size_t n, ch;
        Geometry g;
        Layout l;
      };
      std::vector<T> ts;
      if (scale == Scale::Perf) {
        ts = {{{56, 56}, 8, 64, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}), L::Contiguous}};
      } else {
        ts = {{{5, 6}, 2, 3, geo({2, 3}, {1, 1}, {0, 0}, {1, 1}), L::Contiguous},
              {{7, 9}, 1, 2, geo({3, 3}, {2, 3}, {1, 2}, {2, 1}), L::Permuted},
              {{4, 4}, 0, 3, geo({2, 2}, {1, 1}, {0, 0}, {1, 1}), L::Contiguous},
              {{13}, 3, 4, geo({4}, {3}, {2}, {2}), L::Flipped},
              {{4, 5, 3}, 1, 2, geo({2, 3, 2}, {2, 1, 1}, {1, 1, 0}, {1, 2, 1}), L::Sliced},
              {{31, 29}, 2, 17, geo({5, 3}, {2, 1}, {2, 1}, {1, 2}), L::Contiguous}};
      }
      std::vector<Trial> out;
      for (T& t : ts) {
        const Win w = win(t.out, t.g);
        const Shape xs{t.n, t.ch * w.ksize(), w.positions()};
        t.g.extra.assign(t.out.begin(), t.out.end());
        out.push_back({label(xs, t.g), {random_host(xs, dt, rng)}, {t.l}, encode(t.g)});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      const Sizes out(g.extra.begin(), g.extra.end());
      if (g.sp == 2) {  // the typed 2-d form
        return Tensors{mo::fold(Tensor<3>(std::move(x[0])), {out[0], out[1]},
                                {g.kernel[0], g.kernel[1]},
                                {{g.stride[0], g.stride[1]},
                                 {g.padding[0], g.padding[1]},
                                 {g.dilation[0], g.dilation[1]}})
                           .dyn()};
      }
      return Tensors{mo::fold(std::move(x[0]), out, g.kernel, options(g))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const Geometry g = decode(p);
      return one(fold_ref(in[0], Sizes(g.extra.begin(), g.extra.end()), g));
    };
    c.tol = [](DType dt) {  // at most 12 overlapping terms summed
      return dt == DType::F64 ? Tolerance{1e-12, 1e-12} : sum_tolerance(dt);
    };
    cs.push_back(std::move(c));
  }

  // ---- conv (conv1d / conv2d / conv3d): extra = {groups, has_bias} ----
  {
    Case c;
    c.fn = "conv2d";
    c.also = {"conv1d", "conv3d", "conv"};  // by the trial's spatial dims; all call conv
    c.family = "conv";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale scale) {
      Rng rng(303);
      struct T {
        Shape x;
        std::size_t out_c, groups;
        bool bias;
        Geometry g;
        Layout l;
      };
      std::vector<T> ts;
      if (scale == Scale::Perf) {
        ts = {{Shape{8, 64, 56, 56}, 64, 1, false, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}),
               L::Contiguous}};
      } else {
        ts = {
            {Shape{2, 4, 7, 9}, 6, 1, true, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}), L::Contiguous},
            {Shape{3, 6, 11, 10}, 4, 2, false, geo({3, 2}, {2, 3}, {1, 0}, {2, 1}), L::Permuted},
            {Shape{0, 3, 5, 5}, 2, 1, true, geo({3, 3}, {1, 1}, {0, 0}, {1, 1}), L::Contiguous},
            // Depthwise 3x3 with output rows of a vector and more (the Cpu's plane kernel):
            // stride 2 with two output channels per input channel and unequal padding, and
            // stride 1.
            {Shape{1, 4, 6, 37}, 8, 4, true, geo({3, 3}, {2, 2}, {0, 1}, {1, 1}), L::Sliced},
            {Shape{1, 3, 5, 18}, 3, 3, true, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}), L::Contiguous},
            {Shape{2, 3, 4, 4}, 5, 1, true, geo({4, 4}, {1, 1}, {0, 0}, {1, 1}), L::Flipped},
            {Shape{2, 5, 6, 7}, 3, 1, false, geo({1, 1}, {2, 1}, {0, 0}, {1, 1}), L::Contiguous},
            {Shape{2, 3, 17}, 5, 1, true, geo({4}, {3}, {2}, {2}), L::Contiguous},
            {Shape{1, 4, 9}, 6, 2, false, geo({3}, {1}, {1}, {1}), L::Permuted},
            {Shape{1, 2, 4, 5, 6}, 3, 1, true, geo({2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}),
             L::Contiguous},
            {Shape{2, 16, 19, 23}, 12, 4, true, geo({3, 5}, {1, 2}, {2, 1}, {1, 1}), L::Contiguous},
            // A single-channel input, one group: with a sliver's worth of output channels
            // the Cpu's forward is a GEMM (a CNN's stem on grey images), with fewer the
            // direct path.
            {Shape{3, 1, 9, 12}, 6, 1, true, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}), L::Contiguous},
            {Shape{2, 1, 7, 20}, 2, 1, false, geo({3, 3}, {1, 1}, {1, 1}, {1, 1}), L::Sliced}};
      }
      std::vector<Trial> out;
      for (T& t : ts) {
        Sizes wd{t.out_c, t.x[1] / t.groups};
        wd.insert(wd.end(), t.g.kernel.begin(), t.g.kernel.end());
        std::vector<HostTensor> in{random_host(t.x, dt, rng, Domain::Small),
                                   random_host(Shape(wd), dt, rng, Domain::Small)};
        if (t.bias) in.push_back(random_host(Shape{t.out_c}, dt, rng, Domain::Small));
        t.g.extra = {double(t.groups), t.bias ? 1.0 : 0.0};
        out.push_back(
            {label(t.x, t.g) + " groups " + std::to_string(t.groups) + (t.bias ? " bias" : ""),
             std::move(in),
             {t.l},
             encode(t.g)});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      const auto groups = std::size_t(g.extra[0]);
      std::optional<Tensor<1>> bias;
      if (x.size() > 2) bias = Tensor<1>(std::move(x[2]));
      // Through the typed facade, as users call it.
      switch (g.sp) {
        case 1:
          return Tensors{mo::conv1d(Tensor<3>(std::move(x[0])), Tensor<3>(std::move(x[1])), bias,
                                    {.stride = g.stride[0],
                                     .padding = g.padding[0],
                                     .dilation = g.dilation[0],
                                     .groups = groups})
                             .dyn()};
        case 2:
          return Tensors{mo::conv2d(Tensor<4>(std::move(x[0])), Tensor<4>(std::move(x[1])), bias,
                                    {.stride = {g.stride[0], g.stride[1]},
                                     .padding = {g.padding[0], g.padding[1]},
                                     .dilation = {g.dilation[0], g.dilation[1]},
                                     .groups = groups})
                             .dyn()};
        default:
          return Tensors{mo::conv3d(Tensor<5>(std::move(x[0])), Tensor<5>(std::move(x[1])), bias,
                                    {.stride = {g.stride[0], g.stride[1], g.stride[2]},
                                     .padding = {g.padding[0], g.padding[1], g.padding[2]},
                                     .dilation = {g.dilation[0], g.dilation[1], g.dilation[2]},
                                     .groups = groups})
                             .dyn()};
      }
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      return one(conv_ref(in, decode(p)));
    };
    c.tol = sum_tolerance;
    cs.push_back(std::move(c));
  }

  // ---- conv_transpose2d: extra = {groups, output_padding[2]} ----
  {
    Case c;
    c.fn = "conv_transpose2d";
    c.also = {"conv_transpose"};  // the typed form forwards to it
    c.family = "conv";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale scale) {
      Rng rng(304);
      struct T {
        Shape x;
        std::size_t out_c, groups;
        Sizes opad;
        bool bias;
        Geometry g;
        Layout l;
      };
      std::vector<T> ts;
      if (scale == Scale::Perf) {
        ts = {{Shape{8, 64, 28, 28},
               32,
               1,
               {1, 1},
               false,
               geo({3, 3}, {2, 2}, {1, 1}, {1, 1}),
               L::Contiguous}};
      } else {
        ts = {{Shape{2, 3, 4, 5},
               4,
               1,
               {0, 0},
               true,
               geo({3, 3}, {1, 1}, {0, 0}, {1, 1}),
               L::Contiguous},
              {Shape{1, 4, 5, 3},
               6,
               2,
               {1, 0},
               false,
               geo({3, 2}, {2, 3}, {1, 0}, {1, 2}),
               L::Permuted},
              {Shape{0, 2, 3, 3},
               2,
               1,
               {0, 0},
               true,
               geo({2, 2}, {2, 2}, {0, 0}, {1, 1}),
               L::Contiguous},
              {Shape{2, 6, 7, 6},
               3,
               3,
               {1, 2},
               true,
               geo({4, 3}, {2, 3}, {1, 2}, {2, 1}),
               L::Sliced}};
      }
      std::vector<Trial> out;
      for (T& t : ts) {
        Sizes wd{t.x[1], t.out_c / t.groups};
        wd.insert(wd.end(), t.g.kernel.begin(), t.g.kernel.end());
        std::vector<HostTensor> in{random_host(t.x, dt, rng, Domain::Small),
                                   random_host(Shape(wd), dt, rng, Domain::Small)};
        if (t.bias) in.push_back(random_host(Shape{t.out_c}, dt, rng, Domain::Small));
        t.g.extra = {double(t.groups), double(t.opad[0]), double(t.opad[1])};
        out.push_back({label(t.x, t.g) + " groups " + std::to_string(t.groups),
                       std::move(in),
                       {t.l},
                       encode(t.g)});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      std::optional<Tensor<1>> bias;
      if (x.size() > 2) bias = Tensor<1>(std::move(x[2]));
      return Tensors{mo::conv_transpose2d(
                         Tensor<4>(std::move(x[0])), Tensor<4>(std::move(x[1])), bias,
                         {.stride = {g.stride[0], g.stride[1]},
                          .padding = {g.padding[0], g.padding[1]},
                          .output_padding = {std::size_t(g.extra[1]), std::size_t(g.extra[2])},
                          .dilation = {g.dilation[0], g.dilation[1]},
                          .groups = std::size_t(g.extra[0])})
                         .dyn()};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      return one(conv_transpose_ref(in, decode(p)));
    };
    c.tol = sum_tolerance;
    cs.push_back(std::move(c));
  }

  // ---- the gradient of max_pool2d through the Autodiff decorator (ir::MaxPoolGrad on a
  // backend that has it); in: x and the output gradient g ----
  {
    Case c;
    c.fn = "max_pool2d_grad";
    c.family = "conv";
    c.dtypes = {DType::F32, DType::F64};
    c.trials = [](DType dt, Scale) {
      Rng rng(307);
      const std::vector<std::pair<Shape, Geometry>> ts = {
          {Shape{2, 3, 6, 8}, geo({2, 2}, {2, 2}, {0, 0}, {1, 1})},
          {Shape{1, 2, 9, 8}, geo({3, 3}, {2, 2}, {1, 1}, {1, 1})},
          {Shape{2, 2, 9, 10}, geo({3, 2}, {1, 2}, {1, 1}, {2, 1})},
          // tiling windows over an image with a row and a column left over, integer values
          // so that windows hold ties
          {Shape{2, 3, 7, 9}, geo({2, 2}, {2, 2}, {0, 0}, {1, 1})}};
      std::vector<Trial> out;
      for (const auto& [xs, g] : ts) {
        const Win w = win(spatial_of(xs), g);
        const Shape gs = image_shape(xs[0], xs[1], out_spatial(w, g.sp));
        HostTensor x = random_host(xs, dt, rng);
        if (xs[2] == 7) {
          for (double& v : x.v) v = std::round(v);
        }
        out.push_back({label(xs, g) + (xs[2] == 7 ? " ties" : ""),
                       {std::move(x), random_host(gs, dt, rng)},
                       {L::Contiguous, L::Contiguous},
                       encode(g)});
      }
      return out;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      const ember::Device ad = x[0].device().autodiff();
      auto xa = ember::ops::require_grad(ember::ops::from_inner(x[0], ad));
      auto y = mo::max_pool(xa, g.kernel, options(g));
      auto loss = ember::ops::reduce_all(
          ember::ir::ReduceFn::Sum,
          ember::ops::binary(ember::ir::BinaryFn::Mul, y, ember::ops::from_inner(x[1], ad)));
      auto grads = ember::ops::backward(loss);
      return Tensors{ember::ops::grad(xa, grads).value()};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      // Each window position's g shared by the window's entries equal to its maximum.
      const Geometry g = decode(p);
      const HostTensor& x = in[0];
      const Win w = win(spatial_of(x.shape), g);
      const HostTensor y = pool_ref(x, g, true);
      const std::size_t planes = x.shape[0] * x.shape[1], L = w.positions();
      HostTensor dx(x.shape, x.dtype);
      for (std::size_t p = 0; p < planes; ++p) {
        std::vector<double> ties(L, 0);
        for_each_entry(w, [&](std::size_t, std::size_t l, long long i) {
          if (i >= 0 && x.v[p * w.image() + std::size_t(i)] == y.v[p * L + l]) ties[l] += 1;
        });
        for_each_entry(w, [&](std::size_t, std::size_t l, long long i) {
          if (i >= 0 && x.v[p * w.image() + std::size_t(i)] == y.v[p * L + l])
            dx.v[p * w.image() + std::size_t(i)] += in[1].v[p * L + l] / ties[l];
        });
      }
      return one(std::move(dx));
    };
    cs.push_back(std::move(c));
  }

  // ---- max_pool / avg_pool (1-d and 2-d); extra = {count_include_pad} ----
  for (const bool max : {true, false}) {
    Case c;
    c.fn = max ? "max_pool2d" : "avg_pool2d";
    // 1-d trials run the 1-d forms; every typed form forwards to max_pool / avg_pool.
    c.also = max ? std::vector<std::string>{"max_pool1d", "max_pool"}
                 : std::vector<std::string>{"avg_pool1d", "avg_pool"};
    c.family = "conv";
    c.dtypes = max ? concat(kAllFloats, kSignedInts) : kAllFloats;
    c.trials = [max](DType dt, Scale scale) {
      Rng rng(max ? 305 : 306);
      struct T {
        Shape x;
        Geometry g;
        Layout l;
      };
      std::vector<T> ts;
      if (scale == Scale::Perf) {
        ts = {{Shape{8, 64, 112, 112}, geo({3, 3}, {2, 2}, {1, 1}, {1, 1}, {1}), L::Contiguous}};
      } else {
        ts = {{Shape{2, 3, 6, 7}, geo({2, 2}, {2, 2}, {0, 0}, {1, 1}, {1}), L::Contiguous},
              {Shape{1, 2, 9, 8}, geo({3, 3}, {2, 2}, {1, 1}, {1, 1}, {1}), L::Permuted},
              {Shape{2, 2, 9, 8}, geo({3, 2}, {1, 2}, {1, 1}, {1, 1}, {0}), L::Sliced},
              {Shape{0, 2, 4, 4}, geo({2, 2}, {2, 2}, {0, 0}, {1, 1}, {1}), L::Contiguous},
              {Shape{3, 4, 11}, geo({3}, {2}, {1}, {1}, {1}), L::Flipped},
              {Shape{2, 3, 12}, geo({4}, {3}, {2}, {1}, {0}), L::Contiguous},
              {Shape{2, 5, 33, 31}, geo({3, 3}, {2, 2}, {1, 1}, {1, 1}, {0}), L::Contiguous}};
        if (max) {
          ts.push_back({Shape{1, 3, 10, 9}, geo({3, 2}, {2, 1}, {1, 1}, {2, 3}), L::Contiguous});
        }
      }
      std::vector<Trial> out;
      for (T& t : ts) {
        if (t.g.extra.empty()) t.g.extra = {1};
        out.push_back({label(t.x, t.g) + (t.g.extra[0] != 0 ? "" : " exclude pad"),
                       {random_host(t.x, dt, rng)},
                       {t.l},
                       encode(t.g)});
      }
      return out;
    };
    c.run = [max](Tensors&& x, const Params& p) {
      const Geometry g = decode(p);
      const bool include = g.extra[0] != 0;
      if (g.sp == 1) {
        if (max) {
          auto run1 = [&](auto t) {
            return mo::max_pool1d(t, {.kernel = g.kernel[0],
                                      .stride = g.stride[0],
                                      .padding = g.padding[0],
                                      .dilation = g.dilation[0]})
                .dyn();
          };
          if (x[0].kind() == ember::Kind::Int) {
            return Tensors{run1(Tensor<3, ember::Int>(std::move(x[0])))};
          }
          return Tensors{run1(Tensor<3>(std::move(x[0])))};
        }
        return Tensors{mo::avg_pool1d(Tensor<3>(std::move(x[0])), {.kernel = g.kernel[0],
                                                                   .stride = g.stride[0],
                                                                   .padding = g.padding[0],
                                                                   .count_include_pad = include})
                           .dyn()};
      }
      const mo::Size2 k{g.kernel[0], g.kernel[1]}, s{g.stride[0], g.stride[1]},
          pd{g.padding[0], g.padding[1]}, d{g.dilation[0], g.dilation[1]};
      if (max) {
        auto run2 = [&](auto t) {
          return mo::max_pool2d(t, {.kernel = k, .stride = s, .padding = pd, .dilation = d}).dyn();
        };
        if (x[0].kind() == ember::Kind::Int) {
          return Tensors{run2(Tensor<4, ember::Int>(std::move(x[0])))};
        }
        return Tensors{run2(Tensor<4>(std::move(x[0])))};
      }
      return Tensors{
          mo::avg_pool2d(Tensor<4>(std::move(x[0])),
                         {.kernel = k, .stride = s, .padding = pd, .count_include_pad = include})
              .dyn()};
    };
    c.ref = [max](const std::vector<HostTensor>& in, const Params& p) {
      return one(pool_ref(in[0], decode(p), max));
    };
    if (!max) {
      c.tol = [](DType dt) {
        switch (dt) {
          case DType::F64:
            return Tolerance{1e-12, 1e-12};
          case DType::F32:
            return Tolerance{1e-5, 1e-5};
          case DType::F16:
            return Tolerance{2e-3, 4e-3};
          default:
            return Tolerance{1e-2, 3e-2};
        }
      };
    }
    cs.push_back(std::move(c));
  }
}

}  // namespace conformance
