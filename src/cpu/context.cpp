#include "cpu/context.hpp"

#include <cstring>
#include <new>
#include <string>

#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/strided.hpp"
#include "ember/backend/strided_view.hpp"
#include "ember/base/checked.hpp"

namespace ember::cpu {

EMBER_THREAD_LOCAL const char* CpuContext::current_op = "cpu";

std::shared_ptr<CpuTensor> CpuContext::empty(const Shape& shape, DType dtype) {
  const std::size_t bytes = std::max<std::size_t>(1, checked_bytes(shape, dtype, current_op));
  if (auto why = allocator.refusal(bytes)) {
    fail(std::string(current_op) + ": the output " + shape.to_string() + " of " + name(dtype) +
         " cannot be allocated (" + *why + ")");
  }
  std::shared_ptr<Buffer> buf = ember::detail::catch_std<ember::detail::OnError::Handle>(
      [&] { return std::make_shared<Buffer>(allocator, bytes); },
      [&](const char* what, bool out_of_memory) {
        if (out_of_memory) {
          fail(std::string(current_op) + ": out of memory allocating the output " +
               shape.to_string() + " of " + name(dtype));
        }
        fail(std::string(current_op) + ": the output " + shape.to_string() + " of " + name(dtype) +
             " cannot be allocated (" + what + ")");
      });
  return std::make_shared<CpuTensor>(std::move(buf), shape, dtype, contiguous_strides(shape), 0);
}

void copy_strided(const Shape& shape, std::size_t elem, const std::byte* src,
                  const std::int64_t* src_strides, std::byte* dst,
                  const std::int64_t* dst_strides) {
  if (shape.num_elements() == 0) return;
  StridedSpace<2> sp;
  sp.shape = shape.dims();
  sp.strides[0].assign(src_strides, src_strides + shape.rank());
  sp.strides[1].assign(dst_strides, dst_strides + shape.rank());
  sp.collapse();
  const std::int64_t ss = sp.strides[0].back(), ds = sp.strides[1].back();
  const auto e = static_cast<std::int64_t>(elem);
  sp.for_each_row([&](const std::array<std::int64_t, 2>& off, std::size_t n) {
    const std::byte* s = src + off[0] * e;
    std::byte* d = dst + off[1] * e;
    if (ss == 1 && ds == 1) {
      std::memcpy(d, s, n * elem);
      return;
    }
    const auto copy = [&](auto tag) {
      using T = decltype(tag);
      const T* sp_ = reinterpret_cast<const T*>(s);
      T* dp = reinterpret_cast<T*>(d);
      for (std::size_t i = 0; i < n; ++i) {
        dp[static_cast<std::int64_t>(i) * ds] = sp_[static_cast<std::int64_t>(i) * ss];
      }
    };
    visit_bytes(elem, copy);
  });
}

void copy_strided(const CpuTensor& src, const CpuTensor& dst) {
  EMBER_ASSERT(src.shape() == dst.shape() && src.dtype() == dst.dtype());
  copy_strided(src.shape(), size_of(src.dtype()), src.data(), src.strides().data(), dst.data(),
               dst.strides().data());
}

std::shared_ptr<const CpuTensor> contiguous(CpuContext& ctx, const ir::Handle& x) {
  auto cx = std::static_pointer_cast<const CpuTensor>(x);
  if (cx->is_contiguous()) return cx;
  auto out = ctx.empty(cx->shape(), cx->dtype());
  copy_strided(*cx, *out);
  return out;
}

std::shared_ptr<CpuTensor> output_for(CpuContext& ctx, const ir::Handle& x, const Shape& shape,
                                      DType dtype) {
  if (reusable(x, shape, dtype)) {
    return std::const_pointer_cast<CpuTensor>(std::static_pointer_cast<const CpuTensor>(x));
  }
  return ctx.empty(shape, dtype);
}

std::shared_ptr<CpuTensor> writable_copy(CpuContext& ctx, const ir::Handle& x) {
  const auto& c = as_cpu(x);
  if (reusable(x, c.shape(), c.dtype())) return output_for(ctx, x, c.shape(), c.dtype());
  auto out = ctx.empty(c.shape(), c.dtype());
  copy_strided(c, *out);
  return out;
}

}  // namespace ember::cpu
