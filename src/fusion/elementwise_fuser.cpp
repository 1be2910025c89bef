// The element-wise fuser. Records are taken in order; one group is open at a time:
//  - an element-wise op (Unary, Binary, Where, Cast) joins the open group when its result
//    has the group's shape and the group has room; its operands are values computed in the
//    group or inputs (values already computed; a broadcast input is read through stride-0
//    dims by the executor). Otherwise the group closes and the op opens the next one.
//  - a Random whose counters were reserved when it was recorded joins as an element-wise
//    op without operands (Note [Random sources]).
//  - any other op runs alone, at once, when it reads nothing the open group computes (it
//    cannot see the group's values, so the order does not matter); otherwise the group
//    closes first (a view of a group value: ViewOfInternal). Views of inputs thus run
//    before the group and reach it as strided inputs: index transforms, not copies.
// A reshape of a value computed in the group joins it as a relabelling (Note [Reshapes in
// a group]) when the group's iteration space can be refined to serve both shapes; else it
// closes the group (ViewOfInternal) and runs alone.
// A row instruction (a reduction, softmax or layer norm along rows of a group value) joins
// as the group's last instruction and closes it — or, where the inner backend takes row
// epilogues, the element-wise ops after it that read only its result, their own values,
// inputs and scalars join as its epilogue (Note [Epilogues of rows] below).
// A matmul of a float dtype whose product an element-wise op of the flush reads closes the
// open group and opens the next one as its first instruction: the element-wise ops of its
// shape that follow are its epilogue (Note [Matmul epilogues] below); so does a forward
// convolution (Note [Conv epilogues]).
// When a group closes, a value it computes is an output when a handle to it still exists
// or a later record reads it; every other value is elided (never written). The group's
// signature holds the functions, dtypes, dim classes (distinct extents numbered in order
// of first appearance, extent 1 as class 0), the inputs' layout classes (fresh or the view
// op that made them) and liveness (outputs, inputs the group may consume): never sizes,
// strides or parameter values.
#include "fusion/elementwise_fuser.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"

namespace ember::fusion {

using backend::CloseReason;
using backend::FusedGroup;
using backend::FusedInstr;

namespace {

bool is_elementwise(ir::OpKind k) {
  return k == ir::OpKind::Unary || k == ir::OpKind::Binary || k == ir::OpKind::Where ||
         k == ir::OpKind::Cast;
}

std::string_view op_label(const ir::Op& op) {
  if (const auto* u = std::get_if<ir::Unary>(&op)) return ir::name(u->fn);
  if (const auto* b = std::get_if<ir::Binary>(&op)) return ir::name(b->fn);
  if (std::holds_alternative<ir::Where>(op)) return "where";
  if (std::holds_alternative<ir::Cast>(op)) return "cast";
  if (const auto* r = std::get_if<ir::Reduce>(&op)) return ir::name(r->fn);
  if (const auto* s = std::get_if<ir::Softmax>(&op)) return s->log ? "log_softmax" : "softmax";
  if (std::holds_alternative<ir::LayerNorm>(op)) return "layer_norm";
  if (std::holds_alternative<ir::Matmul>(op)) return "matmul";
  if (std::holds_alternative<ir::Conv>(op)) return "conv";
  if (std::holds_alternative<ir::Random>(op)) return "random";
  return ir::name(ir::kind_of(op));
}

// Note [Reshapes in a group]: every value a group computes is stored (when it is stored)
// contiguous in row-major order, so a reshape of one is a relabelling of the same
// elements: the reshaped value is the same instruction's result under another shape. A
// group therefore holds values of several shapes of one element count N, its *frames*
// (the shapes its element-wise ops produce and its reshapes name). Its iteration space is
// their common refinement: the shape whose row-major dim boundaries (prefix products) are
// those of every frame together (refine()), so that each frame's dim is a run of the
// iteration space's dims ([4, 6] and [24, 1] refine to [4, 6]; [4, 6] and [8, 3] to
// [4, 2, 3]; [4, 6] and [6, 4] have none: the reshape closes the group). An input read by
// an op of frame F, broadcast to F, is handed to the backend reshaped to the iteration
// space: each of F's dims becomes its run of dims, at their extents, or all 1 where the
// input is broadcast along it (input_shape_in()) — a split of dims, which any strided
// layout allows as a view, so nothing is copied. Outputs come back in the iteration
// space's shape and are reshaped to their values' own shapes (views of contiguous
// tensors). A reduction ends such a group when its dim covers exactly one dim of extent
// above 1 of the iteration space and nothing after it does. A group of one frame keeps
// that frame as its iteration space, so groups without reshapes are exactly as before.
// Frames of fewer than two elements are never refined (such a reshape closes the group).
//
// The refinement of shapes a and b of one element count above 1, or nullopt.
std::optional<Shape> refine(const Shape& a, const Shape& b) {
  const std::size_t n = a.num_elements();
  if (n < 2 || b.num_elements() != n) return std::nullopt;
  std::vector<std::size_t> cuts;
  cuts.reserve(a.rank() + b.rank());
  for (const Shape* x : {&a, &b}) {
    std::size_t p = 1;
    for (std::size_t d = 0; d < x->rank(); ++d) {
      p *= (*x)[d];
      if (p > 1) cuts.push_back(p);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<std::size_t> dims;
  dims.reserve(cuts.size());
  std::size_t prev = 1;
  for (std::size_t c : cuts) {
    if (c % prev != 0) return std::nullopt;
    dims.push_back(c / prev);
    prev = c;
  }
  return Shape(std::move(dims));
}

// For each dim of frame f, the run [first, second) of the dims of its refinement r that it
// covers (extent-1 dims of r go to the first frame dim that can take them).
std::vector<std::pair<std::size_t, std::size_t>> runs_of(const Shape& f, const Shape& r) {
  std::vector<std::pair<std::size_t, std::size_t>> runs(f.rank());
  std::size_t j = 0;
  for (std::size_t d = 0; d < f.rank(); ++d) {
    const std::size_t lo = j;
    if (f[d] == 1) {
      if (j < r.rank() && r[j] == 1) ++j;
    } else {
      std::size_t p = 1;
      while (p < f[d] && j < r.rank()) p *= r[j++];
      EMBER_ASSERT(p == f[d]);  // r refines f
    }
    runs[d] = {lo, j};
  }
  if (!runs.empty()) runs.back().second = r.rank();  // trailing 1s of r
  return runs;
}

// The shape an input of shape `in`, read broadcast by an op of frame f, takes in the
// iteration space r (Note [Reshapes in a group]).
Shape input_shape_in(const Shape& in, const Shape& f, const Shape& r) {
  std::vector<std::size_t> dims(r.rank(), 1);
  const auto runs = runs_of(f, r);
  const std::size_t pad = f.rank() - in.rank();
  for (std::size_t d = pad; d < f.rank(); ++d) {
    if (in[d - pad] == 1) continue;
    for (std::size_t j = runs[d].first; j < runs[d].second; ++j) dims[j] = r[j];
  }
  return Shape(std::move(dims));
}

// The function an instruction applies, as the signature writes it.
std::uint64_t fn_code(const FusedInstr& in) {
  switch (in.kind) {
    case FusedInstr::Kind::Binary:
      return static_cast<std::uint64_t>(in.binary);
    case FusedInstr::Kind::Reduce:
      return static_cast<std::uint64_t>(in.reduce);
    case FusedInstr::Kind::Softmax:
      return in.log ? 1 : 0;
    case FusedInstr::Kind::Random:
      return static_cast<std::uint64_t>(in.dist);
    default:
      return static_cast<std::uint64_t>(in.unary);
  }
}

// Note [Matmul epilogues]: a Matmul of f32, f64, f16 or bf16 (2-D or batched, any operand
// layout) whose product an element-wise op of the same flush reads (else it has no epilogue
// and runs alone, leaving the open group open) is not run when the flush reaches it: it
// closes the open group (Matmul) and opens the next one as its first instruction (Note [Matmul
// groups] in backend/fused_group.hpp), its operands the group's first inputs and its result's shape
// the iteration space. The element-wise ops of exactly that shape that follow join as its epilogue
// — a bias add with a broadcast [n] or [1, n] operand, an activation, a residual add, a scale,
// casts — under the usual rules (room, inputs); the product is a value of the group like any other,
// so it is written only when a handle to it lives or a later record reads it. A matmul group takes
// reshapes of its values (and element-wise ops of their shapes) only where the refined
// iteration space keeps the product's last extent n as its own last extent — a reshape that
// keeps the product's rows whole, as nn::Linear's [B*T, n] to [B, T, n] — so that element
// (row, j) of the product is element row * n + j of the iteration space; it takes no row
// instructions. Both close it otherwise: the backends apply the epilogue to blocks of the
// product's rows. The matmul's operands are inputs read in a frame of their own (kMatmulFrame:
// never reshaped to the iteration space). The signature holds the Matmul instruction and its
// operands' dim classes and layouts (a transposed weight is a layout class), never sizes.
//
// Whether the Matmul r opens a matmul group (else it runs alone, as any other op).
bool opens_matmul_group(const Record& r) {
  const Shape& out = r.outs[0]->shape();
  const DType dt = r.outs[0]->dtype();
  const std::size_t rank = out.rank();
  // (The record holds the operands as its args: the op's handles are dropped when recorded.)
  return r.args.size() == 2 && r.args[0] && r.args[1] && rank >= 2 &&
         r.args[0]->shape().rank() == rank && r.args[1]->shape().rank() == rank &&
         out[rank - 1] > 0 &&
         (dt == DType::F32 || dt == DType::F64 || dt == DType::F16 || dt == DType::BF16);
}

// Note [Conv epilogues]: a forward Conv of a float dtype (1 to 3 spatial dims, any groups)
// opens a group as a Matmul does (Note [Matmul epilogues]) when an element-wise op of the
// flush reads its result: it closes the open group (Matmul) and becomes the first
// instruction of the next (Note [Conv groups] in backend/fused_group.hpp), its operands
// inputs read in the operands' frame, its result's shape [N, O, *out] the iteration space.
// The element-wise ops of exactly that shape that follow are its epilogue: the bias add
// (nn::Conv's and the ONNX Conv's bias, a [1, O, 1, 1] view of [O]), relu, clamp (relu6),
// silu, gelu, a batch norm's per-channel scale and shift, a residual add. A conv group takes
// no reshapes of its values (no refinement of the iteration space: the Cpu maps each
// finished block of the convolution's [O, positions] product to the output by channel and
// position) and no row instructions. Its window and group count are run-time values of the
// group, never in the signature: one plan serves every geometry.
//
// Whether the Conv r opens a conv group (else it runs alone, as any other op).
bool opens_conv_group(const Record& r) {
  const auto& c = std::get<ir::Conv>(r.op);
  const DType dt = r.outs[0]->dtype();
  const std::size_t rank = r.outs[0]->shape().rank();
  return c.pass == ir::ConvPass::Forward && r.args.size() == 2 && r.args[0] && r.args[1] &&
         rank >= 3 && rank <= 5 && r.outs[0]->shape().num_elements() > 0 &&
         (dt == DType::F32 || dt == DType::F64 || dt == DType::F16 || dt == DType::BF16);
}

// Note [Random sources]: a Random whose counters were reserved when it was recorded (the
// inner backend's fused_caps().random: Note [Reserved draws] in backend/fused_group.hpp) is
// an element-wise op without operands: it joins the open group as the others do (its shape
// the group's, or one its iteration space refines to: element i of the draw is element i of
// the row-major iteration space either way) and becomes a Random instruction, drawn in the
// kernel; its value is written only when it is an output, like any value of a group (a
// dropout's mask that autodiff keeps for the backward pass, for one). Its distribution's
// kind is in the signature; its parameters, seed and counters are run-time values, so one
// plan serves every draw. Run alone (a group of one op, or where the inner backend takes no
// Random instructions), it is drawn at the same counters (run_alone: draw_random), so the
// values never depend on the grouping. Without the inner backend's support a Random is not
// reserved and runs alone when the flush reaches it, in record order, as before.
//
// Note [Scalar sources]: a scalar constant (a one-element Fill, recorded as no op: Note
// [Scalar constants] in stream.hpp) is not run by the flush: each group that reads it gets
// a Fill instruction (its value a run-time parameter, so plans and kernels serve every
// scalar value) and never reads it from memory. It runs only when something needs it in
// memory: an op run alone reading it (a group of one op included), or a read.
class Grouper {
 public:
  // Note [One grouper a thread]: a flush groups its records with its thread's Grouper, whose
  // vectors keep their storage from one flush to the next (building them afresh was ten
  // allocations a flush, a tenth of a small group's whole cost). begin() clears whatever a
  // previous flush left, one that threw included.
  void begin(Shared& shared) {
    shared_ = &shared;
    clear();
    closing_members_.clear();  // (a previous flush's that threw: Note [Closing lists])
    closing_views_.clear();
    ew_read_.clear();
    records_ = nullptr;  // (set by note_flush; a previous flush's are gone)
    // A group holds at most max_group_ops members, each with at most three scalar sources.
    const std::size_t ops = std::min<std::size_t>(shared.options.max_group_ops, 256);
    const std::size_t most = 4 * ops;
    members_.reserve(ops);
    code_.reserve(most);
    produced_.reserve(most);
    is_fill_.reserve(most);
    row_value_.reserve(most);
  }

  void add(Record& r) {
    const ir::OpKind kind = ir::kind_of(r.op);
    if (in_epilogue() && (is_elementwise(kind) || r.draw)) {  // (Note [Epilogues of rows])
      if (const auto row = epilogue_takes(r)) {
        join(r, 0);
        row_value_.back() = *row;
        return;
      }
      shared_->report.decision([&] {
        return std::string(op_label(r.op)) + ": closes the group (" +
               backend::name(CloseReason::Reduction) + ")";
      });
      close(CloseReason::Reduction);  // and r opens the next group
    }
    if (is_elementwise(kind) || r.draw) {  // (a reserved Random: Note [Random sources])
      std::uint32_t frame = 0;             // of its inputs (Note [Reshapes in a group])
      if (!members_.empty()) {
        const Shape& f = r.outs[0]->shape();
        const bool same = f == shape_;
        if (!same && !refines_to(f)) return close_then_open(r, CloseReason::ShapeMismatch);
        if (members_.size() >= shared_->options.max_group_ops)
          return close_then_open(r, CloseReason::MaxOps);
        if (!same || !frames_.empty()) frame = frame_index(f);
        std::size_t fresh = 0;
        for (const auto& v : r.args) fresh += v && !is_source(*v) && !known(*v, frame);
        if (inputs_.size() + fresh > shared_->options.max_group_inputs)
          return close_then_open(r, CloseReason::MaxInputs);
        if (!same || !frames_.empty()) frame = adopt_frame(f);
      }
      join(r, frame);
      return;
    }
    if (is_row_op(kind)) {
      if (const auto dim = kind == ir::OpKind::Reduce ? reduce_row_dim(r) : normalize_row_dim(r)) {
        join(r, 0);
        code_.back().dim = *dim;
        if (shared_->row_epilogue && frames_.empty() && !merged_) {  // (Note [Epilogues of rows])
          row_at_ = code_.size() - 1;
          row_dim_ = *dim;
          row_shape_ = r.outs[0]->shape();
          row_value_.back() = kind == ir::OpKind::Reduce;
          return;
        }
        close(CloseReason::Reduction);
        return;
      }
    }
    const bool product = (kind == ir::OpKind::Matmul && opens_matmul_group(r)) ||
                         (kind == ir::OpKind::Conv && opens_conv_group(r));
    if (product && std::binary_search(ew_read_.begin(), ew_read_.end(), r.outs[0].get())) {
      if (!members_.empty()) {
        shared_->report.decision([&] {
          return std::string(op_label(r.op)) + ": closes the group (" +
                 backend::name(CloseReason::Matmul) + ")";
        });
      }
      close(CloseReason::Matmul);
      run_constants_read_by(r);
      join(r, kMatmulFrame);
      if (kind == ir::OpKind::Matmul) {
        matmul_n_ = r.outs[0]->shape()[r.outs[0]->shape().rank() - 1];
      } else {
        conv_ = true;
      }
      return;
    }
    if (kind == ir::OpKind::Reshape && relabels(r)) {
      relabel(r);
      return;
    }
    bool reads_group = false;  // (a fill the group reads is no value computed in it)
    for (const auto& v : r.args) reads_group = reads_group || (v && internal(*v) && !is_source(*v));
    if (reads_group) {
      close(ir::op_class(kind) == ir::OpClass::View ? CloseReason::ViewOfInternal
                                                    : CloseReason::NonFusableOp);
    }
    if (opens_row_group(r)) return;
    run_constants_read_by(r);
    run_alone(*shared_, r);
  }

  void close(CloseReason why);

  // Notes, in one backward walk over the flush's records (so a reshape's operand counts when
  // its result is read, and a value feeds a row op when what it feeds does):
  //  - ew_read_: the values element-wise records read, directly or through reshapes (Note
  //    [Matmul epilogues]: a matmul, a conv or a row op of an input opens a group only for
  //    a result among them, Note [Rows of an input]);
  //  - feeds_row_: the values that feed a row op, directly or through element-wise ops and
  //    reshapes (Note [Epilogues of rows]: they open the next group as its prologue rather
  //    than join an epilogue).
  // A flush with none of those ops skips the walk (it and its sort were 6% of recording a
  // chain of tiny element-wise ops).
  void note_flush(const std::vector<Record>& records) {
    ew_read_.clear();
    feeds_row_.clear();
    records_ = &records;
    const bool rows = shared_->row_epilogue;
    const bool asks = std::any_of(records.begin(), records.end(), [rows](const Record& r) {
      const ir::OpKind k = ir::kind_of(r.op);
      return k == ir::OpKind::Matmul || k == ir::OpKind::Conv || (rows && is_row_op(k));
    });
    if (!asks) return;
    for (auto r = records.rbegin(); r != records.rend(); ++r) {
      const ir::OpKind k = ir::kind_of(r->op);
      if (rows && is_row_op(k)) {
        if (r->args[0]) feeds_row_.insert(r->args[0].get());
        continue;
      }
      const bool ew = is_elementwise(k);
      if (!ew && k != ir::OpKind::Reshape) continue;
      const bool read =
          ew || std::find(ew_read_.begin(), ew_read_.end(), r->outs[0].get()) != ew_read_.end();
      const bool feeds = rows && feeds_row_.count(r->outs[0].get()) > 0;
      for (const auto& v : r->args) {
        if (!v) continue;
        if (read) ew_read_.push_back(v.get());
        if (feeds) feeds_row_.insert(v.get());
      }
    }
    std::sort(ew_read_.begin(), ew_read_.end());
  }

 private:
  // A value a reshape relabels (Note [Reshapes in a group]), with its reads in the group: by
  // instructions and reshapes, and by instructions alone (those are among the instruction's
  // uses).
  struct Alias {
    Value* v;
    std::int32_t reads, code_reads;
  };

  // Whether v is a value of the open group: computed in it, or a fill it reads.
  bool internal(const Value& v) const { return v.group == group_ && v.group_id >= 0; }
  // Whether v is in the group as a value of it or as an input read in frame fi.
  bool known(const Value& v, std::uint32_t fi) const {
    if (internal(v)) return true;
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      if (inputs_[k].get() == &v && input_frame_[k] == fi) return true;
    }
    return false;
  }

  // The number of frame f in frames_ (Note [Reshapes in a group]): 0 while the group has
  // one frame; frames_.size() for a frame not seen yet.
  std::uint32_t frame_index(const Shape& f) const {
    if (frames_.empty()) return f == shape_ ? 0 : 1;
    std::uint32_t i = 0;
    while (i < frames_.size() && frames_[i] != f) ++i;
    return i;
  }
  // Makes f a frame of the open group (its refinement with the iteration space exists)
  // and returns its number.
  std::uint32_t adopt_frame(const Shape& f) {
    if (frames_.empty() && f == shape_) return 0;
    if (frames_.empty()) frames_.push_back(shape_);
    const std::uint32_t i = frame_index(f);
    if (i < frames_.size()) return i;
    frames_.push_back(f);
    shape_ = *refine(shape_, f);
    return i;
  }

  // Whether the Reshape r relabels a value of the open group (Note [Reshapes in a group]).
  bool relabels(const Record& r) const {
    const Value* x = r.args[0].get();
    if (members_.empty() || in_epilogue() || !x || !internal(*x) || is_source(*x)) return false;
    const Shape& f = r.outs[0]->shape();
    return f == shape_ || refines_to(f);
  }
  // Whether the open group's iteration space and f have a refinement that the group can
  // take: any, or in a matmul group one whose last extent is the product's (Note [Matmul
  // epilogues]).
  bool refines_to(const Shape& f) const {
    if (conv_) return false;  // (Note [Conv epilogues])
    const auto to = refine(shape_, f);
    return to && (matmul_n_ == 0 || (to->rank() > 0 && (*to)[to->rank() - 1] == matmul_n_));
  }
  void relabel(Record& r) {
    Value& x = *r.args[0];
    adopt_frame(r.outs[0]->shape());
    const std::size_t i = instr_of(x);
    if (produced_[i] == &x) {
      reshaped_direct_.push_back(static_cast<std::uint32_t>(i));
    } else {
      ++alias_of(x).reads;
    }
    Value& out = *r.outs[0];
    out.group = group_;
    out.group_id = x.group_id;
    aliases_.push_back({&out, 0, 0});
    views_.push_back(&r);
    shared_->report.decision([&] {
      return "reshape to " + out.shape().to_string() + ": relabels a group value (iteration " +
             shape_.to_string() + ")";
    });
  }
  // The instruction whose result the group's value v is (v itself or a relabelling of it).
  std::size_t instr_of(const Value& v) const {
    return static_cast<std::size_t>(v.group_id - kInternalBase);
  }
  Alias& alias_of(const Value& v) {
    for (auto& a : aliases_) {
      if (a.v == &v) return a;
    }
    EMBER_ASSERT(false);  // v is a relabelled value of the group
    return aliases_.front();
  }

  // The dim of the iteration space along which a row instruction (Note [Fused rows] in
  // backend/fused_group.hpp) over dim `dim` of x may end the open group, or nullopt: the
  // inner backend fuses row reductions, x is a value computed in the group, the group has
  // room, and every extent of the iteration space after that dim is 1 (where x is a frame
  // of a reshaped group, its dim's run of dims must hold exactly one extent above 1).
  std::optional<std::uint32_t> row_dim_of(const Value* x, std::size_t dim) const {
    if (!shared_->row_reduction || members_.empty() || in_epilogue() || matmul_n_ || conv_ || !x ||
        !internal(*x) || is_source(*x) || members_.size() >= shared_->options.max_group_ops) {
      return std::nullopt;
    }
    if (x->shape() != shape_) {  // x is a frame of a reshaped group: its dim's run
      const auto run = runs_of(x->shape(), shape_)[dim];
      std::size_t wide = 0;
      for (std::size_t j = run.first; j < run.second; ++j) {
        if (shape_[j] != 1) {
          dim = j;
          ++wide;
        }
      }
      if (wide != 1) return std::nullopt;
    }
    for (std::size_t k = dim + 1; k < shape_.rank(); ++k) {
      if (shape_[k] != 1) return std::nullopt;
    }
    return static_cast<std::uint32_t>(dim);
  }

  // The dim along which the Reduce r ends the open group (Note [Fused reductions] of the
  // Cpu), or nullopt: a row of a value computed in the group, of a function and dtype the
  // inner backend reduces in rows.
  std::optional<std::uint32_t> reduce_row_dim(const Record& r) {
    const auto& op = std::get<ir::Reduce>(r.op);
    const Value* x = r.args[0].get();
    if (!shared_->row_reduction || !x || !shared_->row_reduction(op.fn, x->dtype())) {
      return std::nullopt;
    }
    if (const auto dim = row_dim_of(x, op.dim)) return dim;
    return coarsened_row_dim(x, op.dim);
  }

  // Note [Coarsened iteration space]: a reduction over a frame's dim whose run covers several
  // extents above 1 of the iteration space (a full sum of a value the group computed in
  // [64, 4096], reshaped to [262144]) ends the group in a coarser iteration space, the run's
  // dims merged into one ([262144]). The group's values are contiguous in every frame, so
  // only its inputs care which space it iterates: each must merge over the run as a view,
  // broadcast along all of it or read whole from a fresh (contiguous) tensor. Then the
  // inputs are handed in the merged space and the values come back in it, reshaped to their
  // own shapes as any frame's; the reduction is the one the backend runs over such a row.
  // The dim of the merged run, or nullopt where an input forbids it.
  std::optional<std::uint32_t> coarsened_row_dim(const Value* x, std::size_t dim) {
    if (frames_.empty() || in_epilogue() || x->shape() == shape_ || matmul_n_ || conv_ ||
        !internal(*x) || is_source(*x) || members_.size() >= shared_->options.max_group_ops) {
      return std::nullopt;
    }
    const auto run = runs_of(x->shape(), shape_)[dim];
    for (std::size_t k = run.second; k < shape_.rank(); ++k) {
      if (shape_[k] != 1) return std::nullopt;
    }
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      if (input_frame_[k] == kMatmulFrame) return std::nullopt;
      const Shape in = input_shape_in(inputs_[k]->shape(), frames_[input_frame_[k]], shape_);
      bool all_one = true, all_full = true;
      for (std::size_t j = run.first; j < run.second; ++j) {
        all_one = all_one && in[j] == 1;
        all_full = all_full && in[j] == shape_[j];
      }
      if (!all_one && !(all_full && inputs_[k]->layout == kFresh)) return std::nullopt;
    }
    fine_ = shape_;
    merged_ = run;
    shape_ = merged(shape_, run);
    shared_->report.decision([&] {
      return "iteration " + fine_.to_string() + " merged to " + shape_.to_string() +
             " for a reduction over it (Note [Coarsened iteration space])";
    });
    return static_cast<std::uint32_t>(run.first);
  }
  // s with its dims [run.first, run.second) merged into one.
  static Shape merged(const Shape& s, std::pair<std::size_t, std::size_t> run) {
    std::vector<std::size_t> d(s.dims().begin(), s.dims().begin() + std::ptrdiff_t(run.first));
    std::size_t p = 1;
    for (std::size_t j = run.first; j < run.second; ++j) p *= s[j];
    d.push_back(p);
    d.insert(d.end(), s.dims().begin() + std::ptrdiff_t(run.second), s.dims().end());
    return Shape(std::move(d));
  }

  // The dim along which the Softmax or LayerNorm r ends the open group, or nullopt: it
  // normalises rows of a value computed in the group (a softmax along a dim whose later
  // extents are 1, a layer norm over the last dim), and a layer norm's weight and bias are
  // values computed before the group (inputs, not scalar sources). Only in a group without
  // reshapes: the weight and bias are inputs of shape [n] that the iteration space's
  // relabelling of inputs (Note [Reshapes in a group]) does not describe.
  std::optional<std::uint32_t> normalize_row_dim(const Record& r) const {
    const auto* s = std::get_if<ir::Softmax>(&r.op);
    if (!s && std::get<ir::LayerNorm>(r.op).dims != 1) return std::nullopt;
    const Value* x = r.args[0].get();
    if (!frames_.empty() || !x || x->shape() != shape_) return std::nullopt;
    const auto dim = row_dim_of(x, s ? s->dim : shape_.rank() - 1);
    if (!dim) return std::nullopt;
    std::size_t fresh = 0;
    for (std::size_t i = 1; i < r.args.size(); ++i) {
      const Value* v = r.args[i].get();
      if (!v) continue;
      if (internal(*v) || is_source(*v)) return std::nullopt;
      fresh += !known(*v, 0);
    }
    if (inputs_.size() + fresh > shared_->options.max_group_inputs) return std::nullopt;
    return dim;
  }

  // Note [Epilogues of rows]: where the inner backend takes row epilogues (Note [Row
  // epilogues] in backend/fused_group.hpp), a row instruction that joins a group without
  // reshapes leaves it open, and the element-wise ops after it join as its epilogue while
  // each reads the row instruction's result or an epilogue value — or, an op of inputs alone
  // or a draw, is read with one by an op within the next few records (meets_group: alone it
  // gains nothing there and may lead a better group of its own, as `x * 0.5 + 1` reshaped
  // and exponentiated after an unrelated argmax) — and otherwise only inputs of the group's
  // rank and scalar sources, and its result has the group's shape — or, after a
  // Reduce, the row shape, exactly when all its operands are row values (the Reduce's result,
  // scalars, inputs of extent 1 along the row, row values): the same rule as backend::row_values.
  // So softmax's backward pass, `y * (g - sum(g * y))`, is one group, its sum never written; so are
  // `softmax(s) * mask * scale` and `cast(argmax(x) == label)`. An op that reads a prologue value
  // (gone once the row is computed), or of another shape, closes the group (Reduction) and opens
  // the next. So does an op whose value feeds a later row instruction of the flush
  // (note_flush): it is worth more as that row's prologue — var's `mean(x)`, `square(x -
  // mean)`, `sum` keeps `x - mean` and its square in the second group, never written, where joining
  // the mean's epilogue would write the square. Any other op follows the usual rules; reshapes of
  // group values and row instructions close the group.
  bool in_epilogue() const { return row_at_ != kNoRow; }
  // Whether r joins the open group's epilogue, and then whether its value is a row value.
  std::optional<bool> epilogue_takes(const Record& r) const {
    if (feeds_row_.count(r.outs[0].get()) || members_.size() >= shared_->options.max_group_ops) {
      return std::nullopt;
    }
    bool row = !r.draw;  // (a draw has the group's shape)
    // The row's result or an epilogue value (else, below, an op soon after must read r's
    // value with one of those: dropout's mask, `p * keep`; log-softmax's backward `exp(y)`).
    bool reads = false;
    std::size_t fresh = 0;
    for (const auto& v : r.args) {
      if (!v) continue;
      if (internal(*v)) {
        const std::size_t i = instr_of(*v);
        if (i < row_at_ && !is_fill_[i]) return std::nullopt;  // a prologue value
        if (produced_[i] != v.get()) return std::nullopt;      // (a relabelled one)
        row = row && (is_fill_[i] || row_value_[i]);
        reads = reads || !is_fill_[i];
      } else if (!is_source(*v)) {  // an input (else a scalar)
        if (v->shape().rank() != shape_.rank()) return std::nullopt;
        row = row && v->shape()[row_dim_] == 1;
        fresh += !known(*v, 0);
      }
    }
    if (inputs_.size() + fresh > shared_->options.max_group_inputs) return std::nullopt;
    if (!reads && !meets_group(r)) return std::nullopt;
    if (r.outs[0]->shape() != (row ? row_shape_ : shape_)) return std::nullopt;
    return row;
  }

  // Note [Rows of an input]: a reduction, softmax or layer norm along rows of a value
  // computed before (an input: a matmul's scores, a tensor read from memory) whose result an
  // element-wise op of the flush reads opens a group as its first instruction, with no
  // prologue — closing the open group first (RowOp), as a matmul does — so that its
  // consumers join as its epilogue (Note [Epilogues of rows]): attention's
  // `softmax(q·kᵀ * s + m)` then its dropout, `x / x.sum(-1)`, `layer_norm(x) + r`. Where
  // none joins, the group of one op runs as that op when it closes.
  bool opens_row_group(Record& r) {
    if (!shared_->row_epilogue || r.args.size() == 0 ||
        !std::binary_search(ew_read_.begin(), ew_read_.end(), r.outs[0].get())) {
      return false;
    }
    const Value* x = r.args[0].get();
    if (!x || is_source(*x) || x->shape().num_elements() == 0) return false;
    const Shape& xs = x->shape();
    std::size_t dim = 0;
    if (const auto* red = std::get_if<ir::Reduce>(&r.op)) {
      if (!shared_->row_reduction(red->fn, x->dtype())) return false;
      dim = red->dim;
    } else if (const auto* sm = std::get_if<ir::Softmax>(&r.op)) {
      dim = sm->dim;
    } else if (const auto* ln = std::get_if<ir::LayerNorm>(&r.op)) {
      if (ln->dims != 1 || xs.rank() == 0) return false;
      for (std::size_t i = 1; i < r.args.size(); ++i) {
        if (r.args[i] && is_source(*r.args[i])) return false;  // (a weight, a bias: inputs)
      }
      dim = xs.rank() - 1;
    } else {
      return false;
    }
    if (dim >= xs.rank()) return false;
    for (std::size_t k = dim + 1; k < xs.rank(); ++k) {
      if (xs[k] != 1) return false;
    }
    if (!members_.empty()) {  // (as a matmul does: Note [Matmul epilogues])
      shared_->report.decision([&] {
        return std::string(op_label(r.op)) + ": closes the group (" +
               backend::name(CloseReason::RowOp) + ")";
      });
      close(CloseReason::RowOp);
    }
    join(r, 0);
    shape_ = xs;  // (the iteration space: the rows, a reduction's result being one a row)
    code_.back().dim = static_cast<std::uint32_t>(dim);
    row_at_ = 0;
    row_dim_ = dim;
    row_shape_ = r.outs[0]->shape();
    row_value_.back() = std::holds_alternative<ir::Reduce>(r.op);
    return true;
  }

  // Whether one of the few records after r (an op of inputs alone, or a draw) reads its value
  // together with a value computed in the open group (Note [Epilogues of rows]: alone, it
  // gains nothing there and may lead a better group of its own).
  bool meets_group(const Record& r) const {
    if (!records_ || records_->empty()) return false;
    const Record* first = records_->data();
    const Record* end = first + records_->size();
    if (&r < first || &r >= end) return false;
    const Record* stop = std::min(end, &r + 9);
    for (const Record* c = &r + 1; c < stop; ++c) {
      bool mine = false, group = false;
      for (const auto& v : c->args) {
        mine = mine || (v && v.get() == r.outs[0].get());
        group = group || (v && internal(*v) && !is_source(*v));
      }
      if (mine) return group;
    }
    return false;
  }

  // The scalar constants r reads run first, so r finds them in memory.
  static void run_constants_read_by(Record& r) {
    for (const auto& v : r.args) {
      if (v && is_source(*v)) run_constant(*v);
    }
  }

  void close_then_open(Record& r, CloseReason why) {
    shared_->report.decision([&] {
      return std::string(op_label(r.op)) + ": closes the group (" + backend::name(why) + ")";
    });
    close(why);
    join(r, 0);
  }

  // Value ids while the group is open: inputs get 0, 1, ...; internal values kInternalBase
  // + instruction index (renumbered after the inputs at close).
  static constexpr std::int32_t kInternalBase = 1 << 20;
  // The frame in which a matmul or a conv reads its operands (Note [Matmul epilogues]).
  static constexpr std::uint32_t kMatmulFrame = ~std::uint32_t(0);

  std::int32_t id_of(const std::shared_ptr<Value>& v, std::uint32_t frame) {
    if (internal(*v)) {
      if (!aliases_.empty() && produced_[instr_of(*v)] != v.get()) {  // read as relabelled
        Alias& a = alias_of(*v);
        ++a.reads;
        ++a.code_reads;
      }
      return v->group_id;
    }
    if (is_source(*v)) {  // a scalar constant: a Fill instruction
      FusedInstr in;
      in.kind = FusedInstr::Kind::Fill;
      in.out = v->dtype();
      in.bits = backend::fill_bits(constant_fill(*v, false));
      v->group = group_;
      v->group_id = kInternalBase + static_cast<std::int32_t>(code_.size());
      code_.push_back(in);
      produced_.push_back(v.get());
      is_fill_.push_back(true);
      row_value_.push_back(true);
      return v->group_id;
    }
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      if (inputs_[k].get() == v.get() && input_frame_[k] == frame) {
        ++input_uses_[k];
        return static_cast<std::int32_t>(k);
      }
    }
    if (v->state != State::Ready) input_not_ready(*v);  // earlier records ran, or are here
    const auto id = static_cast<std::int32_t>(inputs_.size());
    inputs_.push_back(v);
    input_uses_.push_back(1);
    input_frame_.push_back(frame);
    return id;
  }

  // The invariant id_of checks, broken: what the value was, printed before the stop, since a
  // stop that needs a whole process's history to happen is seen once.
  [[noreturn]] void input_not_ready(const Value& v) const {
    static constexpr const char* kStates[] = {"Pending", "Ready", "Consumed", "Elided", "Failed"};
    std::fprintf(stderr,
                 "fusion: a group input is %s, not Ready: %s %s, group %llu (open: %llu), id %d, "
                 "%s stream, source %s, dropped %d, pending uses %d, inner %s; the group has %zu "
                 "ops, %zu inputs\n",
                 kStates[static_cast<int>(v.state)], to_string(v.dtype()).c_str(),
                 v.shape().to_string().c_str(), static_cast<unsigned long long>(v.group),
                 static_cast<unsigned long long>(group_), v.group_id,
                 !v.stream                                                            ? "no"
                 : !members_.empty() && members_.front()->outs[0]->stream == v.stream ? "this"
                                                                                      : "another",
                 v.constant ? "a scalar constant" : "none", v.dropped.load() ? 1 : 0,
                 v.pending_uses.load(), v.inner ? "held" : "none", members_.size(), inputs_.size());
    EMBER_ASSERT(v.state == State::Ready);
    std::abort();
  }

  // r joins the open group (or opens one: its shape is then the group's), its inputs read
  // in frame `frame` (a Reduce reads only a value of the group).
  void join(Record& r, std::uint32_t frame) {
    if (members_.empty()) {
      shape_ = r.outs[0]->shape();
      group_ = ++groups_opened_;
    }
    FusedInstr in;
    std::visit(
        [&](auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, ir::Unary>) {
            in.kind = FusedInstr::Kind::Unary;
            in.unary = o.fn;
            in.p0 = o.p0;
            in.p1 = o.p1;
          } else if constexpr (std::is_same_v<T, ir::Binary>) {
            in.kind = FusedInstr::Kind::Binary;
            in.binary = o.fn;
          } else if constexpr (std::is_same_v<T, ir::Where>) {
            in.kind = FusedInstr::Kind::Where;
          } else if constexpr (std::is_same_v<T, ir::Cast>) {
            in.kind = FusedInstr::Kind::Cast;
          } else if constexpr (std::is_same_v<T, ir::Reduce>) {
            in.kind = FusedInstr::Kind::Reduce;
            in.reduce = o.fn;
            in.dim = static_cast<std::uint32_t>(o.dim);
          } else if constexpr (std::is_same_v<T, ir::Softmax>) {
            in.kind = FusedInstr::Kind::Softmax;
            in.dim = static_cast<std::uint32_t>(o.dim);
            in.log = o.log;
          } else if constexpr (std::is_same_v<T, ir::LayerNorm>) {
            in.kind = FusedInstr::Kind::LayerNorm;
            in.dim = static_cast<std::uint32_t>(shape_.rank() - 1);
            in.p0 = o.eps;  // a run-time parameter, as a unary function's
          } else if constexpr (std::is_same_v<T, ir::Matmul>) {
            in.kind = FusedInstr::Kind::Matmul;  // opens the group (Note [Matmul epilogues])
          } else if constexpr (std::is_same_v<T, ir::Conv>) {
            in.kind = FusedInstr::Kind::Conv;  // opens the group (Note [Conv epilogues])
            conv_window_ = o.window;
            conv_groups_ = o.groups;
          } else if constexpr (std::is_same_v<T, ir::Random>) {
            in.kind = FusedInstr::Kind::Random;  // its parameters are run-time values
            in.dist = o.dist.kind;
            in.p0 = o.dist.a;
            in.p1 = o.dist.b;
            in.draw = *r.draw;
          }
        },
        r.op);
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      in.args[i] = r.args[i] ? id_of(r.args[i], frame) : -1;
    }
    in.out = r.outs[0]->dtype();
    Value& out = *r.outs[0];
    out.group = group_;
    out.group_id = kInternalBase + static_cast<std::int32_t>(code_.size());
    code_.push_back(in);
    produced_.push_back(&out);
    is_fill_.push_back(false);
    row_value_.push_back(false);
    members_.push_back(&r);
    shared_->report.decision([&] {
      return std::string(op_label(r.op)) + ": joins the group (" + std::to_string(members_.size()) +
             " ops)";
    });
  }

  void clear() {
    members_.clear();
    code_.clear();
    produced_.clear();
    is_fill_.clear();
    row_value_.clear();
    row_at_ = kNoRow;
    inputs_.clear();
    input_uses_.clear();
    input_frame_.clear();
    frames_.clear();
    aliases_.clear();
    reshaped_direct_.clear();
    views_.clear();
    group_ = 0;
    matmul_n_ = 0;
    conv_ = false;
    merged_.reset();
  }

  Shared* shared_ = nullptr;  // the flushing device's (begin)
  Shape shape_;
  std::vector<Record*> members_;  // the records computed in the group
  std::vector<FusedInstr> code_;  // members' instructions and fill sources, in order
  std::vector<Value*> produced_;  // per instruction: the value it computes
  std::vector<bool> is_fill_;     // per instruction: a scalar source
  // Note [Epilogues of rows]: the row instruction's index in code_ once one joined (kNoRow:
  // none), its dim and result shape, and per instruction whether its value is a row value.
  static constexpr std::size_t kNoRow = ~std::size_t(0);
  std::size_t row_at_ = kNoRow;
  std::size_t row_dim_ = 0;
  Shape row_shape_;
  std::vector<bool> row_value_;
  std::unordered_set<const Value*> feeds_row_;    // (note_flush)
  const std::vector<Record>* records_ = nullptr;  // the flush's (note_flush)
  // Note [Reshapes in a group]: the group's frames (empty while it has one, shape_); the
  // values that reshapes relabel; the instructions whose own value a reshape read, once a
  // read; the reshapes' records.
  std::vector<Shape> frames_;
  std::vector<Alias> aliases_;
  std::vector<std::uint32_t> reshaped_direct_;
  std::vector<Record*> views_;
  // Note [Closing lists]: a closing group's members and views, swapped out of members_ and
  // views_ (which clear() then empties for the next group) and back at the next close, so
  // both pairs keep their storage from group to group: moved out, members_ grew afresh
  // for every group, seven allocations for one of 64 ops.
  std::vector<Record*> closing_members_, closing_views_;
  std::vector<const Value*> ew_read_;  // read by element-wise records, sorted (note_flush)
  std::vector<std::shared_ptr<Value>> inputs_;
  std::vector<std::int32_t> input_uses_;
  std::vector<std::uint32_t> input_frame_;  // per input: the frame it is read in
  std::vector<char> sig_buffer_;            // where close() writes a signature
  std::uint64_t group_ = 0;                 // the open group's number (0: none)
  // The product's last extent where the open group starts with a Matmul (Note [Matmul
  // epilogues]), else 0 (a product of no columns opens no group).
  std::size_t matmul_n_ = 0;
  bool conv_ = false;       // the open group starts with a Conv (Note [Conv epilogues])
  ir::Window conv_window_;  // that Conv's (FusedGroup::conv_window)
  std::size_t conv_groups_ = 1;
  // Note [Coarsened iteration space]: the run of fine_ (the iteration space before) that
  // shape_ merged, where a reduction coarsened it.
  std::optional<std::pair<std::size_t, std::size_t>> merged_;
  Shape fine_;
  static inline std::atomic<std::uint64_t> groups_opened_{0};
};

void Grouper::close(CloseReason why) {
  if (members_.empty()) return;
  // A group whose row instruction is still its last ended in it, whatever closes it now
  // (Note [Epilogues of rows]: no epilogue joined).
  if (in_epilogue() && row_at_ + 1 == code_.size()) why = CloseReason::Reduction;
  if (members_.size() == 1) {  // nothing to fuse: the op, then its reshapes, run alone
    Record& r = *members_.front();
    for (Value* v : produced_) v->group_id = -1;
    for (const Alias& a : aliases_) a.v->group_id = -1;
    closing_views_.swap(views_);  // (Note [Closing lists])
    clear();
    run_constants_read_by(r);
    run_alone(*shared_, r);
    for (Record* w : closing_views_) run_alone(*shared_, *w);
    closing_views_.clear();
    return;
  }
  const auto n_in = static_cast<std::int32_t>(inputs_.size());
  const auto renumber = [&](std::int32_t id) {
    return id >= kInternalBase ? id - kInternalBase + n_in : id;
  };
  for (auto& in : code_) {
    for (auto& a : in.args) {
      if (a >= 0) a = renumber(a);
    }
  }
  // Liveness: uses of each internal value inside the group.
  std::vector<std::int32_t> uses(code_.size(), 0);
  for (const auto& in : code_) {
    for (std::int32_t a : in.args) {
      if (a >= n_in) ++uses[static_cast<std::size_t>(a - n_in)];
    }
  }
  FusedGroup g;
  g.shape = shape_;
  backend::FusionGroupInfo info;
  info.ops.reserve(code_.size());
  // The values that receive a result: (value, the index of that result among the outputs).
  std::vector<std::pair<Value*, std::size_t>> out_values;
  out_values.reserve(code_.size() + aliases_.size());
  // The reads in the group of each instruction's own value, where reshapes relabel some
  // (Note [Reshapes in a group]): its uses, less those through relabellings, plus the
  // reshapes that read it. (Empty otherwise: then they are its uses.)
  std::vector<std::int32_t> reads;
  if (!aliases_.empty()) {
    reads = uses;
    for (const Alias& a : aliases_) reads[instr_of(*a.v)] -= a.code_reads;
    for (std::uint32_t i : reshaped_direct_) ++reads[i];
  }
  // Relabelled values are needed as values of their own.
  std::vector<std::pair<Value*, std::size_t>> relabelled;
  for (const Alias& a : aliases_) {
    const std::size_t i = instr_of(*a.v);
    a.v->group_id = -1;
    const std::int32_t later = add_pending_uses_locked(*a.v, -a.reads);  // (pending here)
    if (later > 0 || !a.v->dropped.load(std::memory_order_acquire)) relabelled.push_back({a.v, i});
  }
  const std::int32_t* own_reads = reads.empty() ? uses.data() : reads.data();
  for (std::size_t i = 0, m = 0, n_code = code_.size(); i < n_code; ++i) {
    Value& v = *produced_[i];
    v.group_id = -1;
    const std::int32_t n = own_reads[i];
    // (Pending in the flushing stream: Note [Reads of a pending value].)
    const std::int32_t later = add_pending_uses_locked(v, -n);
    if (is_fill_[i]) {  // a source: never an output (Note [Scalar sources])
      ++info.sources;
      continue;
    }
    const bool needed = later > 0 || !v.dropped.load(std::memory_order_acquire);
    bool as_other = false;
    for (const auto& a : relabelled) as_other = as_other || a.second == i;
    if (needed || as_other) {
      const std::size_t k = g.outputs.size();
      g.outputs.push_back(n_in + static_cast<std::int32_t>(i));
      if (needed) out_values.push_back({&v, k});
      for (auto& a : relabelled) {
        if (a.second == i) out_values.push_back({a.first, k});
      }
    } else {
      ++info.elided;
      info.bytes_saved += v.bytes() * static_cast<std::size_t>(1 + uses[i]);
    }
    info.ops.push_back(op_label(members_[m++]->op));
  }
  // The signature (see the top of this file), in bytes: each number a varint (7 bits a
  // byte, the high bit set while more follow) in a fixed order, every list preceded by its
  // length, so two structures never share one — built with no formatting, as it is on the
  // recording path's budget (once per group).
  // The bytes are written through a pointer into the Grouper's buffer, sized for the most
  // they can take (10 bytes a number), and copied out once.
  std::size_t numbers = 4 + shape_.rank() + g.outputs.size() + 7 * code_.size();
  for (const auto& v : inputs_) numbers += 4 + std::max(v->shape().rank(), shape_.rank());
  if (sig_buffer_.size() < 2 + 10 * numbers) sig_buffer_.resize(2 + 10 * numbers);
  char* at = sig_buffer_.data();
  *at++ = 'e';
  *at++ = 'w';
  const auto put = [&at](std::uint64_t x) {
    while (x >= 0x80) {
      *at++ = static_cast<char>((x & 0x7f) | 0x80);
      x >>= 7;
    }
    *at++ = static_cast<char>(x);
  };
  std::vector<std::size_t> extents{1};  // dim classes: extents[c] is class c's extent
  extents.reserve(8);
  const auto cls = [&](std::size_t e) {
    std::size_t c = 0;
    while (c < extents.size() && extents[c] != e) ++c;
    if (c == extents.size()) extents.push_back(e);
    put(c);
  };
  put(shape_.rank());
  for (std::size_t d = 0; d < shape_.rank(); ++d) cls(shape_[d]);
  put(inputs_.size());
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    Value& v = *inputs_[k];
    const bool last = v.dropped.load(std::memory_order_acquire) &&
                      v.pending_uses.load(std::memory_order_acquire) == input_uses_[k];
    ir::Handle h = take_input(v, input_uses_[k]);
    // The input's shape in the iteration space where it is not its own (a view either way).
    std::optional<Shape> to;
    if (merged_) {
      // Split to the fine space's dims, then the run merged (Note [Coarsened iteration
      // space], as coarsened_row_dim checked).
      to = merged(input_shape_in(v.shape(), frames_[input_frame_[k]], fine_), *merged_);
    } else if (!frames_.empty() && input_frame_[k] != kMatmulFrame &&
               frames_[input_frame_[k]] != shape_) {
      // Read in a frame other than the iteration space: split to its dims.
      to = input_shape_in(v.shape(), frames_[input_frame_[k]], shape_);
    }
    if (to && *to != v.shape()) {
      h = std::move(shared_->inner->execute(ir::Reshape{h, std::move(*to)})[0]);
    }
    const Shape& hs = h->shape();
    put(static_cast<std::uint64_t>(v.dtype()));
    put(hs.rank());
    for (std::size_t d = 0; d < hs.rank(); ++d) cls(hs[d]);
    put(v.layout);
    put(last ? 1 : 0);
    g.inputs.push_back(std::move(h));
  }
  put(code_.size());
  for (const auto& in : code_) {
    put(static_cast<std::uint64_t>(in.kind));
    put(fn_code(in));
    put(in.dim);
    put(static_cast<std::uint64_t>(in.out));
    for (std::int32_t a : in.args) put(static_cast<std::uint64_t>(a + 1));
  }
  put(g.outputs.size());
  for (std::int32_t o : g.outputs) put(static_cast<std::uint64_t>(o));
  g.signature.assign(sig_buffer_.data(), at);
  g.key = hash_bytes(g.signature);
  g.code = code_;  // (a copy: code_ keeps its storage for the next group)
  if (conv_) {
    g.conv_window = std::move(conv_window_);
    g.conv_groups = conv_groups_;
  }
  info.inputs = g.inputs.size();
  info.outputs = g.outputs.size();
  info.key = g.key;
  info.fused = shared_->inner->runs_fused();
  info.closed = why;
  closing_members_.swap(members_);  // (Note [Closing lists])
  closing_views_.swap(views_);
  const bool reshaped = !frames_.empty();
  clear();
  const std::size_t n_out = g.outputs.size();
  auto outs = shared_->inner->run_fused(std::move(g));
  EMBER_ASSERT(outs.size() == n_out);
  for (std::size_t j = 0; j < out_values.size(); ++j) {
    auto [v, k] = out_values[j];
    const bool last = j + 1 == out_values.size() || out_values[j + 1].second != k;
    v->inner = last ? std::move(outs[k]) : outs[k];
    // A result has the iteration space's shape (its dim reduced, for a Reduce); a value of
    // another frame is a reshape of it, a view of the contiguous result.
    if (reshaped && v->inner->shape() != v->shape())
      v->inner = std::move(shared_->inner->execute(ir::Reshape{v->inner, v->shape()})[0]);
    v->state = State::Ready;
  }
  for (auto* list : {&closing_members_, &closing_views_}) {
    for (Record* r : *list) {
      if (r->outs[0]->state == State::Pending) r->outs[0]->state = State::Elided;
    }
    list->clear();
  }
  shared_->report.group(std::move(info));
}

}  // namespace

// This thread's Grouper (Note [One grouper a thread]), found once a flush: used in place, a
// thread_local's every member use had become a __tls_get_addr call.
[[gnu::noinline]] static Grouper& thread_grouper() {
  static thread_local Grouper g;
  return g;
}

void run_records(Shared& shared, std::vector<Record>& records, CloseReason why) {
  Grouper& g = thread_grouper();
  g.begin(shared);
  try {
    g.note_flush(records);
    for (Record& r : records) g.add(r);
    g.close(why);
  } catch (...) {
    g.begin(shared);  // (drops the failed group's references to its values now)
    throw;
  }
}

}  // namespace ember::fusion
