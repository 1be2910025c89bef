// Reductions along one dim, and inclusive scans. The input is made contiguous and viewed as
// [outer, n, inner]: with inner == 1 each output reduces a contiguous row (several
// accumulators so the loop vectorizes); otherwise whole inner rows are combined at once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu/kernels/combine.hpp"
#include "cpu/kernels/dtype_dispatch.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/strided_view.hpp"

namespace ember::cpu {
namespace {

using ir::ReduceFn;

using Dims3 = backend::DimSplit<std::size_t>;
using backend::split_at;

// One contiguous row. Floats use sixteen accumulators so the loop vectorizes without
// reassociating one sum; integer combining is associative, so a plain loop vectorizes (the
// sixteen-accumulator form was miscompiled by GCC 12 for i8 rows of 256k elements).
template <ReduceFn F, class T>
T reduce_row(const T* row, std::size_t n) {
  using C = Combine<F, T>;
  if constexpr (std::is_integral_v<T>) {
    T r = C::init();
    for (std::size_t i = 0; i < n; ++i) r = C::apply(r, row[i]);
    return r;
  } else {
    constexpr std::size_t L = 16;
    T acc[L];
    for (std::size_t j = 0; j < L; ++j) acc[j] = C::init();
    std::size_t i = 0;
    for (; i + L <= n; i += L) {
      for (std::size_t j = 0; j < L; ++j) acc[j] = C::apply(acc[j], row[i + j]);
    }
    T r = C::init();
    for (std::size_t j = 0; j < L; ++j) r = C::apply(r, acc[j]);
    for (; i < n; ++i) r = C::apply(r, row[i]);
    return r;
  }
}

// The ISA-compiled row kernel for float sums, maxima and minima (elementwise_rows.inc),
// or null where the generic loop above serves.
template <ReduceFn F, class T>
ReduceRows row_kernel() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr RowReduce f = F == ReduceFn::Max   ? RowReduce::Max
                            : F == ReduceFn::Min ? RowReduce::Min
                                                 : RowReduce::Sum;
    if constexpr (F == ReduceFn::Sum || F == ReduceFn::Mean || F == ReduceFn::Max ||
                  F == ReduceFn::Min) {
      return elementwise_table()
          .reduce_rows[static_cast<std::size_t>(f)][static_cast<std::size_t>(dtype_of<T>())];
    }
  }
  return nullptr;
}

// Reduces `rows` contiguous rows of n elements into y[0, rows).
template <ReduceFn F, class T>
void reduce_rows(const T* x, T* y, std::size_t n, std::size_t rows) {
  if (const ReduceRows k = row_kernel<F, T>()) return k(x, y, n, rows);
  for (std::size_t r = 0; r < rows; ++r) y[r] = reduce_row<F>(x + r * n, n);
}

// Note [Chunked rows]: rows of at least two chunks of this many elements are reduced chunk by
// chunk (the chunks of every row in parallel, so a full reduction, one row, keeps every
// thread busy), and each row's chunk results are then combined in order. Which rows are
// chunked, and where, depends on the row length alone — never on the thread count or the
// number of rows — so a result does not depend on EMBER_NUM_THREADS.
constexpr std::size_t kRowChunk = std::size_t(1) << 16;
bool chunked_rows(std::size_t n) { return n >= 2 * kRowChunk; }

// One chunk of a chunked row reduced (a Mean's chunk gives its sum).
template <ReduceFn F, class T>
T chunk_part(const T* x, std::size_t len) {
  T part;
  reduce_rows<F>(x, &part, len, 1);
  return part;
}

// A chunked row's parts combined in order.
template <ReduceFn F, class T>
T fold_parts(const T* parts, std::size_t chunks) {
  using C = Combine<F, T>;
  T r = C::init();
  for (std::size_t c = 0; c < chunks; ++c) r = C::apply(r, parts[c]);
  return r;
}

// Rows (inner == 1) of chunked_rows' length (Note [Chunked rows]): every row's chunks over
// the threads, each reduced to its part (part_of(chunk, length)), then y[o] = fold(row o's
// parts, their count) in chunk order.
template <class P, class T, class Y, class PartOf, class Fold>
void reduce_in_chunks(const T* x, Y* y, Dims3 d, PartOf part_of, Fold fold) {
  const std::size_t chunks = (d.n + kRowChunk - 1) / kRowChunk;
  std::vector<P> part(d.outer * chunks);
  parallel_for(0, d.outer * chunks, 1, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      const std::size_t o = i / chunks, c = i % chunks;
      part[i] = part_of(x + o * d.n + c * kRowChunk, std::min(kRowChunk, d.n - c * kRowChunk));
    }
  });
  for (std::size_t o = 0; o < d.outer; ++o) y[o] = fold(part.data() + o * chunks, chunks);
}

// Note [Chunked columns]: a reduction over a dim with others after it (inner > 1: a sum over
// dim 0) split the inner columns over the threads where there were few outer blocks: each
// thread read its share of every row, a run then a jump (two threads: 8 KiB on, 8 KiB off),
// which the prefetchers follow poorly — a sum over dim 0 of [8192, 4096] read 20 GB/s, a
// third of a row sum's rate. Where the reduced dim has at least two chunks of whole rows
// (kColumnChunk elements each, at least 8 rows), each chunk's columns are combined row
// after row into a part, the chunks spread over the threads (each a contiguous stream),
// and the parts folded in chunk order. Which reductions are chunked, and where, depends on
// the shape alone — never on the thread count — so a result does not depend on
// EMBER_NUM_THREADS; the rest combine row after row as before.
constexpr std::size_t kColumnChunk = std::size_t(1) << 20;
std::size_t column_chunk_rows(Dims3 d) {
  const std::size_t rows = kColumnChunk / std::max<std::size_t>(d.inner, 1);
  return d.inner > 1 && rows >= 8 && d.n >= 2 * rows ? rows : 0;
}

// out[j] for j < width: the rows r < count (row r at base + r * stride) combined in order.
template <ReduceFn F, class T>
void combine_rows(const T* base, std::size_t stride, std::size_t width, std::size_t count, T* out) {
  using C = Combine<F, T>;
  for (std::size_t j = 0; j < width; ++j) out[j] = C::init();
  for (std::size_t r = 0; r < count; ++r) {
    const T* row = base + r * stride;
    for (std::size_t j = 0; j < width; ++j) out[j] = C::apply(out[j], row[j]);
  }
}

// Note [Chunked columns]'s walk: part(i, o, r0, r1) for chunk i = o * chunks + c (rows
// [r0, r1) of outer block o) over the threads, then fold(o) for every outer block.
template <class Part, class Fold>
void over_column_chunks(Dims3 d, std::size_t rows, std::size_t chunks, Part part, Fold fold) {
  parallel_for(0, d.outer * chunks, 1, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      const std::size_t o = i / chunks, r0 = i % chunks * rows;
      part(i, o, r0, std::min(d.n, r0 + rows));
    }
  });
  parallel_for(0, d.outer, 1, [&](std::size_t o0, std::size_t o1) {
    for (std::size_t o = o0; o < o1; ++o) fold(o);
  });
}

template <ReduceFn F, class T>
void reduce_columns_in_chunks(const T* x, T* y, Dims3 d, std::size_t rows) {
  const std::size_t chunks = (d.n + rows - 1) / rows;
  std::vector<T> part(d.outer * chunks * d.inner);
  over_column_chunks(
      d, rows, chunks,
      [&](std::size_t i, std::size_t o, std::size_t r0, std::size_t r1) {
        combine_rows<F>(x + (o * d.n + r0) * d.inner, d.inner, d.inner, r1 - r0,
                        part.data() + i * d.inner);
      },
      [&](std::size_t o) {
        combine_rows<F>(part.data() + o * chunks * d.inner, d.inner, d.inner, chunks,
                        y + o * d.inner);
      });
}

template <ReduceFn F, class T>
void reduce_values(const T* x, T* y, Dims3 d) {
  // Only how the work is split across threads depends on this, not the order of combining.
  const bool few_outer = d.outer < num_threads();
  if (d.inner == 1 && chunked_rows(d.n)) {
    reduce_in_chunks<T>(x, y, d, chunk_part<F, T>, fold_parts<F, T>);
  } else if (const std::size_t rows = column_chunk_rows(d)) {
    reduce_columns_in_chunks<F>(x, y, d, rows);
  } else if (d.inner == 1) {
    parallel_for(0, d.outer, std::max<std::size_t>(1, 32768 / std::max<std::size_t>(d.n, 1)),
                 [&](std::size_t o0, std::size_t o1) {
                   reduce_rows<F>(x + o0 * d.n, y + o0, d.n, o1 - o0);
                 });
  } else if (few_outer && d.inner * d.n >= 32768) {
    // Few outer blocks (e.g. a reduction over dim 0): split the inner columns instead.
    for (std::size_t o = 0; o < d.outer; ++o) {
      const std::size_t grain = std::max<std::size_t>(16, 32768 / std::max<std::size_t>(d.n, 1));
      parallel_for(0, d.inner, grain, [&](std::size_t j0, std::size_t j1) {
        combine_rows<F>(x + o * d.n * d.inner + j0, d.inner, j1 - j0, d.n, y + o * d.inner + j0);
      });
    }
  } else {
    const std::size_t grain =
        std::max<std::size_t>(1, 32768 / std::max<std::size_t>(d.n * d.inner, 1));
    parallel_for(0, d.outer, grain, [&](std::size_t o0, std::size_t o1) {
      for (std::size_t o = o0; o < o1; ++o)
        combine_rows<F>(x + o * d.n * d.inner, d.inner, d.inner, d.n, y + o * d.inner);
    });
  }
  if constexpr (F == ReduceFn::Mean) {
    const std::size_t m = d.outer * d.inner;
    if constexpr (std::is_floating_point_v<T>) {
      const T inv = d.n == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / static_cast<T>(d.n);
      for (std::size_t i = 0; i < m; ++i) y[i] = d.n == 0 ? inv : y[i] * inv;
    } else {
      // Divide in i64: the count does not fit small int types (165 as i8 is -91).
      for (std::size_t i = 0; i < m; ++i) {
        y[i] =
            d.n == 0
                ? T(0)
                : static_cast<T>(static_cast<std::int64_t>(y[i]) / static_cast<std::int64_t>(d.n));
      }
    }
  }
}

// Index of the first max (ArgMax) or min of one contiguous row of n > 0 elements, in two
// vectorized passes: the extreme value, then its first position; a NaN counts as the
// extreme, as PyTorch.
template <bool Max, class T>
std::int64_t arg_row(const T* row, std::size_t n) {
  using C = Combine<Max ? ReduceFn::Max : ReduceFn::Min, T>;
  constexpr std::size_t L = 16;
  T acc[L];
  for (std::size_t j = 0; j < L; ++j) acc[j] = row[0];
  std::size_t i = 0;
  for (; i + L <= n; i += L) {
    for (std::size_t j = 0; j < L; ++j) acc[j] = C::apply(acc[j], row[i + j]);
  }
  T m = row[0];
  for (std::size_t j = 0; j < L; ++j) m = C::apply(m, acc[j]);
  for (; i < n; ++i) m = C::apply(m, row[i]);
  std::size_t at = 0;
  if (m == m) {
    while (row[at] != m) ++at;
  } else {
    while (row[at] == row[at]) ++at;  // the first NaN
  }
  return static_cast<std::int64_t>(at);
}

bool is_arg(ReduceFn fn) { return fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin; }

// Whether a replaces best as the running extreme of an arg reduction: strictly past it (so
// the first of equal values stays), or the first NaN (a NaN counts as the extreme).
template <bool Max, class T>
bool arg_better(T a, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    return best == best && (a != a || (Max ? a > best : a < best));
  } else {
    return Max ? a > best : a < best;
  }
}

// A chunk's part of an arg reduction (Note [Chunked rows]): its extreme value and that
// value's first index in the chunk. Folded in chunk order by arg_better, the parts give the
// row's first extreme exactly: the chunks before the first one holding it hold only values
// short of it, and that chunk's own part is its first occurrence.
template <class T>
struct ArgPart {
  T value;
  std::int64_t at;
};
static_assert(sizeof(ArgPart<float>) == sizeof(ArgPart<double>) &&
              sizeof(ArgPart<std::int32_t>) == sizeof(ArgPart<double>));
template <bool Max, class T>
ArgPart<T> arg_chunk(const T* x, std::size_t len) {
  const std::int64_t at = arg_row<Max>(x, len);
  return {x[at], at};
}
template <bool Max, class T>
std::int64_t fold_arg_parts(const ArgPart<T>* parts, std::size_t chunks) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < chunks; ++c) {
    if (arg_better<Max>(parts[c].value, parts[best].value)) best = c;
  }
  return static_cast<std::int64_t>(best * kRowChunk) + parts[best].at;
}

// The columns of rows [r0, r1) of one outer block: each inner position's best value and the
// first row holding it, walking the rows in order (best and idx hold row r0's on entry).
template <bool Max, class T>
void arg_columns(const T* base, std::size_t inner, std::size_t r0, std::size_t r1, T* best,
                 std::int64_t* idx) {
  for (std::size_t r = r0 + 1; r < r1; ++r) {
    const T* row = base + r * inner;
    for (std::size_t j = 0; j < inner; ++j) {
      const bool b = arg_better<Max, T>(row[j], best[j]);
      best[j] = b ? row[j] : best[j];
      idx[j] = b ? static_cast<std::int64_t>(r) : idx[j];
    }
  }
}

// ArgMax / ArgMin: rows (inner == 1) by arg_row, long rows in chunks over the threads
// (Note [Chunked rows]); columns keep running best values and indices per inner position,
// so each input row is read once, contiguously — in the chunks of whole rows of Note
// [Chunked columns] over the threads where the reduced dim has them (folded in chunk order
// by arg_better, the first extreme as a walk finds it).
template <bool Max, class T>
void arg_reduce(const T* x, std::int64_t* y, Dims3 d) {
  if (d.inner == 1 && chunked_rows(d.n)) {
    reduce_in_chunks<ArgPart<T>>(x, y, d, arg_chunk<Max, T>, fold_arg_parts<Max, T>);
    return;
  }
  if (const std::size_t rows = column_chunk_rows(d)) {
    const std::size_t chunks = (d.n + rows - 1) / rows, parts = d.outer * chunks * d.inner;
    // (Arrays, not vectors: T may be bool.)
    const std::unique_ptr<T[]> best(new T[parts]);
    const std::unique_ptr<std::int64_t[]> idx(new std::int64_t[parts]);
    over_column_chunks(
        d, rows, chunks,
        [&](std::size_t i, std::size_t o, std::size_t r0, std::size_t r1) {
          const T* base = x + o * d.n * d.inner;
          T* b = best.get() + i * d.inner;
          std::int64_t* at = idx.get() + i * d.inner;
          std::copy_n(base + r0 * d.inner, d.inner, b);
          std::fill_n(at, d.inner, static_cast<std::int64_t>(r0));
          arg_columns<Max>(base, d.inner, r0, r1, b, at);
        },
        [&](std::size_t o) {
          // Chunk 0's extremes, then each later chunk's where strictly better (the first
          // extreme stays), written over them in best's and idx's own rows.
          T* top = best.get() + o * chunks * d.inner;
          std::int64_t* at = idx.get() + o * chunks * d.inner;
          for (std::size_t c = 1; c < chunks; ++c) {
            const std::size_t k = c * d.inner;
            for (std::size_t j = 0; j < d.inner; ++j) {
              if (arg_better<Max, T>(top[k + j], top[j])) {
                top[j] = top[k + j];
                at[j] = at[k + j];
              }
            }
          }
          std::copy_n(at, d.inner, y + o * d.inner);
        });
    return;
  }
  if (d.inner == 1) {
    parallel_for(0, d.outer, std::max<std::size_t>(1, 32768 / std::max<std::size_t>(d.n, 1)),
                 [&](std::size_t o0, std::size_t o1) {
                   for (std::size_t o = o0; o < o1; ++o) y[o] = arg_row<Max>(x + o * d.n, d.n);
                 });
    return;
  }
  parallel_for(0, d.outer, 1, [&](std::size_t o0, std::size_t o1) {
    const std::unique_ptr<T[]> best(new T[d.inner]);
    for (std::size_t o = o0; o < o1; ++o) {
      const T* base = x + o * d.n * d.inner;
      std::int64_t* idx = y + o * d.inner;
      for (std::size_t j = 0; j < d.inner; ++j) {
        best[j] = base[j];
        idx[j] = 0;
      }
      arg_columns<Max>(base, d.inner, 0, d.n, best.get(), idx);
    }
  });
}

template <bool All, class T>
void bool_reduce(const T* x, bool* y, Dims3 d) {
  for (std::size_t i = 0; i < d.outer * d.inner; ++i) {
    const std::size_t o = i / d.inner, j = i % d.inner;
    bool acc = All;
    for (std::size_t r = 0; r < d.n; ++r) {
      const bool nz = x[(o * d.n + r) * d.inner + j] != T(0);
      acc = All ? (acc && nz) : (acc || nz);
    }
    y[i] = acc;
  }
}

// A row's result from its reduction r over n elements (a Mean's sum divided by n).
template <ReduceFn F, class T>
T finished(T r, std::size_t n) {
  if constexpr (F == ReduceFn::Mean) {
    if constexpr (std::is_floating_point_v<T>) {
      const T inv = n == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / static_cast<T>(n);
      r = n == 0 ? inv : r * inv;
    } else {
      r = n == 0 ? T(0)
                 : static_cast<T>(static_cast<std::int64_t>(r) / static_cast<std::int64_t>(n));
    }
  }
  return r;
}

// One row of reduce_values<F> with inner == 1: the same chunks combined in the same order.
template <ReduceFn F, class T>
T reduce_values_row(const T* row, std::size_t n) {
  if (chunked_rows(n)) {  // Note [Chunked rows]
    using C = Combine<F, T>;
    T r = C::init();
    for (std::size_t c = 0; c * kRowChunk < n; ++c)
      r = C::apply(r, chunk_part<F>(row + c * kRowChunk, std::min(kRowChunk, n - c * kRowChunk)));
    return finished<F>(r, n);
  }
  T r;
  reduce_rows<F>(row, &r, n, 1);
  return finished<F>(r, n);
}

// Calls f(tag) with F the value reduction fn names (Sum, Mean, Max, Min).
template <class G>
void visit_value_fn(ReduceFn fn, G&& g) {
  switch (fn) {
    case ReduceFn::Sum:
      return g(std::integral_constant<ReduceFn, ReduceFn::Sum>{});
    case ReduceFn::Mean:
      return g(std::integral_constant<ReduceFn, ReduceFn::Mean>{});
    case ReduceFn::Max:
      return g(std::integral_constant<ReduceFn, ReduceFn::Max>{});
    case ReduceFn::Min:
      return g(std::integral_constant<ReduceFn, ReduceFn::Min>{});
    default:
      EMBER_ASSERT(false);
  }
}

}  // namespace

bool reduces_rows(ReduceFn fn, DType dt) {
  const bool fn_ok = fn == ReduceFn::Sum || fn == ReduceFn::Mean || fn == ReduceFn::Max ||
                     fn == ReduceFn::Min || fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin;
  const bool dt_ok = dt == DType::F32 || dt == DType::F64 || dt == DType::F16 ||
                     dt == DType::BF16 || dt == DType::I32 || dt == DType::I64;
  return fn_ok && dt_ok;
}

void reduce_row(ReduceFn fn, DType dt, const void* row, std::size_t n, void* y) {
  EMBER_ASSERT(reduces_rows(fn, dt) && !is_half(dt));
  visit_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* x = static_cast<const T*>(row);
      switch (fn) {
        case ReduceFn::Sum:
          *static_cast<T*>(y) = reduce_values_row<ReduceFn::Sum>(x, n);
          return;
        case ReduceFn::Mean:
          *static_cast<T*>(y) = reduce_values_row<ReduceFn::Mean>(x, n);
          return;
        case ReduceFn::Max:
          *static_cast<T*>(y) = reduce_values_row<ReduceFn::Max>(x, n);
          return;
        case ReduceFn::Min:
          *static_cast<T*>(y) = reduce_values_row<ReduceFn::Min>(x, n);
          return;
        case ReduceFn::ArgMax:
          *static_cast<std::int64_t*>(y) = arg_row<true>(x, n);
          return;
        case ReduceFn::ArgMin:
          *static_cast<std::int64_t*>(y) = arg_row<false>(x, n);
          return;
        default:
          EMBER_ASSERT(false);
      }
    }
  });
}

std::size_t reduce_row_chunk(ReduceFn fn, std::size_t n) {
  return reduces_rows(fn, DType::F32) && chunked_rows(n) ? kRowChunk : 0;
}

std::size_t reduce_part_bytes(ReduceFn fn, DType dt) {
  return is_arg(fn) ? sizeof(ArgPart<double>) : size_of(dt);
}

void reduce_chunk(ReduceFn fn, DType dt, const void* x, std::size_t len, void* part) {
  EMBER_ASSERT(reduces_rows(fn, dt) && !is_half(dt));
  visit_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* xp = static_cast<const T*>(x);
      if (is_arg(fn)) {
        const ArgPart<T> a =
            fn == ReduceFn::ArgMax ? arg_chunk<true>(xp, len) : arg_chunk<false>(xp, len);
        std::memcpy(part, &a, sizeof a);
        return;
      }
      visit_value_fn(
          fn, [&](auto f) { *static_cast<T*>(part) = chunk_part<decltype(f)::value>(xp, len); });
    }
  });
}

void reduce_chunks(ReduceFn fn, DType dt, const void* parts, std::size_t chunks, std::size_t n,
                   void* y) {
  EMBER_ASSERT(reduces_rows(fn, dt) && !is_half(dt));
  visit_numeric(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      if (is_arg(fn)) {
        std::vector<ArgPart<T>> a(chunks);
        std::memcpy(a.data(), parts, chunks * sizeof(ArgPart<T>));
        *static_cast<std::int64_t*>(y) = fn == ReduceFn::ArgMax
                                             ? fold_arg_parts<true>(a.data(), chunks)
                                             : fold_arg_parts<false>(a.data(), chunks);
        return;
      }
      visit_value_fn(fn, [&](auto f) {
        constexpr ReduceFn F = decltype(f)::value;
        *static_cast<T*>(y) = finished<F>(fold_parts<F>(static_cast<const T*>(parts), chunks), n);
      });
    }
  });
}

ir::Handle run(CpuContext& ctx, ir::Reduce& op) {
  auto out = ctx.empty(ir::out_shape(op), ir::out_dtype(op));
  auto x = contiguous(ctx, op.x);
  const Dims3 d = split_at(x->shape(), op.dim);
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x->data_as<const T>();
    switch (op.fn) {
      case ReduceFn::ArgMax:
        arg_reduce<true>(xp, out->data_as<std::int64_t>(), d);
        return;
      case ReduceFn::ArgMin:
        arg_reduce<false>(xp, out->data_as<std::int64_t>(), d);
        return;
      case ReduceFn::Any:
        bool_reduce<false>(xp, out->data_as<bool>(), d);
        return;
      case ReduceFn::All:
        bool_reduce<true>(xp, out->data_as<bool>(), d);
        return;
      default:
        break;
    }
    if constexpr (!std::is_same_v<T, bool>) {
      T* yp = out->data_as<T>();
      switch (op.fn) {
        case ReduceFn::Sum:
          reduce_values<ReduceFn::Sum>(xp, yp, d);
          break;
        case ReduceFn::Mean:
          reduce_values<ReduceFn::Mean>(xp, yp, d);
          break;
        case ReduceFn::Prod:
          reduce_values<ReduceFn::Prod>(xp, yp, d);
          break;
        case ReduceFn::Max:
          reduce_values<ReduceFn::Max>(xp, yp, d);
          break;
        case ReduceFn::Min:
          reduce_values<ReduceFn::Min>(xp, yp, d);
          break;
        default:
          EMBER_ASSERT(false);
      }
    } else {
      fail(std::string(ir::name(op.fn)) + ": not defined for bool tensors");
    }
  });
  return out;
}

ir::Handle run(CpuContext& ctx, ir::Scan& op) {
  auto x = contiguous(ctx, op.x);
  auto out = ctx.empty(x->shape(), x->dtype());
  const Dims3 d = split_at(x->shape(), op.dim);
  visit_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* xp = x->data_as<const T>();
      T* yp = out->data_as<T>();
      const auto run = [&](auto combine) {
        parallel_for(0, d.outer, 1, [&](std::size_t o0, std::size_t o1) {
          for (std::size_t o = o0; o < o1; ++o) {
            const T* xo = xp + o * d.n * d.inner;
            T* yo = yp + o * d.n * d.inner;
            for (std::size_t j = 0; j < d.inner && d.n > 0; ++j) yo[j] = xo[j];
            for (std::size_t r = 1; r < d.n; ++r) {
              for (std::size_t j = 0; j < d.inner; ++j) {
                yo[r * d.inner + j] = combine(yo[(r - 1) * d.inner + j], xo[r * d.inner + j]);
              }
            }
          }
        });
      };
      switch (op.fn) {
        case ir::ScanFn::Sum:
          run([](T a, T b) { return Combine<ReduceFn::Sum, T>::apply(a, b); });
          break;
        case ir::ScanFn::Prod:
          run([](T a, T b) { return Combine<ReduceFn::Prod, T>::apply(a, b); });
          break;
        case ir::ScanFn::Max:
          run([](T a, T b) { return Combine<ReduceFn::Max, T>::apply(a, b); });
          break;
        case ir::ScanFn::Min:
          run([](T a, T b) { return Combine<ReduceFn::Min, T>::apply(a, b); });
          break;
        default:
          EMBER_ASSERT(false);
      }
    }
  });
  return out;
}

}  // namespace ember::cpu
