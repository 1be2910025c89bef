// The rest of the standard domain that ember's ops reach: Einsum, MaxUnpool, the
// data-dependent Unique and NonMaxSuppression (computed on the host: their output shapes
// depend on the values), and DynamicQuantizeLinear.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "ops.hpp"

namespace ember::onnx {

namespace {

using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;
using V = std::vector<DynTensor>;
using I64s = std::vector<std::int64_t>;

DynTensor i64_tensor(const I64s& v, const Shape& s, const Device& dev) {
  return ops::from_data(TensorData::from<std::int64_t>(v, s), dev);
}

// ---- Einsum: diagonals taken per operand, then one broadcast product summed over the
// labels the output does not keep ----
V einsum(OpCall& c) {
  std::string eq;
  for (char ch : c.node.s("equation", ""))
    if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t s = 0;;) {
    const auto comma = lhs.find(',', s);
    terms.push_back(lhs.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
    if (comma == std::string::npos) break;
    s = comma + 1;
  }
  c.check(terms.size() == c.size(), "equation '" + eq + "' has " + std::to_string(terms.size()) +
                                        " operands for " + std::to_string(c.size()) + " inputs");
  // Ellipsis dims become labels 'A' + k counted from the right (uppercase letters are
  // otherwise unused here: ONNX allows lowercase and uppercase; collisions are refused).
  std::size_t ell = 0;
  std::vector<std::vector<char>> labels(terms.size());
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string& t = terms[i];
    const auto dots = t.find("...");
    const std::size_t named = t.size() - (dots == std::string::npos ? 0 : 3);
    const std::size_t rank = c.at(i).rank();
    c.check(dots != std::string::npos ? rank >= named : rank == named,
            "operand " + std::to_string(i) + " '" + t + "' does not match its rank " +
                std::to_string(rank));
    const std::size_t e = dots == std::string::npos ? 0 : rank - named;
    ell = std::max(ell, e);
    for (std::size_t k = 0; k < t.size(); ++k) {
      if (dots != std::string::npos && k == dots) {
        for (std::size_t j = 0; j < e; ++j) labels[i].push_back(static_cast<char>(1 + (e - 1 - j)));
        k += 2;
        continue;
      }
      c.check(std::isalpha(static_cast<unsigned char>(t[k])),
              "bad label '" + std::string(1, t[k]) + "' in '" + eq + "'");
      labels[i].push_back(t[k]);
    }
  }
  std::vector<char> out;
  if (arrow != std::string::npos) {
    const std::string r = eq.substr(arrow + 2);
    for (std::size_t k = 0; k < r.size(); ++k) {
      if (r.compare(k, 3, "...") == 0) {
        for (std::size_t j = 0; j < ell; ++j) out.push_back(static_cast<char>(1 + (ell - 1 - j)));
        k += 2;
        continue;
      }
      out.push_back(r[k]);
    }
  } else {
    std::map<char, int> count;
    for (auto& l : labels)
      for (char ch : l) ++count[ch];
    for (std::size_t j = 0; j < ell; ++j) out.push_back(static_cast<char>(1 + (ell - 1 - j)));
    for (auto& [ch, n] : count)
      if (n == 1 && ch > 16) out.push_back(ch);
  }
  std::vector<char> all = out;
  for (auto& l : labels)
    for (char ch : l)
      if (std::find(all.begin(), all.end(), ch) == all.end()) all.push_back(ch);
  std::optional<DynTensor> prod;
  std::map<char, std::size_t> extent;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    DynTensor x = c.at(i);
    std::vector<char> l = labels[i];
    // Diagonals of repeated labels.
    for (bool again = true; again;) {
      again = false;
      for (std::size_t p = 0; p < l.size() && !again; ++p)
        for (std::size_t q = p + 1; q < l.size() && !again; ++q)
          if (l[p] == l[q]) {
            const std::size_t n = x.shape()[p];
            c.check(x.shape()[q] == n, "repeated label with extents " + std::to_string(n) +
                                           " and " + std::to_string(x.shape()[q]));
            I64s perm;
            for (std::size_t d = 0; d < l.size(); ++d)
              if (d != p && d != q) perm.push_back(static_cast<std::int64_t>(d));
            perm.push_back(static_cast<std::int64_t>(p));
            perm.push_back(static_cast<std::int64_t>(q));
            x = ops::permute(std::move(x), perm);
            std::vector<std::size_t> dims(x.shape().dims().begin(), x.shape().dims().end() - 2);
            dims.push_back(n * n);
            x = ops::reshape(std::move(x), Shape(dims));
            std::vector<ops::Range> rs(dims.size(), ops::Range(0, std::nullopt));
            rs.back() =
                ops::Range(0, static_cast<std::int64_t>(n * n), static_cast<std::int64_t>(n + 1));
            x = ops::slice(std::move(x), rs);
            std::vector<char> nl;
            for (auto d : perm) nl.push_back(l[static_cast<std::size_t>(d)]);
            nl.pop_back();
            l = nl;
            again = true;
          }
    }
    // Into the order of `all`, with 1 for labels it lacks.
    I64s perm;
    std::vector<std::size_t> dims;
    for (char ch : all) {
      auto it = std::find(l.begin(), l.end(), ch);
      if (it == l.end()) {
        dims.push_back(1);
        continue;
      }
      const auto d = static_cast<std::size_t>(it - l.begin());
      perm.push_back(static_cast<std::int64_t>(d));
      dims.push_back(x.shape()[d]);
      if (x.shape()[d] != 1) {
        auto [e, fresh] = extent.emplace(ch, x.shape()[d]);
        c.check(fresh || e->second == x.shape()[d], "label extents differ");
      }
    }
    x = ops::reshape(ops::permute(std::move(x), perm), Shape(dims));
    prod = prod ? ops::binary(BinaryFn::Mul, std::move(*prod), std::move(x)) : x;
  }
  DynTensor y = std::move(*prod);
  for (std::size_t d = all.size(); d-- > out.size();)
    y = ops::reduce(ReduceFn::Sum, std::move(y), static_cast<std::int64_t>(d));
  std::vector<std::size_t> dims(y.shape().dims().begin(),
                                y.shape().dims().begin() + static_cast<std::ptrdiff_t>(out.size()));
  return {ops::reshape(std::move(y), Shape(dims))};
}

// ---- MaxUnpool: the values scattered to the flat indices MaxPool gave ----
V max_unpool(OpCall& c) {
  DynTensor x = c.at(0), idx = c.at(1);
  c.check(x.rank() >= 3 && idx.shape() == x.shape(), "X " + x.shape().to_string() + " and I " +
                                                         idx.shape().to_string() +
                                                         " must match, [N, C, *spatial]");
  const std::size_t n = x.rank() - 2;
  // The indices address the unpooled shape the pool's geometry gives; an output_shape
  // places each at the same coordinates of a larger output.
  const I64s k = c.node.ints("kernel_shape"), st = c.node.ints("strides", I64s(n, 1)),
             p = c.node.ints("pads", I64s(2 * n, 0));
  c.check(k.size() == n && st.size() == n && p.size() == 2 * n,
          "kernel_shape, strides and pads must fit the spatial dims");
  std::vector<std::size_t> base{x.shape()[0], x.shape()[1]};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t e =
        (static_cast<std::int64_t>(x.shape()[i + 2]) - 1) * st[i] + k[i] - p[i] - p[i + n];
    c.check(e > 0, "the unpooled extent of spatial dim " + std::to_string(i) + " is not positive");
    base.push_back(static_cast<std::size_t>(e));
  }
  std::vector<std::size_t> dims = base;
  if (c.has(2)) {
    dims.clear();
    for (auto v : host_ints(c.at(2)))
      dims.push_back(static_cast<std::size_t>(std::max<std::int64_t>(v, 0)));
    c.check(dims.size() == x.rank(), "output_shape must have the input's rank");
    for (std::size_t d = 0; d < dims.size(); ++d)
      c.check(dims[d] >= base[d], "output_shape is smaller than the unpooled shape");
  }
  const Shape out(dims);
  const std::size_t total = Shape(base).num_elements(), m = x.num_elements();
  I64s iv = host_ints(idx);
  for (auto& i : iv) {
    c.check(i >= 0 && static_cast<std::size_t>(i) < total,
            "index " + std::to_string(i) + " is outside the unpooled tensor of " +
                std::to_string(total) + " elements");
    std::size_t rest = static_cast<std::size_t>(i), flat = 0, stride = 1;
    for (std::size_t d = base.size(); d-- > 0;) {
      flat += (rest % base[d]) * stride;
      rest /= base[d];
      stride *= dims[d];
    }
    i = static_cast<std::int64_t>(flat);
  }
  DynTensor z = ops::zeros(Shape{out.num_elements()}, x.dtype(), c.device);
  DynTensor r = ops::scatter(std::move(z), 0, i64_tensor(iv, Shape{m}, c.device),
                             ops::reshape(std::move(x), Shape{m}));
  return {ops::reshape(std::move(r), out)};
}

// ---- Unique ----
V unique(OpCall& c) {
  DynTensor x = c.at(0);
  const bool sorted = c.node.i("sorted", 1) != 0;
  std::size_t axis = 0;
  if (!c.node.has("axis")) {
    const std::size_t nx = x.num_elements();
    x = ops::reshape(std::move(x), Shape{nx});
  } else {
    const auto r = static_cast<std::int64_t>(x.rank());
    std::int64_t a = c.node.i("axis", 0);
    c.check(a >= -r && a < r, "axis out of range");
    axis = static_cast<std::size_t>(a < 0 ? a + r : a);
  }
  // Slices along the axis as rows of doubles.
  const std::size_t n = x.shape()[axis];
  DynTensor moved = ops::permute(x, [&] {
    I64s p{static_cast<std::int64_t>(axis)};
    for (std::size_t d = 0; d < x.rank(); ++d)
      if (d != axis) p.push_back(static_cast<std::int64_t>(d));
    return p;
  }());
  const auto v = moved.to_data().to_vector<double>();
  const std::size_t row = n ? v.size() / n : 0;
  const auto slice_of = [&](std::size_t i) {
    return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(i * row),
                               v.begin() + static_cast<std::ptrdiff_t>((i + 1) * row));
  };
  std::map<std::vector<double>, std::size_t> first;  // slice -> first index
  I64s order;                                        // first indices in order of appearance
  for (std::size_t i = 0; i < n; ++i)
    if (first.emplace(slice_of(i), i).second) order.push_back(static_cast<std::int64_t>(i));
  if (sorted) {
    order.clear();
    for (auto& [k, i] : first) order.push_back(static_cast<std::int64_t>(i));
  }
  std::map<std::size_t, std::int64_t> pos;
  for (std::size_t u = 0; u < order.size(); ++u)
    pos[static_cast<std::size_t>(order[u])] = static_cast<std::int64_t>(u);
  I64s inverse(n), counts(order.size(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    inverse[i] = pos[first[slice_of(i)]];
    ++counts[static_cast<std::size_t>(inverse[i])];
  }
  DynTensor y = ops::select(std::move(x), static_cast<std::int64_t>(axis),
                            i64_tensor(order, Shape{order.size()}, c.device));
  return {y, i64_tensor(order, Shape{order.size()}, c.device),
          i64_tensor(inverse, Shape{n}, c.device),
          i64_tensor(counts, Shape{counts.size()}, c.device)};
}

// ---- NonMaxSuppression ----
V non_max_suppression(OpCall& c) {
  const DynTensor& boxes = c.at(0);
  const DynTensor& scores = c.at(1);
  c.check(boxes.rank() == 3 && boxes.shape()[2] == 4 && scores.rank() == 3 &&
              scores.shape()[0] == boxes.shape()[0] && scores.shape()[2] == boxes.shape()[1],
          "boxes " + boxes.shape().to_string() + " must be [B, N, 4] and scores " +
              scores.shape().to_string() + " [B, C, N]");
  const std::int64_t max_out =
      c.has(2) && c.at(2).num_elements() ? static_cast<std::int64_t>(host_scalar(c.at(2))) : 0;
  const double iou_t = c.has(3) && c.at(3).num_elements() ? host_scalar(c.at(3)) : 0.0;
  const bool has_score_t = c.has(4) && c.at(4).num_elements() > 0;
  const double score_t = has_score_t ? host_scalar(c.at(4)) : 0.0;
  const bool center = c.node.i("center_point_box", 0) != 0;
  const auto bv = boxes.to_data().to_vector<double>(), sv = scores.to_data().to_vector<double>();
  const std::size_t nb = boxes.shape()[0], nbox = boxes.shape()[1], nc = scores.shape()[1];
  struct Box {
    double y1, x1, y2, x2;
  };
  const auto box = [&](std::size_t b, std::size_t i) {
    const double* p = &bv[(b * nbox + i) * 4];
    if (center) return Box{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    return Box{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
               std::max(p[1], p[3])};
  };
  const auto iou = [](const Box& a, const Box& b) {
    const double ih = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
    const double iw = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
    const double inter = ih * iw;
    const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  I64s sel;
  for (std::size_t b = 0; b < nb; ++b)
    for (std::size_t k = 0; k < nc; ++k) {
      std::vector<std::size_t> idx(nbox);
      std::iota(idx.begin(), idx.end(), 0);
      const double* s = &sv[(b * nc + k) * nbox];
      std::stable_sort(idx.begin(), idx.end(),
                       [&](std::size_t p, std::size_t q) { return s[p] > s[q]; });
      std::vector<std::size_t> kept;
      for (auto i : idx) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        if (has_score_t && !(s[i] > score_t)) continue;
        bool ok = true;
        for (auto j : kept) ok = ok && !(iou(box(b, i), box(b, j)) > iou_t);
        if (ok) kept.push_back(i);
      }
      for (auto i : kept) {
        sel.push_back(static_cast<std::int64_t>(b));
        sel.push_back(static_cast<std::int64_t>(k));
        sel.push_back(static_cast<std::int64_t>(i));
      }
    }
  return {i64_tensor(sel, Shape{sel.size() / 3, 3}, c.device)};
}

// ---- DynamicQuantizeLinear: uint8 with the scale and zero point of x's range (and 0) ----
V dynamic_quantize_linear(OpCall& c) {
  DynTensor x = ops::cast(c.at(0), DType::F32);
  const double lo =
      x.num_elements() ? std::min(0.0, host_scalar(ops::reduce_all(ReduceFn::Min, x))) : 0.0;
  const double hi =
      x.num_elements() ? std::max(0.0, host_scalar(ops::reduce_all(ReduceFn::Max, x))) : 0.0;
  const float scale = static_cast<float>((hi - lo) / 255.0);
  const float zp =
      scale == 0 ? 0.0f : std::clamp(std::nearbyint(static_cast<float>(-lo) / scale), 0.0f, 255.0f);
  DynTensor q = scale == 0 ? ops::zeros(x.shape(), DType::F32, c.device)
                           : ops::unary(UnaryFn::Round,
                                        ops::binary_scalar(BinaryFn::Div, std::move(x), scale));
  q = ops::clamp(ops::binary_scalar(BinaryFn::Add, std::move(q), zp), 0.0, 255.0);
  return {ops::cast(std::move(q), DType::U8), ops::full(Shape{}, scale, DType::F32, c.device),
          ops::full(Shape{}, zp, DType::U8, c.device)};
}

}  // namespace

void register_extra(OpMap& m) {
  m["Einsum"] = {einsum, true};
  m["MaxUnpool"] = {max_unpool, true};
  m["Unique"] = {unique, true};
  m["NonMaxSuppression"] = {non_max_suppression, true};
  m["DynamicQuantizeLinear"] = {dynamic_quantize_linear, true};
}

}  // namespace ember::onnx
