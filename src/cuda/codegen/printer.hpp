// The shared printing vocabulary of the Cuda kernel generators (cuda/codegen/*.cpp): the
// device prelude every kernel follows, how each dtype is stored, loaded, computed and
// converted in CUDA C, the element-wise kernel skeleton, and the reductions' combine steps
// and identities (printed from ir/scalar_table.hpp). Internal to the Cuda backend.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>

#include "ember/base/dtype.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda::codegen {

inline constexpr DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                                       DType::I64, DType::I32, DType::I16, DType::I8,
                                       DType::U8,  DType::Bool};

// The kind a dtype computes as.
enum class K { Float, Int, Bool };
K kind(DType t);
const char* compute_type(DType t);                 // "double", "float" (f32, f16, bf16), "i32", ...
const char* unsigned_type(DType t);                // the type integer arithmetic wraps in
std::string load(DType t, const std::string& e);   // storage expression e as the compute type
std::string store(DType t, const std::string& v);  // compute value v as storage
std::string from_f64(DType t, const std::string& v);  // double v as storage (saturating)
std::string to_f64(DType t, const std::string& s);    // storage s as double
// The typedefs C (compute type) and U (wrapping unsigned) every expression prints against.
std::string typedefs(DType t);
std::string lower(const char* s);
std::string dname(DType t);
// Bytes of a storage type name as printed by storage_type / sized_type.
std::size_t sized_bytes(const std::string& t);
// The unsigned storage type of elem bytes ("u8", "h16", "unsigned int", "u64").
const char* sized_type(std::size_t elem);
// Replaces every occurrence of token in s with by.
std::string subst(std::string s, const std::string& token, const std::string& by);

// One element-wise function applied, in CUDA C (elementwise.cpp): the one printing of each
// function, shared by its single-op kernel and by fused kernels (fused.cpp). x, a, b are
// storage values (expressions) of dtype dt, y the storage lvalue assigned; the statements
// compute in the types C and U, which the caller declares (typedefs(dt)). An integer
// div / rem flags a zero divisor through `err` at element `i`. p0, p1 name the unary
// function's parameters (doubles); temp prefixes the expression's temporaries.
std::string unary_code(ir::UnaryFn fn, DType dt, const std::string& x, const std::string& y,
                       const std::string& p0 = "p0", const std::string& p1 = "p1",
                       const std::string& temp = "t");
std::string binary_code(ir::BinaryFn fn, DType dt, const std::string& a, const std::string& b,
                        const std::string& y, const std::string& temp = "t");
// A draw's element (creation.cpp): assigns the storage lvalue y the element at counter ctr
// under the seed key (u64 expressions) of the distribution whose Distribution::Kind is the
// int expression kind, with parameters a, b (doubles): the one printing of the generator,
// shared by the Random kernel and fused kernels' Random instructions (Note [Reserved draws]
// in backend/fused_group.hpp), so both draw the same bits.
std::string random_code(DType dt, const std::string& kind, const std::string& key,
                        const std::string& ctr, const std::string& a, const std::string& b,
                        const std::string& y);
// A cast's value (convert_elements' rules) and where's selection, over storage values.
std::string cast_value(DType from, DType to, const std::string& x);
std::string where_value(const std::string& c, const std::string& a, const std::string& b);

// The element-wise skeleton (elementwise.cpp's note): a grid-stride loop over the output
// running `body`, which reads operand k as $Xk and writes $Y.
std::string ew_kernel(const std::string& name, const char* out_t,
                      const std::array<const char*, 3>& in_t, int n_in, bool contiguous,
                      const std::string& pre, const std::string& body,
                      const std::string& y_strided = "y[i]", unsigned scalar_mask = 0);
const char* layout_suffix(bool contiguous);
std::string scalar_suffix(bool contiguous, unsigned scalar_mask);

// A reduction's combine step over `acc` and `v` and its identity, printed from
// ir::sx::reduction (reduce.cpp); reduce_supported: whether fn is defined for dtype t.
std::string combine(ir::ReduceFn fn, DType t, const std::string& acc, const std::string& v);
std::string reduce_init(ir::ReduceFn fn, DType t);
bool reduce_supported(ir::ReduceFn fn, DType t);
// The rows variant's loop (one block per row of n elements, `outer` rows, 256 threads:
// warp shuffles, then shared memory) writing y[row]; elem(j) is element j of the row as a
// storage value of dtype t, row_setup the code opening each row. The plain reduction reads
// a row of x; a fused one computes each element from the group's inputs (codegen/fused.cpp).
// `sink` (when not empty) replaces the write: a statement run by the thread holding the row's
// result, as em_y (the output's storage type); `after` runs in every thread once the row is
// reduced and the block has met (a fused row epilogue, Note [Row epilogues]).
std::string reduce_rows(ir::ReduceFn fn, DType t,
                        const std::function<std::string(const std::string&)>& elem,
                        const std::string& row_setup, const std::string& sink = "",
                        const std::string& after = "");
// The reduced value written from the accumulator `acc` (a mean divides by n).
std::string reduce_final(ir::ReduceFn fn, DType t);
// Reduces each thread's `v` across the block with `op` over v and o (identity `ident`).
std::string block_reduce(const std::string& op, const std::string& ident);

}  // namespace ember::cuda::codegen
