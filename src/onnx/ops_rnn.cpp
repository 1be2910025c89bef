// The recurrent ONNX operators RNN, GRU and LSTM, unrolled over the sequence as matmuls and
// element-wise gates (so they run on any device and differentiate on an autodiff one), and
// the window functions.
#include <algorithm>
#include <cmath>

#include "ops.hpp"

namespace ember::onnx {

namespace {

using ir::BinaryFn;
using ir::UnaryFn;
using V = std::vector<DynTensor>;

DynTensor add(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Add, std::move(a), std::move(b));
}
DynTensor mul(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Mul, std::move(a), std::move(b));
}

enum class Cell { Rnn, Gru, Lstm };

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

DynTensor apply(const OpCall& c, const Act& a, DynTensor x) {
  if (a.name == "Sigmoid") return ops::unary(UnaryFn::Sigmoid, std::move(x));
  if (a.name == "Tanh") return ops::unary(UnaryFn::Tanh, std::move(x));
  if (a.name == "Relu") return ops::unary(UnaryFn::Relu, std::move(x));
  c.error("activation '" + a.name + "' is not supported; expected Sigmoid, Tanh or Relu");
}

template <Cell K>
V recurrent(OpCall& c) {
  constexpr std::size_t gates = K == Cell::Rnn ? 1 : K == Cell::Gru ? 3 : 4;
  DynTensor x = c.at(0), w = c.at(1), r = c.at(2);
  const bool batch_first = c.node.i("layout", 0) != 0;
  if (batch_first) x = ops::permute(std::move(x), {1, 0, 2});
  c.check(x.rank() == 3 && w.rank() == 3 && r.rank() == 3, "X, W and R must have rank 3");
  const std::size_t seq = x.shape()[0], batch = x.shape()[1], dirs = w.shape()[0];
  const std::size_t hidden = r.shape()[2];
  c.check(w.shape()[1] == gates * hidden && r.shape()[1] == gates * hidden,
          "W " + w.shape().to_string() + " and R " + r.shape().to_string() + " must have " +
              std::to_string(gates) + " * hidden_size rows");
  const std::string direction = c.node.s("direction", "forward");
  c.check(
      (direction == "bidirectional") == (dirs == 2),
      "direction '" + direction + "' does not match W's " + std::to_string(dirs) + " directions");
  const double clip = c.node.f("clip", 0.0);
  c.check(!c.node.has("clip"), "the clip attribute is not supported");
  (void)clip;
  c.check(c.node.i("input_forget", 0) == 0, "input_forget = 1 is not supported");
  std::vector<std::int64_t> lens;
  if (c.has(4)) lens = host_ints(c.at(4));
  for (auto l : lens)
    c.check(l >= 0 && static_cast<std::size_t>(l) <= seq,
            "sequence_lens entry " + std::to_string(l) + " exceeds the sequence length");
  std::vector<Act> acts;
  const auto names = c.node.attrs.count("activations") ? c.node.attrs.at("activations").strings
                                                       : std::vector<std::string>{};
  const std::vector<std::string> dflt = K == Cell::Rnn ? std::vector<std::string>{"Tanh"}
                                        : K == Cell::Gru
                                            ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  for (std::size_t d = 0; d < dirs; ++d)
    for (std::size_t k = 0; k < dflt.size(); ++k) {
      const std::size_t i = d * dflt.size() + k;
      acts.push_back({i < names.size() ? names[i] : dflt[k]});
    }
  const bool lbr = c.node.i("linear_before_reset", 0) != 0;
  const DType dt = x.dtype();
  const Device& dev = c.device;
  V ys, hs, cs;
  for (std::size_t d = 0; d < dirs; ++d) {
    const auto di = static_cast<std::int64_t>(d);
    const bool reverse = direction == "reverse" || d == 1;
    DynTensor wd = ops::transpose(ops::squeeze(ops::narrow(w, 0, di, 1), 0));  // [I, G*H]
    // Note [Recurrence weight]: R^T is made contiguous once per run (a product by 1 is
    // exact), since the GEMM packs its B operand on every call and a transposed view packs
    // element by element where a row-major one packs row by row.
    DynTensor rd = ops::binary_scalar(
        BinaryFn::Mul, ops::transpose(ops::squeeze(ops::narrow(r, 0, di, 1), 0)), 1.0);  // [H, G*H]
    std::optional<DynTensor> wb, rb;
    if (c.has(3)) {
      DynTensor b = ops::squeeze(ops::narrow(c.at(3), 0, di, 1), 0);
      wb = ops::narrow(b, 0, 0, gates * hidden);
      rb = ops::narrow(b, 0, static_cast<std::int64_t>(gates * hidden), gates * hidden);
      // RNN and LSTM add both biases to every gate: Rb joins X W^T + Wb once. GRU's candidate
      // gate scales Rb's part by the reset gate (linear_before_reset) or adds it after a
      // product, so GRU adds Rb per step.
      if (K != Cell::Gru) {
        wb = add(std::move(*wb), std::move(*rb));
        rb.reset();
      }
    }
    // The state is kept as [1, batch, H] (and a step's gates as [1, batch, G*H]), the shape
    // Y_h and Y take it in, so no step reshapes.
    DynTensor h =
        c.has(5) ? ops::narrow(c.at(5), 0, di, 1) : ops::zeros(Shape{1, batch, hidden}, dt, dev);
    DynTensor cell = (K == Cell::Lstm && c.has(6)) ? ops::narrow(c.at(6), 0, di, 1)
                                                   : ops::zeros(Shape{1, batch, hidden}, dt, dev);
    std::optional<DynTensor> peep;
    if (K == Cell::Lstm && c.has(7)) peep = ops::squeeze(ops::narrow(c.at(7), 0, di, 1), 0);
    const Act* a = &acts[d * dflt.size()];
    // X W^T + Wb for every step at once: [seq, batch, G*H].
    DynTensor xw = ops::matmul(x, wd);
    if (wb) xw = add(std::move(xw), *wb);
    std::vector<DynTensor> out;
    out.reserve(seq);
    // Rows of batch entries still inside their sequence at step t (sequence_lens).
    const auto active = [&](std::size_t t) -> std::optional<DynTensor> {
      if (lens.empty()) return std::nullopt;
      std::vector<std::int64_t> m(batch);
      bool all = true;
      for (std::size_t b = 0; b < batch; ++b) {
        m[b] = static_cast<std::size_t>(lens[b]) > t;
        all = all && m[b];
      }
      if (all) return std::nullopt;
      return ops::cast(ops::from_data(TensorData::from<std::int64_t>(m, Shape{1, batch, 1}), dev),
                       DType::Bool);
    };
    const auto part = [&](const DynTensor& v, std::size_t g, std::size_t n = 1) {
      return ops::narrow(v, 2, static_cast<std::int64_t>(g * hidden), n * hidden);
    };
    for (std::size_t step = 0; step < seq; ++step) {
      const std::size_t t = reverse ? seq - 1 - step : step;
      const auto mask = active(t);
      DynTensor xt = ops::narrow(xw, 0, static_cast<std::int64_t>(t), 1);  // [1, batch, G*H]
      DynTensor hr = ops::matmul(h, rd);
      if (rb) hr = add(std::move(hr), *rb);
      DynTensor hn = h, cn = cell;
      if (K == Cell::Rnn) {
        hn = apply(c, a[0], add(std::move(xt), std::move(hr)));
      } else if (K == Cell::Gru) {  // z, r, h
        DynTensor z = apply(c, a[0], add(part(xt, 0), part(hr, 0)));
        DynTensor rg = apply(c, a[0], add(part(xt, 1), part(hr, 1)));
        DynTensor cand = [&] {
          if (lbr) return apply(c, a[1], add(part(xt, 2), mul(rg, part(hr, 2))));
          DynTensor rh = ops::matmul(
              mul(rg, h), ops::narrow(rd, 1, static_cast<std::int64_t>(2 * hidden), hidden));
          if (rb)
            rh = add(std::move(rh),
                     ops::narrow(*rb, 0, static_cast<std::int64_t>(2 * hidden), hidden));
          return apply(c, a[1], add(part(xt, 2), std::move(rh)));
        }();
        DynTensor one_minus = ops::rbinary_scalar(BinaryFn::Sub, 1.0, z);
        hn = add(mul(std::move(one_minus), std::move(cand)), mul(std::move(z), h));
      } else {  // i, o, f, c
        DynTensor g = add(std::move(xt), std::move(hr));
        DynTensor cc = apply(c, a[1], part(g, 3));
        if (!peep) {
          // i, o and f share their activation: one op over the three gates.
          DynTensor iof = apply(c, a[0], part(g, 0, 3));
          cn = add(mul(part(iof, 2), cell), mul(part(iof, 0), std::move(cc)));
          hn = mul(part(iof, 1), apply(c, a[2], cn));
        } else {
          const auto pp = [&](std::size_t k) {
            return ops::narrow(*peep, 0, static_cast<std::int64_t>(k * hidden), hidden);
          };
          DynTensor i = apply(c, a[0], add(part(g, 0), mul(pp(0), cell)));
          DynTensor f = apply(c, a[0], add(part(g, 2), mul(pp(2), cell)));
          cn = add(mul(std::move(f), cell), mul(std::move(i), std::move(cc)));
          DynTensor o = apply(c, a[0], add(part(g, 1), mul(pp(1), cn)));
          hn = mul(std::move(o), apply(c, a[2], cn));
        }
      }
      if (mask) {  // finished rows keep their state and output zeros
        DynTensor zero = ops::zeros(Shape{}, dt, dev);
        out.push_back(ops::mask_where(*mask, hn, zero));
        h = ops::mask_where(*mask, std::move(hn), h);
        cell = ops::mask_where(*mask, std::move(cn), cell);
      } else {
        out.push_back(hn);
        h = std::move(hn);
        cell = std::move(cn);
      }
    }
    if (reverse) std::reverse(out.begin(), out.end());
    ys.push_back(seq ? ops::cat(std::move(out), 0)
                     : ops::zeros(Shape{0, batch, hidden}, dt, dev));  // [seq, batch, H]
    hs.push_back(h);
    cs.push_back(cell);
  }
  DynTensor y = ops::stack(std::move(ys), 1);  // [seq, dirs, batch, H]
  DynTensor yh = ops::cat(std::move(hs), 0), yc = ops::cat(std::move(cs), 0);
  if (batch_first) {
    y = ops::permute(std::move(y), {2, 0, 1, 3});
    yh = ops::permute(std::move(yh), {1, 0, 2});
    yc = ops::permute(std::move(yc), {1, 0, 2});
  }
  V result{y, yh};
  if (K == Cell::Lstm) result.push_back(yc);
  return result;
}

// Hann, Hamming and Blackman windows of size N (periodic by default).
template <int W>
V window(OpCall& c) {
  const auto n = static_cast<std::int64_t>(host_scalar(c.at(0)));
  c.check(n >= 0, "size must be >= 0");
  const bool periodic = c.node.i("periodic", 1) != 0;
  const double denom = periodic ? double(n) : double(n - 1);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    const double x = 2 * M_PI * double(k) / denom;
    double e = 0;
    if (W == 0) e = 0.5 - 0.5 * std::cos(x);
    if (W == 1) e = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(x);
    if (W == 2) e = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
    v[static_cast<std::size_t>(k)] = e;
  }
  auto dt = dtype_of_onnx_code(c.node.i("output_datatype", 1));
  c.check(dt.has_value(), "unsupported output_datatype");
  return {ops::cast(ops::from_data(TensorData::from<double>(v), c.device), *dt)};
}

}  // namespace

void register_rnn(OpMap& m) {
  m["RNN"] = {recurrent<Cell::Rnn>, true};
  m["GRU"] = {recurrent<Cell::Gru>, true};
  m["LSTM"] = {recurrent<Cell::Lstm>, true};
  m["HannWindow"] = {window<0>, true};
  m["HammingWindow"] = {window<1>, true};
  m["BlackmanWindow"] = {window<2>, true};
}

}  // namespace ember::onnx
