// The fused-group capability: what the Fusion decorator (src/fusion/) hands an inner
// backend to run as one program, and what it reports about its work.
//
// A FusedGroup is a straight-line element-wise program over one iteration space `shape`:
// its inputs are tensors of the inner backend (each of the group's rank, every extent
// equal to shape's or 1: read through a broadcast; a LayerNorm's weight and bias are the
// exception, Note [Fused rows]), and each instruction applies one
// element-wise IR function (the scalar definitions of ir/scalar_table.hpp) to earlier
// values, producing a value of the group's shape, or is a source: a Fill, one element
// broadcast to the group's shape whose value (its storage bits, fill_bits) is a run-time
// parameter like a unary function's, so a plan serves every scalar value, or a Random, a
// draw of the group's shape at counters reserved when it was recorded (Note [Reserved
// draws]), which are run-time parameters too. One
// instruction may be a row instruction (Note [Fused rows]) of a value of the group, whose
// element-wise producers are its prologue: a Reduce along `dim` (its result has the
// group's shape with `dim`'s extent 1), a Softmax along `dim` or a LayerNorm over the last
// dim (their results have the group's shape), where every extent after `dim` is 1; a backend
// computes it exactly as its IR op would, in the same order. It is the last instruction, or
// element-wise instructions after it are its epilogue (Note [Row epilogues]). `outputs`
// names the values the caller still needs; every other value is dead once the group ends and need
// never be stored.
//
// Numerics (Note [Fused numerics]): a backend runs each instruction exactly as it runs the
// IR op of the same function on the same dtypes — no contraction across instructions,
// 16-bit values rounded to their dtype after every instruction as if stored — so a fused
// group's outputs equal, bit for bit, those of its instructions run one by one.
//
// Backend::run_fused's default (backend.cpp) does run them one by one, as IR ops through
// execute(), so every backend runs every group; a backend with a fused executor (the Cpu's
// tile programs) overrides it. `signature` describes the group's structure — functions,
// dtypes, dim classes, layout classes, liveness, never sizes, strides or parameter values
// — and `key` is its hash, so a backend may cache what it builds for a group by key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ember/base/dtype.hpp"
#include "ember/base/shape.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

class Backend;  // backend/backend.hpp

// Note [Reserved draws]: random numbers come from a counter-based generator (the Cpu's and
// Cuda's creation kernels): element i of a draw is a hash of (seed, first + i) alone, and a
// draw of n elements takes the next n counters of its device (Backend::seed sets the seed
// and restarts them at 0). So a draw's values depend only on the counters it takes, never on
// when, where or in which kernel it runs. The Fusion decorator therefore reserves a Random's
// counters when it records the op (reserve_random: what execute would take at that moment)
// and runs it later at them — as a Random instruction of a group, drawn in the kernel, or
// alone through draw_random — so fused, unfused and EMBER_FUSION=0 draw the same values bit
// for bit however the records are grouped, and a second draw's counters follow the first's.
struct RandomCounters {
  std::uint64_t seed = 0;   // the generator's key
  std::uint64_t first = 0;  // the counter of element 0
};

// Note [Fused rows]: a Reduce, Softmax or LayerNorm ends a group as its row instruction.
// It reads a value the group computes (args[0]) along rows: `dim` is a dim whose later
// extents are all 1 (for a LayerNorm, the last dim), so each row's elements are the
// consecutive ones of the group's iteration space; the group's other instructions are its
// prologue, evaluated per row and never stored unless they are outputs. A LayerNorm's
// weight and bias (args[1], args[2], -1 when absent) are inputs of the group of shape
// [shape[dim]] (the normalised dim, as ir::LayerNorm takes them), read by it alone unless
// the group has rank 1. Fused and unfused agree bit for bit: the backend runs each row with
// the row code of the unfused op (Note [Fused numerics]). A backend whose fused_caps() has
// row_reduction is handed groups ending in a Softmax or LayerNorm too (of any float dtype);
// one with no row code for them runs the prologue apart (run_row_apart, below).
//
// Note [Row epilogues]: for a backend whose fused_caps() has row_epilogue, the row
// instruction (at row_at()) may be followed by element-wise instructions (Unary, Binary,
// Where, Cast, Fill, Random), its epilogue, run on each row once the row instruction has
// computed it: `softmax(x) * mask * scale` (a dropout of attention's probabilities),
// `y * (g - sum(g * y))` (softmax's backward pass: the sum's consumers), `x / sum(x)`,
// `cast(argmax(x) == label)`. An epilogue instruction reads the row instruction's result,
// the epilogue's earlier values, inputs of the group's rank and Fill sources — never a
// prologue value (those are gone once the row is computed; the fuser closes the group
// instead). After a Reduce, an epilogue value is a *row value* (one element a row, of the
// Reduce's result shape: the group's shape with `dim`'s extent 1) when all its operands
// are: the Reduce's result, Fills, inputs of extent 1 along `dim` and other row values
// (row_values() below); every other value has the group's shape. A row value that is an
// output has the row shape, as the Reduce's result. Numerics as everywhere (Note [Fused
// numerics]): each epilogue instruction computes what its IR op computes on the stored
// result, so the row instruction's result enters the epilogue in its own dtype (a 16-bit
// softmax rounded to 16 bits first).
//
// Note [Matmul groups]: a group may START with a Matmul (code[0], Kind::Matmul, of a float
// dtype) of two inputs (args[0], args[1]: the ir::Matmul operands, of one rank with matrix
// dims [m, k] and [k, n] and batch dims equal or 1), whose result, of shape [..., m, n]
// (matmul_shape), has the group's element count; the group's shape is it or a refinement of
// it that keeps n as its last extent (a reshape of the product that keeps its rows whole,
// [B*T, n] as [B, T, n]: Note [Reshapes in a group]), so that element (row, j) of the
// product is element row * n + j of the iteration space. The group's other instructions are
// element-wise (no row instruction) and are its epilogue — a bias, an activation, a residual,
// a scale, casts. An input read by the Matmul alone has no view of the group's shape; one
// the epilogue reads too must have one. The product is a value like any other: stored only
// when it is an output. Fused and unfused agree bit for bit: the product has the bits the
// unfused ir::Matmul would store (16-bit products rounded to their dtype), and the epilogue
// runs as any element-wise program. A backend that runs the product with its epilogue
// applied to each finished block (the Cpu's GEMM hook) overrides run_fused for them; the
// default runs the Matmul alone and the epilogue as one group (run_matmul_apart, below).
//
// Note [Conv groups]: a group may START with a forward Conv instead (code[0], Kind::Conv, of
// a float dtype) of two inputs (args[0], args[1]: the ir::Conv operands x [N, C, *] and
// w [O, C / groups, *kernel], 1 to 3 spatial dims), its window and group count in the
// group (conv_window, conv_groups: run-time values, as a unary function's parameters, never
// in the signature).
// Its result, of shape [N, O, *out] (ir::out_shape of the op), IS the group's shape (no
// reshapes join a conv group), and the group's other instructions are element-wise, its
// epilogue: a bias add of a [1, O, 1, ...] view, an activation, a batch norm's per-channel
// scale and shift, a residual add of an [N, O, *out] input. The rules are the Matmul's: the
// conv's operands are read by it alone (no view of the group's shape), its result is a value
// stored only when it is an output, and fused and unfused agree bit for bit. The Cpu applies
// the epilogue to each finished block of the convolution's output (Note [Fused conv
// epilogues] in cpu/kernels/fused.cpp); the default runs the Conv alone and the epilogue as
// one group (run_matmul_apart, which serves both products).
struct FusedInstr {
  enum class Kind : std::uint8_t {
    Unary,
    Binary,
    Where,
    Cast,
    Fill,
    Reduce,
    Softmax,
    LayerNorm,
    Matmul,  // only first (Note [Matmul groups])
    Random,
    Conv  // only first (Note [Conv groups])
  };
  Kind kind = Kind::Unary;
  ir::UnaryFn unary = ir::UnaryFn::Neg;     // Kind::Unary
  ir::BinaryFn binary = ir::BinaryFn::Add;  // Kind::Binary
  ir::ReduceFn reduce = ir::ReduceFn::Sum;  // Kind::Reduce, along dim
  std::uint32_t dim = 0;                    // Kind::Reduce, Softmax, LayerNorm: the row dim
  bool log = false;                         // Kind::Softmax: log-softmax
  double p0 = 0, p1 = 0;   // Kind::Unary's parameters, LayerNorm's eps in p0 (run-time values)
  std::uint64_t bits = 0;  // Kind::Fill: the element (fill_bits; run-time)
  // Kind::Random: a draw of the group's shape at reserved counters (Note [Reserved draws];
  // run-time), of the distribution `dist` with its a, b in p0, p1. Element i of the
  // iteration space (row-major) is the draw's element i.
  Distribution::Kind dist = Distribution::Kind::Default;
  RandomCounters draw;
  // Operands, as value ids: 0 .. inputs.size() - 1 are the inputs, inputs.size() + i is
  // instruction i's result. Unary and Cast use args[0]; Binary args[0..1] (lhs, rhs);
  // Where args[0..2] (cond, a, b); Fill and Random none; Reduce and Softmax args[0];
  // LayerNorm args[0..2] (x, weight, bias); Matmul and Conv args[0..1] (a, b or x, w: inputs).
  std::array<std::int32_t, 3> args{-1, -1, -1};
  DType out = DType::F32;  // the result's dtype (a Cast's target)

  // Whether this is a row instruction (Note [Fused rows]).
  bool row() const {
    return kind == Kind::Reduce || kind == Kind::Softmax || kind == Kind::LayerNorm;
  }
};

static_assert(std::is_trivially_copyable_v<FusedInstr>);

// The index of code's row instruction (Note [Fused rows]), or code.size() where there is none.
inline std::size_t row_index(const std::vector<FusedInstr>& code) {
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (code[i].row()) return i;
  }
  return code.size();
}

struct FusedGroup {
  Shape shape;                        // the iteration space: every result's shape but a Reduce's
  std::vector<ir::Handle> inputs;     // inner-backend tensors (Note [In-place reuse] applies)
  std::vector<FusedInstr> code;       // in order
  std::vector<std::int32_t> outputs;  // value ids (instruction results) to return, in order
  std::string signature;              // the structure, without sizes (see above)
  std::uint64_t key = 0;              // hash_bytes of signature (ember/base/hash.hpp)
  // The Conv instruction's window and group count, where the group starts with one (Note
  // [Conv groups]; run-time values): here rather than in the instruction, so that an
  // instruction stays a trivially copyable record (a group's code is copied at each close).
  ir::Window conv_window;
  std::size_t conv_groups = 1;

  std::size_t num_values() const { return inputs.size() + code.size(); }
  // Whether the last instruction is a Reduce.
  bool reduces() const { return !code.empty() && code.back().kind == FusedInstr::Kind::Reduce; }
  // Whether the last instruction is a row instruction (Note [Fused rows]).
  bool ends_in_row() const { return !code.empty() && code.back().row(); }
  // The index of the row instruction (Note [Fused rows]), or code.size() where there is none.
  std::size_t row_at() const { return row_index(code); }
  bool has_row() const { return row_at() < code.size(); }
  // Whether element-wise instructions follow the row instruction (Note [Row epilogues]).
  bool has_row_epilogue() const { return row_at() + 1 < code.size(); }
  // Whether the first instruction is a Matmul (Note [Matmul groups]).
  bool starts_with_matmul() const {
    return !code.empty() && code.front().kind == FusedInstr::Kind::Matmul;
  }
  // Whether the first instruction is a Conv (Note [Conv groups]).
  bool starts_with_conv() const {
    return !code.empty() && code.front().kind == FusedInstr::Kind::Conv;
  }
  // Whether the group is a product (a Matmul or a Conv) and its epilogue.
  bool starts_with_product() const { return starts_with_matmul() || starts_with_conv(); }
  DType dtype_of(std::int32_t value) const {
    const auto v = static_cast<std::size_t>(value);
    return v < inputs.size() ? inputs[v]->dtype() : code[v - inputs.size()].out;
  }
};

// The shape of the product of a group that starts with a Matmul (Note [Matmul groups]).
Shape matmul_shape(const FusedGroup& g);

// Note [Row epilogues]: per value of g (inputs, then instructions), whether it is a row
// value — one element a row of the Reduce g's row instruction is — so that its shape is
// the Reduce's result shape. All false where g has no Reduce as its row instruction.
std::vector<bool> row_values(const FusedGroup& g);

// The storage bits of the element a Fill of `op.dtype` holds (in the low bytes, the rest
// zero): converted exactly as every backend's fill converts op.value / op.int_value.
std::uint64_t fill_bits(const ir::Fill& op);

// The IR op that instruction i of g is, on operand handles `args` (for the default
// run_fused and for backends that fall back to it for one group). A Random instruction's op
// is drawn at its reserved counters, by Backend::draw_random, never by execute.
ir::Op fused_instr_op(const FusedGroup& g, std::size_t i, std::array<ir::Handle, 3> args);

// The three runs apart below and the default run_fused run a group as steps over its values
// (Note [Groups in steps], backend.cpp): an instruction as its IR op, or some instructions
// as a group of their own through run_group (its inputs the values it reads, Fills copied
// in, its outputs what g's caller or a later step reads; its signature g's and a tag, its
// key that signature's hash); a value no later step reads is handed over to the step that
// reads it last, so its buffer may be reused (Note [In-place reuse]).
//
// Note [Row instructions apart]: for a backend with fused code for a group's prologue but
// not for its last row instruction (Note [Fused rows]): runs the prologue as a group of its
// own through run_group — the other instructions, the inputs they read, g's outputs but the
// row's result and the row's operand — then the row instruction as its IR op through
// b.execute, so only the row's operand is written that one program would not write.
// Returns g's outputs, in order.
std::vector<ir::Handle> run_row_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group);

// Note [Epilogues apart]: for a backend whose fused_caps() has row_epilogue but whose fused
// code takes no epilogue for some group (Note [Row epilogues]): runs g as up to three groups
// through run_group — its head (the prologue and the row instruction), the epilogue's row
// values (over the row shape) and its other values (over the group's shape). So the epilogue costs
// what it did as the next group before epilogues existed. Returns g's outputs, in order.
std::vector<ir::Handle> run_epilogue_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group);

// Note [Matmul apart]: for a backend with fused code for element-wise groups but no GEMM
// with a generated epilogue: runs a group starting with a Matmul (Note [Matmul groups]) or
// a Conv (Note [Conv groups]) as that IR op through b.execute, then its epilogue as a group
// of its own through
// run_group, the product one of that group's inputs (a group of one instruction runs as that
// instruction's op). So the product is written and read once, and the epilogue is one
// program. Returns g's outputs, in order (the product among them where g keeps it).
std::vector<ir::Handle> run_matmul_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group);

// ---- the report of the Fusion decorator (fusion::report(device), EMBER_FUSION_LOG) ----

// Why a group closed (or the stream flushed with the group open).
enum class CloseReason : std::uint8_t {
  Read,            // to_data / into_scalar of a pending tensor
  Sync,            // Device::sync
  Seed,            // Device::seed (pending random draws use the old seed)
  CrossThread,     // a pending tensor was used by another thread
  NonFusableOp,    // a consumer that no fuser takes (matmul, reductions, data movement)
  DataDependent,   // an op whose output shape depends on values (nonzero)
  ShapeMismatch,   // a consumer whose result shape is not the group's
  ViewOfInternal,  // a view of a value computed inside the group
  MaxInputs,       // the group reached its input limit
  MaxOps,          // the group reached its instruction limit
  StreamCap,       // the stream reached its length limit
  MemoryBudget,    // the pending outputs reached the memory limit
  ThreadExit,      // the recording thread ended
  Reduction,       // the group ended in a reduction, softmax or layer norm (a row instruction)
  Matmul,          // a matmul or a conv opens the next group (Note [Matmul groups], [Conv groups])
  RowOp,           // a reduction, softmax or layer norm of an input opens the next group
  Count_
};
const char* name(CloseReason r);

struct FusionGroupInfo {
  std::vector<std::string_view> ops;  // "mul", "exp", "cast", ... in order (static names)
  std::size_t inputs = 0, outputs = 0;
  std::size_t sources = 0;      // scalar fills read as parameters, not from memory
  std::size_t elided = 0;       // values never written
  std::size_t bytes_saved = 0;  // writes and reads of elided values that did not happen
  std::uint64_t key = 0;
  bool plan_cached = false;  // the key was seen before (its plan was reused)
  bool fused = false;        // the backend ran it as one program (else op by op)
  CloseReason closed = CloseReason::Read;
};

struct FusionReport {
  std::size_t flushes = 0;
  std::size_t records = 0;      // ops recorded
  std::size_t ops_fused = 0;    // ops run inside groups of two or more instructions
  std::size_t ops_unfused = 0;  // ops run one by one
  std::size_t groups = 0;       // groups of two or more instructions
  std::size_t kernels = 0;      // programs run: groups plus ops run alone
  std::size_t bytes_saved = 0;
  std::size_t plans_built = 0;   // distinct group keys seen
  std::size_t plans_reused = 0;  // groups whose key was seen before
  std::array<std::size_t, static_cast<std::size_t>(CloseReason::Count_)> closed{};   // groups
  std::array<std::size_t, static_cast<std::size_t>(CloseReason::Count_)> flushed{};  // flushes
  std::vector<FusionGroupInfo> recent;  // the last groups (at most 256), oldest first
};

// What the tensor layer reaches of the Fusion decorator, through
// Backend::fusion_inspector() (as AutodiffBackend through Backend::autodiff()): its report.
class FusionInspector {
 public:
  virtual ~FusionInspector() = default;
  virtual FusionReport report() const = 0;
  virtual void reset_report() = 0;
};

}  // namespace ember::backend
