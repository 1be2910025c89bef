// Element-wise kernels: the strided driver that reduces any operand layout (views,
// broadcasts, transposes) to contiguous rows for the ISA-specific row kernels.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/strided.hpp"
#include "ember/base/config.hpp"

namespace ember::cpu {

const ElementwiseTable& elementwise_table() {
  static const ElementwiseTable* table = [] {
    switch (active_isa()) {
#if EMBER_HAS_X86_KERNELS
      case Isa::Avx512:
        return &isa_avx512::elementwise_table();
      case Isa::Avx2:
        return &isa_avx2::elementwise_table();
#else
      case Isa::Avx512:
      case Isa::Avx2:
#endif
      case Isa::Scalar:
        break;
    }
    return &isa_generic::elementwise_table();
  }();
  return *table;
}

// Note [Branch-free select]: the condition is data (a relu's or a pooling's mask), so a
// branch per element mispredicts half the time; the select is on the bits, with no branch,
// in loops the compiler vectorises where the rows are contiguous with a broadcast value on
// one side. The condition's bytes are read as unsigned char (0 or 1, as a bool's): GCC
// vectorises none of these loops over a bool load.
void select_row(const unsigned char* c, std::int64_t cs, const std::byte* a, std::int64_t as,
                const std::byte* b, std::int64_t bs, std::byte* y, std::size_t n,
                std::size_t elem) {
  visit_bytes(elem, [&](auto tag) {
    using T = decltype(tag);
    const T* at = reinterpret_cast<const T*>(a);
    const T* bt = reinterpret_cast<const T*>(b);
    T* yt = reinterpret_cast<T*>(y);
    const auto pick = [](bool k, T a_v, T b_v) {
      const T m = T(T(0) - T(k));
      return T((a_v & m) | (b_v & T(~m)));
    };
    if (cs == 1 && as == 1 && bs == 1) {
      for (std::size_t i = 0; i < n; ++i) yt[i] = pick(c[i] != 0, at[i], bt[i]);
    } else if (cs == 1 && as == 1 && bs == 0) {
      const T bv0 = bt[0];
      for (std::size_t i = 0; i < n; ++i) yt[i] = pick(c[i] != 0, at[i], bv0);
    } else if (cs == 1 && as == 0 && bs == 1) {
      const T av0 = at[0];
      for (std::size_t i = 0; i < n; ++i) yt[i] = pick(c[i] != 0, av0, bt[i]);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const auto ii = static_cast<std::int64_t>(i);
        yt[i] = pick(c[ii * cs] != 0, at[ii * as], bt[ii * bs]);
      }
    }
  });
}

void convert_row(const void* src, DType from, void* dst, DType to, std::size_t n) {
  if (to == DType::F32 && is_half(from)) {
    elementwise_table().half_to_f32[from == DType::BF16 ? 1 : 0](src, dst, n);
  } else if (from == DType::F32 && is_half(to)) {
    elementwise_table().f32_to_half[to == DType::BF16 ? 1 : 0](src, dst, n);
  } else {
    convert_elements(src, from, dst, to, n);
  }
}

namespace {

constexpr std::size_t kRowBlock = 1024;  // strided rows are processed in blocks this long

std::size_t di(DType t) { return static_cast<std::size_t>(t); }

// Copies n strided elements of `elem` bytes into a contiguous buffer.
void gather_row(const std::byte* src, std::int64_t stride, std::size_t n, std::size_t elem,
                std::byte* dst) {
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* s = reinterpret_cast<const T*>(src);
    T* d = reinterpret_cast<T*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = s[static_cast<std::int64_t>(i) * stride];
  };
  visit_bytes(elem, go);
}

// One operand of a row: a pointer to contiguous data, or to one element broadcast.
struct RowOperand {
  const std::byte* ptr;
  bool scalar;
};

// Resolves operand k of a row: contiguous and broadcast rows are used in place; other
// strides are gathered into `scratch`.
RowOperand row_operand(const std::byte* base, std::int64_t off, std::int64_t stride, std::size_t n,
                       std::size_t elem, std::vector<std::byte>& scratch) {
  const std::byte* p = base + off * static_cast<std::int64_t>(elem);
  if (stride == 1) return {p, false};
  if (stride == 0) return {p, true};
  scratch.resize(n * elem);
  gather_row(p, stride, n, elem, scratch.data());
  return {scratch.data(), false};
}

// Below this many elements an op runs on the calling thread (as StridedSpace::for_each_row
// decides), and when every input either walks the output linearly or is one broadcast
// element the driver needs no iteration space: a small op allocates nothing here.
constexpr std::size_t kSerial = std::size_t{1} << 15;

// Iterates out (contiguous, fresh or reused, of `shape`) against inputs of the same rank,
// broadcast to `shape` (stride 0 on broadcast dims), row by row in blocks: f(offsets,
// inner strides, length), offsets in elements from each tensor's data().
template <std::size_t N, class F>
void for_each_block(const Shape& shape, const std::array<const CpuTensor*, N>& ins,
                    const CpuTensor& out, F&& f) {
  const std::size_t total = shape.num_elements();
  if (total == 0) return;
  std::array<std::int64_t, N> inner{};
  if (total < kSerial) {
    bool linear = true;
    for (std::size_t k = 0; k < N && linear; ++k) {
      const backend::Walk w = backend::walk_of(ins[k]->shape(), ins[k]->strides(), shape);
      linear = w != backend::Walk::Strided;
      inner[k] = w == backend::Walk::Linear ? 1 : 0;
    }
    if (linear) {
      for (std::size_t b = 0; b < total; b += kRowBlock) {
        std::array<std::int64_t, N + 1> o{};
        for (std::size_t k = 0; k < N; ++k) o[k] = static_cast<std::int64_t>(b) * inner[k];
        o[N] = static_cast<std::int64_t>(b);
        f(o, inner, std::min(kRowBlock, total - b));
      }
      return;
    }
  }
  StridedSpace<N + 1> sp;
  sp.shape = shape.dims();
  for (std::size_t k = 0; k < N; ++k) {
    sp.strides[k] = backend::broadcast_strides(ins[k]->shape(), ins[k]->strides(), shape);
  }
  sp.strides[N] = out.strides();
  sp.collapse();
  for (std::size_t k = 0; k < N; ++k) inner[k] = sp.strides[k].back();
  EMBER_ASSERT(sp.strides[N].back() == 1);
  sp.for_each_row([&](const std::array<std::int64_t, N + 1>& off, std::size_t n) {
    for (std::size_t b = 0; b < n; b += kRowBlock) {
      const std::size_t len = std::min(kRowBlock, n - b);
      std::array<std::int64_t, N + 1> o = off;
      for (std::size_t k = 0; k < N; ++k) o[k] += static_cast<std::int64_t>(b) * inner[k];
      o[N] += static_cast<std::int64_t>(b);
      f(o, inner, len);
    }
  });
}

}  // namespace

ir::Handle run(CpuContext& ctx, ir::Unary& op) {
  const auto& x = as_cpu(op.x);
  const UnaryRow row = elementwise_table().unary[static_cast<std::size_t>(op.fn)][di(x.dtype())];
  EMBER_ASSERT(row != nullptr);
  double p0 = op.p0, p1 = op.p1;
  const std::size_t elem = size_of(x.dtype());
  auto out = output_for(ctx, op.x, x.shape(), op.out);
  const std::size_t out_elem = size_of(op.out);
  std::byte* y = out->data();
  for_each_block<1>(x.shape(), {&x}, *out, [&](const auto& off, const auto& inner, std::size_t n) {
    static EMBER_THREAD_LOCAL std::vector<std::byte> scratch;
    RowOperand a = row_operand(x.data(), off[0], inner[0], n, elem, scratch);
    if (a.scalar) {  // a broadcast input: expand the one element across the row
      scratch.resize(n * elem);
      for (std::size_t i = 0; i < n; ++i) std::memcpy(scratch.data() + i * elem, a.ptr, elem);
      a.ptr = scratch.data();
    }
    row(a.ptr, y + off[1] * static_cast<std::int64_t>(out_elem), n, p0, p1);
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Binary& op) {
  const auto& a = as_cpu(op.lhs);
  const auto& b = as_cpu(op.rhs);
  const DType dt = a.dtype();
  EMBER_ASSERT(b.dtype() == dt);
  if ((op.fn == ir::BinaryFn::Div || op.fn == ir::BinaryFn::Rem) && is_int(dt)) {
    // Integer division by zero has no value: reject it, as PyTorch does.
    auto bc = contiguous(ctx, op.rhs);
    std::vector<std::int64_t> vals(bc->shape().num_elements());
    convert_elements(bc->data(), dt, vals.data(), DType::I64, vals.size());
    for (std::int64_t v : vals) {
      EMBER_CHECK(v != 0, std::string(ir::name(op.fn)) + ": integer division by zero");
    }
  }
  const BinaryRow row = elementwise_table().binary[static_cast<std::size_t>(op.fn)][di(dt)];
  EMBER_ASSERT(row != nullptr);
  std::shared_ptr<CpuTensor> out;
  if (reusable(op.lhs, op.out_shape, op.out)) {
    out = output_for(ctx, op.lhs, op.out_shape, op.out);
  } else {
    out = output_for(ctx, op.rhs, op.out_shape, op.out);
  }
  const std::size_t elem = size_of(dt), out_elem = size_of(op.out);
  std::byte* y = out->data();
  // Operands broadcast to the output's shape by the driver (stride 0 on broadcast dims).
  for_each_block<2>(op.out_shape, {&a, &b}, *out,
                    [&](const auto& off, const auto& inner, std::size_t n) {
                      static EMBER_THREAD_LOCAL std::vector<std::byte> sa, sb;
                      RowOperand ra = row_operand(a.data(), off[0], inner[0], n, elem, sa);
                      RowOperand rb = row_operand(b.data(), off[1], inner[1], n, elem, sb);
                      if (ra.scalar && rb.scalar) {
                        sa.resize(n * elem);
                        for (std::size_t i = 0; i < n; ++i) {
                          std::memcpy(sa.data() + i * elem, ra.ptr, elem);
                        }
                        ra = {sa.data(), false};
                      }
                      row(ra.ptr, rb.ptr, y + off[2] * static_cast<std::int64_t>(out_elem), n,
                          ra.scalar, rb.scalar);
                    });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Where& op) {
  const auto& c = as_cpu(op.cond);
  const auto& a = as_cpu(op.a);
  const auto& b = as_cpu(op.b);
  const DType dt = a.dtype();
  const std::size_t elem = size_of(dt);
  auto out = reusable(op.b, op.out_shape, dt) ? output_for(ctx, op.b, op.out_shape, dt)
                                              : output_for(ctx, op.a, op.out_shape, dt);
  std::byte* y = out->data();
  for_each_block<3>(op.out_shape, {&c, &a, &b}, *out,
                    [&](const auto& off, const auto& inner, std::size_t n) {
                      const bool* cp = reinterpret_cast<const bool*>(c.data()) + off[0];
                      const std::byte* ap = a.data() + off[1] * static_cast<std::int64_t>(elem);
                      const std::byte* bp = b.data() + off[2] * static_cast<std::int64_t>(elem);
                      std::byte* yp = y + off[3] * static_cast<std::int64_t>(elem);
                      select_row(reinterpret_cast<const unsigned char*>(cp), inner[0], ap, inner[1],
                                 bp, inner[2], yp, n, elem);
                    });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Cast& op) {
  const auto& x = as_cpu(op.x);
  auto out = ctx.empty(x.shape(), op.to);
  const std::size_t elem = size_of(x.dtype()), out_elem = size_of(op.to);
  std::byte* y = out->data();
  for_each_block<1>(x.shape(), {&x}, *out, [&](const auto& off, const auto& inner, std::size_t n) {
    static EMBER_THREAD_LOCAL std::vector<std::byte> scratch;
    RowOperand a = row_operand(x.data(), off[0], inner[0], n, elem, scratch);
    std::byte* yp = y + off[1] * static_cast<std::int64_t>(out_elem);
    if (a.scalar) {
      convert_elements(a.ptr, x.dtype(), yp, op.to, 1);
      for (std::size_t i = 1; i < n; ++i) std::memcpy(yp + i * out_elem, yp, out_elem);
    } else {
      convert_row(a.ptr, x.dtype(), yp, op.to, n);
    }
  });
  return out;
}

}  // namespace ember::cpu
