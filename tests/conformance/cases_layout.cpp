// Layout and indexing cases: reshape (also of non-contiguous views), permute, swap_dims,
// transpose, flip, expand, repeat, squeeze, unsqueeze, flatten, narrow, slice,
// slice_assign, slice_fill, cat, stack, split, chunk, pad, select, select_assign, gather,
// scatter, scatter_add, one_hot, nonzero. The reference moves values by index arithmetic.
#include <algorithm>
#include <cmath>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;
using ember::ops::Range;

// Each layout case sees one tensor in every view layout, in all dtypes.
std::vector<Trial> layout_trials(DType dt, Scale scale, const std::vector<Shape>& shapes,
                                 std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Trial> out;
  const Layout ls[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::Flipped,
                       Layout::Expanded};
  std::vector<Shape> ss = shapes;
  if (scale == Scale::Perf) {
    for (Shape& s : ss) {
      for (auto& d : s.dims()) d *= 8;
    }
  }
  for (const Shape& s : ss) {
    HostTensor x = random_host(s, dt, rng, Domain::Any);
    for (Layout l : ls) out.push_back({s.to_string() + " " + name(l), {x}, {l}});
  }
  return out;
}

// Gathers y[p] = x[src(idx of p)] for an output shape.
template <class F>
HostTensor move_values(const HostTensor& x, const Shape& out, F&& src) {
  HostTensor y(out, x.dtype);
  for (std::size_t p = 0; p < y.numel(); ++p) y.v[p] = x.v[src(unravel(p, out))];
  return y;
}

using Body = std::function<Tensors(Tensors&&, const Params&)>;
using Ref = std::function<std::vector<HostTensor>(const std::vector<HostTensor>&, const Params&)>;

void add_layout(std::vector<Case>& cs, const std::string& fn, std::vector<Shape> shapes, Body run,
                Ref ref, const std::string& family = "layout") {
  Case c;
  c.fn = fn;
  c.family = family;
  c.dtypes = kAllDtypes;
  const auto seed = std::hash<std::string>{}(fn);
  c.trials = [shapes, seed](DType dt, Scale s) { return layout_trials(dt, s, shapes, seed); };
  c.run = std::move(run);
  c.ref = std::move(ref);
  cs.push_back(std::move(c));
}

std::vector<HostTensor> one(HostTensor t) { return {std::move(t)}; }

HostTensor slice_ref(const HostTensor& x, const std::vector<std::array<std::size_t, 3>>& r) {
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < x.rank(); ++d) {
    dims.push_back(d < r.size() ? (r[d][1] - r[d][0] + r[d][2] - 1) / r[d][2] : x.shape[d]);
  }
  return move_values(x, Shape(dims), [&](std::vector<std::size_t> idx) {
    for (std::size_t d = 0; d < r.size(); ++d) idx[d] = r[d][0] + idx[d] * r[d][2];
    return ravel(idx, x.shape);
  });
}

}  // namespace

void add_layout_cases(std::vector<Case>& cs) {
  const std::vector<Shape> r3 = {Shape{2, 3, 4}, Shape{4, 1, 5}, Shape{3, 0, 2}, Shape{6, 33, 5}};
  add_layout(
      cs, "reshape", r3,
      [](Tensors&& x, const Params&) {
        return Tensors{ops::reshape(std::move(x[0]), std::vector<std::int64_t>{-1, 2})};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        y.shape = Shape{in[0].numel() / 2, 2};
        return one(y);
      });
  add_layout(
      cs, "permute", r3,
      [](Tensors&& x, const Params&) {
        return Tensors{ops::permute(std::move(x[0]), {2, 0, 1})};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[2], s[0], s[1]}, [&](const auto& i) {
          return ravel({i[1], i[2], i[0]}, s);
        }));
      });
  add_layout(
      cs, "swap_dims", r3,
      [](Tensors&& x, const Params&) { return Tensors{ops::swap_dims(std::move(x[0]), 0, 2)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[2], s[1], s[0]}, [&](const auto& i) {
          return ravel({i[2], i[1], i[0]}, s);
        }));
      });
  add_layout(
      cs, "transpose", r3,
      [](Tensors&& x, const Params&) { return Tensors{ops::transpose(std::move(x[0]))}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[0], s[2], s[1]}, [&](const auto& i) {
          return ravel({i[0], i[2], i[1]}, s);
        }));
      });
  add_layout(
      cs, "flip", r3,
      [](Tensors&& x, const Params&) {
        return Tensors{ops::flip(std::move(x[0]), {0, -1})};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], s, [&](const auto& i) {
          return ravel({s[0] - 1 - i[0], i[1], s[2] - 1 - i[2]}, s);
        }));
      });
  add_layout(
      cs, "expand", {Shape{1, 3, 1}, Shape{4, 1, 5}, Shape{1, 0, 1}},
      [](Tensors&& x, const Params&) {
        Shape s = x[0].shape();
        std::vector<std::size_t> d = {2};
        for (std::size_t e : s) d.push_back(e == 1 ? 3 : e);
        return Tensors{ops::expand(std::move(x[0]), Shape(d))};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        std::vector<std::size_t> d = {2};
        for (std::size_t e : in[0].shape) d.push_back(e == 1 ? 3 : e);
        return one(move_values(in[0], Shape(d),
                               [&](const auto& i) { return broadcast_index(i, in[0].shape); }));
      });
  add_layout(
      cs, "repeat", r3,
      [](Tensors&& x, const Params&) {
        return Tensors{ops::repeat(std::move(x[0]), {2, 1, 3})};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{2 * s[0], s[1], 3 * s[2]}, [&](const auto& i) {
          return ravel({i[0] % s[0], i[1], i[2] % s[2]}, s);
        }));
      });
  add_layout(
      cs, "repeat_dim", r3,
      [](Tensors&& x, const Params&) { return Tensors{ops::repeat_dim(std::move(x[0]), 1, 2)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[0], 2 * s[1], s[2]}, [&](const auto& i) {
          return ravel({i[0], i[1] % s[1], i[2]}, s);
        }));
      });
  const std::vector<Shape> with1 = {Shape{4, 1, 5}, Shape{3, 1, 1}, Shape{2, 1, 0}};
  add_layout(
      cs, "squeeze", with1,
      [](Tensors&& x, const Params&) { return Tensors{ops::squeeze(std::move(x[0]), 1)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        y.shape = Shape{in[0].shape[0], in[0].shape[2]};
        return one(y);
      });
  add_layout(
      cs, "squeeze_all", with1,
      [](Tensors&& x, const Params&) { return Tensors{ops::squeeze_all(std::move(x[0]))}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        std::vector<std::size_t> d;
        for (std::size_t e : in[0].shape) {
          if (e != 1) d.push_back(e);
        }
        if (d.empty()) d.push_back(1);
        y.shape = Shape(d);
        return one(y);
      });
  add_layout(
      cs, "unsqueeze", r3,
      [](Tensors&& x, const Params&) { return Tensors{ops::unsqueeze(std::move(x[0]), -1)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        auto d = in[0].shape.dims();
        d.push_back(1);
        y.shape = Shape(d);
        return one(y);
      });
  cs.back().also = {"unsqueeze_dim"};  // the Tensor method at a dim
  add_layout(
      cs, "flatten", r3,
      [](Tensors&& x, const Params&) { return Tensors{ops::flatten(std::move(x[0]), 1, 2)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        y.shape = Shape{in[0].shape[0], in[0].shape[1] * in[0].shape[2]};
        return one(y);
      });
  const std::vector<Shape> big = {Shape{4, 3, 6}, Shape{5, 2, 9}, Shape{3, 0, 8}};
  add_layout(
      cs, "narrow", big,
      [](Tensors&& x, const Params&) { return Tensors{ops::narrow(std::move(x[0]), -1, -5, 3)}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        const std::size_t n = in[0].shape[2];
        return one(
            slice_ref(in[0], {{0, in[0].shape[0], 1}, {0, in[0].shape[1], 1}, {n - 5, n - 2, 1}}));
      });
  add_layout(
      cs, "slice", big,
      [](Tensors&& x, const Params&) {
        return Tensors{ops::slice(std::move(x[0]), {Range(1, std::nullopt, 2),
                                                    Range(0, std::nullopt), Range(-6, -1, 2)})};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(slice_ref(in[0], {{1, s[0], 2}, {0, s[1], 1}, {s[2] - 6, s[2] - 1, 2}}));
      });
  // slice_assign: the whole output is compared, so a write outside the range shows.
  add_layout(
      cs, "slice_assign", big,
      [](Tensors&& x, const Params&) {
        const Shape& s = x[0].shape();
        auto v = ops::full(Shape{s[0] - 1, s[1], 2}, 1.0, x[0].dtype(), x[0].device());
        return Tensors{ops::slice_assign(
            std::move(x[0]), {Range(1, std::nullopt), Range(0, std::nullopt), Range(2, 6, 2)},
            std::move(v))};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        for (std::size_t p = 0; p < y.numel(); ++p) {
          auto i = unravel(p, y.shape);
          if (i[0] >= 1 && (i[2] == 2 || i[2] == 4)) y.v[p] = 1.0;
        }
        return one(y);
      });
  add_layout(
      cs, "slice_fill", {Shape{4, 3, 6}, Shape{5, 2, 9}, Shape{3, 1, 0}},
      [](Tensors&& x, const Params&) {
        return Tensors{
            ops::slice_fill(std::move(x[0]), {Range(0, 2), Range(1, std::nullopt)}, 0.0)};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        for (std::size_t p = 0; p < y.numel(); ++p) {
          auto i = unravel(p, y.shape);
          if (i[0] < 2 && i[1] >= 1) y.v[p] = 0.0;
        }
        return one(y);
      });
  add_layout(
      cs, "cat", big,
      [](Tensors&& x, const Params&) {
        auto a = ops::narrow(x[0], 2, 0, 2);
        auto f = ops::flip(x[0], {0});
        return Tensors{ops::cat({std::move(x[0]), std::move(a), std::move(f)}, 2)};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[0], s[1], 2 * s[2] + 2}, [&](const auto& i) {
          if (i[2] < s[2]) return ravel(i, s);
          if (i[2] < s[2] + 2) return ravel({i[0], i[1], i[2] - s[2]}, s);
          return ravel({s[0] - 1 - i[0], i[1], i[2] - s[2] - 2}, s);
        }));
      });
  add_layout(
      cs, "stack", r3,
      [](Tensors&& x, const Params&) {
        auto f = ops::flip(x[0], {1});
        return Tensors{ops::stack({std::move(x[0]), std::move(f)}, 1)};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        return one(move_values(in[0], Shape{s[0], 2, s[1], s[2]}, [&](const auto& i) {
          return ravel({i[0], i[1] == 0 ? i[2] : s[1] - 1 - i[2], i[3]}, s);
        }));
      });
  // split / split_sizes / chunk: the parts, in order.
  auto parts_ref = [](const HostTensor& x, const std::vector<std::size_t>& sizes) {
    std::vector<HostTensor> out;
    std::size_t start = 0;
    for (std::size_t n : sizes) {
      out.push_back(slice_ref(x, {{0, x.shape[0], 1}, {0, x.shape[1], 1}, {start, start + n, 1}}));
      start += n;
    }
    return out;
  };
  add_layout(
      cs, "split", big,
      [](Tensors&& x, const Params&) { return ops::split(std::move(x[0]), 4, -1); },
      [parts_ref](const std::vector<HostTensor>& in, const Params&) {
        const std::size_t n = in[0].shape[2];
        std::vector<std::size_t> sizes;
        for (std::size_t s = 0; s < n; s += 4) sizes.push_back(std::min<std::size_t>(4, n - s));
        return parts_ref(in[0], sizes);
      });
  add_layout(
      cs, "split_sizes", big,
      [](Tensors&& x, const Params&) {
        const std::size_t n = x[0].shape()[2];
        return ops::split_sizes(std::move(x[0]), {1, 0, n - 1}, 2);
      },
      [parts_ref](const std::vector<HostTensor>& in, const Params&) {
        return parts_ref(in[0], {1, 0, in[0].shape[2] - 1});
      });
  cs.back().also = {"split_with_sizes"};  // the Tensor method
  add_layout(
      cs, "chunk", big,
      [](Tensors&& x, const Params&) { return ops::chunk(std::move(x[0]), 3, 2); },
      [parts_ref](const std::vector<HostTensor>& in, const Params&) {
        const std::size_t n = in[0].shape[2], per = (n + 2) / 3;
        std::vector<std::size_t> sizes;
        for (std::size_t s = 0; s < n; s += per) sizes.push_back(std::min(per, n - s));
        return parts_ref(in[0], sizes);
      });
  // pad in its three modes: (1, 2) on the last dim, (2, 1) on the one before.
  for (const auto& [fn, mode] :
       {std::pair{"pad", ops::PadMode::Constant}, std::pair{"pad_reflect", ops::PadMode::Reflect},
        std::pair{"pad_edge", ops::PadMode::Edge}}) {
    const ops::PadMode m = mode;
    add_layout(
        cs, fn, {Shape{2, 3, 4}, Shape{3, 5, 6}},
        [m](Tensors&& x, const Params&) {
          return Tensors{ops::pad(std::move(x[0]), {{2, 1}, {1, 2}}, m, 1.0)};
        },
        [m](const std::vector<HostTensor>& in, const Params&) {
          const Shape& s = in[0].shape;
          HostTensor y(Shape{s[0], s[1] + 3, s[2] + 3}, in[0].dtype);
          auto src = [&](std::int64_t j, std::size_t n) -> std::int64_t {
            const auto nn = static_cast<std::int64_t>(n);
            if (j >= 0 && j < nn) return j;
            if (m == ops::PadMode::Constant) return -1;
            if (m == ops::PadMode::Edge) return std::clamp<std::int64_t>(j, 0, nn - 1);
            return j < 0 ? -j : 2 * (nn - 1) - j;
          };
          for (std::size_t p = 0; p < y.numel(); ++p) {
            auto i = unravel(p, y.shape);
            const auto a = src(static_cast<std::int64_t>(i[1]) - 2, s[1]);
            const auto b = src(static_cast<std::int64_t>(i[2]) - 1, s[2]);
            y.v[p] =
                (a < 0 || b < 0)
                    ? 1.0
                    : in[0].v[ravel(
                          {i[0], static_cast<std::size_t>(a), static_cast<std::size_t>(b)}, s)];
          }
          return one(y);
        });
  }
  for (auto& c : cs) {
    if (c.fn == "pad" || c.fn == "pad_reflect" || c.fn == "pad_edge") c.family = "pad";
  }

  // ---- indexing ----
  add_layout(
      cs, "select", big,
      [](Tensors&& x, const Params&) {
        auto idx =
            ops::from_data(ember::TensorData::from<std::int64_t>({2, 0, 2, 1}), x[0].device());
        return Tensors{ops::select(std::move(x[0]), 0, std::move(idx))};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        const Shape& s = in[0].shape;
        const std::size_t ix[] = {2, 0, 2, 1};
        return one(move_values(in[0], Shape{4, s[1], s[2]}, [&](const auto& i) {
          return ravel({ix[i[0]], i[1], i[2]}, s);
        }));
      },
      "indexing");
  // select_assign adds the values at the indices (IndexAdd), repeated indices accumulate.
  add_layout(
      cs, "select_assign", {Shape{4, 3, 6}, Shape{5, 2, 9}, Shape{3, 2, 0}},
      [](Tensors&& x, const Params&) {
        const Shape& s = x[0].shape();
        auto idx = ops::from_data(ember::TensorData::from<std::int64_t>({1, 0, 1}), x[0].device());
        auto v = ops::ones(Shape{s[0], 3, s[2]}, x[0].dtype(), x[0].device());
        return Tensors{ops::select_assign(std::move(x[0]), 1, std::move(idx), std::move(v))};
      },
      [](const std::vector<HostTensor>& in, const Params&) {
        HostTensor y = in[0];
        for (std::size_t p = 0; p < y.numel(); ++p) {
          auto i = unravel(p, y.shape);
          const double add = i[1] == 1 ? 2 : i[1] == 0 ? 1 : 0;
          if (y.dtype == DType::Bool) {
            y.v[p] = (y.v[p] != 0 || add != 0) ? 1 : 0;
          } else {
            y.v[p] += add;
          }
        }
        return one(y);
      },
      "indexing");
  for (auto& c : cs) {
    if (c.fn == "select_assign") {
      // Keep int sums in range for i8/u8: the inputs are small.
      c.dtypes = concat(kAllFloats, concat(kInts, {DType::Bool}));
    }
  }
  // gather / scatter / scatter_add with an index tensor of the same rank.
  auto index_host = [](const Shape& s, std::size_t extent, std::uint64_t seed) {
    Rng rng(seed);
    HostTensor idx(s, DType::I64);
    std::uniform_int_distribution<std::size_t> u(0, extent - 1);
    for (double& v : idx.v) v = static_cast<double>(u(rng));
    return idx;
  };
  for (const std::string fn : {"gather", "scatter", "scatter_add"}) {
    Case c;
    c.fn = fn;
    c.family = "indexing";
    c.dtypes = kAllDtypes;
    if (fn == "scatter_add") c.dtypes = concat(kAllFloats, kInts);
    c.trials = [index_host, fn](DType dt, Scale scale) {
      Rng rng(51);
      std::vector<Trial> ts;
      const std::size_t m = scale == Scale::Perf ? 64 : 1;
      struct G {
        Shape x, idx;
        std::int64_t dim;
        Layout lx;
      };
      const std::vector<G> gs = {{Shape{4, 5 * m, 6}, Shape{4, 3 * m, 6}, 1, Layout::Contiguous},
                                 {Shape{4, 5, 6}, Shape{2, 5, 7}, 2, Layout::Permuted},
                                 {Shape{7, 3}, Shape{5, 2}, 0, Layout::Sliced},
                                 {Shape{7, 3}, Shape{0, 3}, 0, Layout::Flipped},
                                 {Shape{3, 1030}, Shape{3, 2000}, -1, Layout::Expanded}};
      for (const G& g : gs) {
        const std::size_t d = normalize(g.dim, g.x.rank());
        HostTensor x = random_host(g.x, dt, rng, Domain::Small);
        HostTensor idx = index_host(g.idx, g.x[d], rng());
        std::vector<HostTensor> in = {x, idx};
        if (fn != "gather") in.push_back(random_host(g.idx, dt, rng, Domain::Small));
        ts.push_back({g.x.to_string() + " idx " + g.idx.to_string() + " " + name(g.lx),
                      in,
                      {g.lx, Layout::Contiguous, Layout::Sliced},
                      {static_cast<double>(g.dim)}});
      }
      // gather needs index extents <= x's outside dim; scatter additionally needs a write
      // order that does not matter: plain scatter keeps only unique indices per line.
      if (fn == "scatter") {
        for (auto& t : ts) {
          const std::size_t d =
              normalize(static_cast<std::int64_t>(t.params[0]), t.inputs[0].rank());
          const std::size_t n = t.inputs[0].shape[d];
          HostTensor& idx = t.inputs[1];
          // Make every line along d a prefix of a permutation of [0, n).
          Shape s = idx.shape;
          if (s[d] > n) continue;
          for (std::size_t p = 0; p < idx.numel(); ++p) {
            auto i = unravel(p, s);
            idx.v[p] = static_cast<double>((i[d] * 7 + 3) % n);
          }
        }
        std::erase_if(ts, [](const Trial& t) {
          const std::size_t d =
              normalize(static_cast<std::int64_t>(t.params[0]), t.inputs[0].rank());
          return t.inputs[1].shape[d] > t.inputs[0].shape[d] || t.inputs[0].shape[d] % 7 == 0;
        });
      }
      return ts;
    };
    c.run = [fn](Tensors&& x, const Params& p) {
      const auto dim = static_cast<std::int64_t>(p[0]);
      if (fn == "gather") return Tensors{ops::gather(std::move(x[0]), dim, std::move(x[1]))};
      if (fn == "scatter") {
        return Tensors{ops::scatter(std::move(x[0]), dim, std::move(x[1]), std::move(x[2]))};
      }
      return Tensors{ops::scatter_add(std::move(x[0]), dim, std::move(x[1]), std::move(x[2]))};
    };
    c.ref = [fn](const std::vector<HostTensor>& in, const Params& p) {
      const std::size_t d = normalize(static_cast<std::int64_t>(p[0]), in[0].rank());
      const HostTensor& x = in[0];
      const HostTensor& idx = in[1];
      if (fn == "gather") {
        return one(move_values(x, idx.shape, [&](std::vector<std::size_t> i) {
          i[d] = static_cast<std::size_t>(idx.v[ravel(i, idx.shape)]);
          return ravel(i, x.shape);
        }));
      }
      HostTensor y = x;
      for (std::size_t q = 0; q < idx.numel(); ++q) {
        auto i = unravel(q, idx.shape);
        i[d] = static_cast<std::size_t>(idx.v[q]);
        double& dst = y.v[ravel(i, x.shape)];
        dst = fn == "scatter" ? in[2].v[q] : dst + in[2].v[q];
      }
      return one(y);
    };
    c.tol_scale = 4;
    cs.push_back(std::move(c));
  }
  {
    Case c;
    c.fn = "one_hot";
    c.family = "indexing";
    c.dtypes = {DType::F32, DType::F64, DType::I64, DType::I32, DType::Bool};
    c.trials = [index_host](DType, Scale s) {
      std::vector<Trial> ts;
      const Shape shapes[] = {Shape{7}, Shape{3, 4}, Shape{0},
                              Shape{s == Scale::Perf ? 100000u : 1000u}};
      for (const Shape& sh : shapes) {
        HostTensor idx = index_host(sh, 5, sh.num_elements());
        ts.push_back({sh.to_string(), {idx}, {Layout::Contiguous}});
        ts.push_back({sh.to_string() + " sliced", {idx}, {Layout::Sliced}});
      }
      return ts;
    };
    // The output dtype is the case's dtype; the input indices are i64.
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::one_hot(std::move(x[0]), 6, DType::F32)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      auto d = in[0].shape.dims();
      d.push_back(6);
      HostTensor y(Shape(d), DType::F32);
      for (std::size_t p = 0; p < in[0].numel(); ++p)
        y.v[p * 6 + static_cast<std::size_t>(in[0].v[p])] = 1;
      return one(y);
    };
    c.dtypes = {DType::F32};
    cs.push_back(std::move(c));
  }
  add_layout(
      cs, "nonzero", {Shape{4, 3, 6}, Shape{3, 0, 2}, Shape{1, 1, 1}},
      [](Tensors&& x, const Params&) { return Tensors{ops::nonzero(std::move(x[0]))}; },
      [](const std::vector<HostTensor>& in, const Params&) {
        std::vector<double> coords;
        std::size_t count = 0;
        for (std::size_t p = 0; p < in[0].numel(); ++p) {
          if (in[0].v[p] == 0) continue;
          ++count;
          for (std::size_t i : unravel(p, in[0].shape)) coords.push_back(static_cast<double>(i));
        }
        return one(HostTensor(Shape{count, in[0].rank()}, DType::I64, coords));
      },
      "indexing");
}

}  // namespace conformance
