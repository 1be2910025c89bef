// The lazy stream of the Fusion decorator: values, records and the per-thread stream that
// holds them until a flush. Private to src/fusion/.
//
// Note [Values and handles]: a user-visible handle owns a Value; records own the Values
// they read and produce. The handle's last reference dying is the drop event: it marks
// the Value dropped, so a flush knows which results nobody can read any more (they need
// not be written) and which operands it may hand to the inner backend as the only
// reference (in-place reuse, Note [In-place reuse] of the Cpu). A Value's state and inner
// handle are written only by a flush of the stream that produced it, under that stream's
// mutex; once Ready they do not change but for the move of a dropped value's inner handle
// into its last reader.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/backend/backend.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/fusion/fusion.hpp"
#include "fusion/report.hpp"

namespace ember::fusion {

struct Stream;

enum class State : std::uint8_t {
  Pending,   // recorded, not run
  Ready,     // inner holds the value
  Consumed,  // dropped, and its inner handle went to its last reader
  Elided,    // dropped inside a fused group: never written
  Failed,    // its op (or one before it in the stream) threw: error says what
};

// What a value's layout is known to be, for the group key's layout class: a fresh
// result, or the result of a view op (by its kind).
constexpr std::uint8_t kFresh = 0xff;

// Note [One shape per value]: a Value is the TensorNode its handle points to, so its shape
// is stored once. The handle a user holds is an aliasing shared_ptr to the Value whose
// control block is a small Holder (handle_of): the user's references are counted apart from
// the records', and the Holder's destructor is the drop event. The Value points at the
// Holder's reference to it (`self`), so that an op holding a handle gets a record's
// reference from it; it is valid while a handle exists. An op given the only handle takes
// the Holder's reference itself, and the drop event with it (Note [The last handle's
// reference]).
struct Value final : ir::TensorNode {
  Value(const void* owner, Shape s, DType d, std::shared_ptr<Stream> st, State state)
      : TensorNode(std::move(s), d), owner(owner), stream(std::move(st)), state(state) {}
  const void* decorator() const override { return owner; }
  DType dtype() const { return dtype_; }

  const void* const owner;               // the Fusion backend whose value this is
  const std::shared_ptr<Stream> stream;  // the producing stream; null: made Ready
  State state;
  ir::Handle inner;
  std::string error;
  std::uint8_t layout = kFresh;
  std::atomic<bool> dropped{false};
  // Set and read only by a flush of the producing stream (under its mutex): the id of this
  // pending value in the open group (valid while `group` is that group's number).
  std::uint64_t group = 0;
  std::int32_t group_id = -1;
  // A one-element Fill's value, where the value is one (Note [Scalar constants]); its
  // shape and dtype are the value's.
  struct Constant {
    double value;
    std::int64_t int_value;
  };
  std::optional<Constant> constant;
  std::atomic<std::int32_t> pending_uses{0};  // records not yet run that read it
  // Held while a reader takes `inner` (take_input): readers of one Ready value may be
  // flushed by two streams at once (Note [Readers in two streams]).
  std::mutex take_mu;
  std::shared_ptr<Value>* self = nullptr;  // the Holder's (Note [One shape per value])

  std::size_t bytes() const { return shape_.num_elements() * size_of(dtype_); }
};

// Note [Scalar constants]: a one-element Fill (a scalar operand: `x + 1.0`, `x * 0.5`), on an
// inner backend whose groups take Fill sources, is recorded as no op: its value is made
// Pending in the recording stream with the fill in it (Value::constant), and nothing else.
// A group that reads it gets a Fill instruction (Note [Scalar sources] in
// elementwise_fuser.cpp) and never reads it from memory; it runs (run_constant) only where
// something needs it in memory — an op run alone reading it, or a read (materialize) — at
// any later time, since it depends on nothing. Recorded as an op it cost a record and its
// flush, half of what `add_scalar` added on the decorator (the launch_overhead workload).
// Its state changes only under its stream's mutex, as a recorded value's do.
//
// Whether v is a scalar constant not yet run: a source instruction for the groups reading it.
inline bool is_source(const Value& v) { return v.constant && v.state == State::Pending; }
// The Fill of the scalar constant v; with its shape (to run it) or without (its bits).
ir::Fill constant_fill(const Value& v, bool with_shape);
// Runs the scalar constant v on the inner backend, its stream's mutex held: v is Ready.
void run_constant(Value& v);

// A new value, in a block of this thread's free lists (Note [Value blocks]).
std::shared_ptr<Value> make_value(const void* owner, Shape s, DType d, std::shared_ptr<Stream> st,
                                  State state);
// The user-visible handle of v (Note [Values and handles], Note [One shape per value]).
ir::Handle handle_of(std::shared_ptr<Value> v);

// A record's operands, one per operand slot of its op (null: absent); up to three held in
// place, since nearly every op has that few.
class Args {
 public:
  explicit Args(std::size_t n = 0) : n_(n) {
    if (n > kInPlace) heap_.resize(n);
  }
  std::size_t size() const { return n_; }
  std::shared_ptr<Value>& operator[](std::size_t i) { return data()[i]; }
  const std::shared_ptr<Value>& operator[](std::size_t i) const { return data()[i]; }
  const std::shared_ptr<Value>* begin() const { return data(); }
  const std::shared_ptr<Value>* end() const { return data() + n_; }

 private:
  static constexpr std::size_t kInPlace = 3;
  std::shared_ptr<Value>* data() { return n_ > kInPlace ? heap_.data() : in_place_.data(); }
  const std::shared_ptr<Value>* data() const {
    return n_ > kInPlace ? heap_.data() : in_place_.data();
  }
  std::array<std::shared_ptr<Value>, kInPlace> in_place_;
  std::vector<std::shared_ptr<Value>> heap_;
  std::size_t n_;
};

// A record's results (at most three: Svd's S, U and Vh; two for Sort and BatchNorm), held
// in place.
class Outs {
 public:
  void push_back(std::shared_ptr<Value> v) {
    EMBER_ASSERT(n_ < v_.size());
    v_[n_++] = std::move(v);
  }
  std::size_t size() const { return n_; }
  const std::shared_ptr<Value>& operator[](std::size_t i) const { return v_[i]; }
  const std::shared_ptr<Value>& back() const { return v_[n_ - 1]; }
  const std::shared_ptr<Value>* begin() const { return v_.data(); }
  const std::shared_ptr<Value>* end() const { return v_.data() + n_; }

 private:
  std::array<std::shared_ptr<Value>, 3> v_;
  std::size_t n_ = 0;
};

struct Record {
  Record(ir::Op&& o, Args&& a, Outs&& r)
      : op(std::move(o)), args(std::move(a)), outs(std::move(r)) {}
  ir::Op op;  // operand slots null: see args; its result shape moved out (see below)
  Args args;
  Outs outs;
  // A Random's counters, reserved when it was recorded (Note [Reserved draws] in
  // backend/fused_group.hpp), where the inner backend takes them (Shared::random).
  std::optional<backend::RandomCounters> draw;
};

// Note [Result shapes moved to values]: Binary, Where and Fill carry their result's shape,
// and a recorded op's Value needs that shape too; rather than copy it (an allocation per
// value), the record's op gives it to the Value (take_result_shape), and gets a copy back
// only when it runs alone (give_back_result_shape): a fused member never reads its own. So
// nothing reads the shape field of a recorded op but through its outputs.
//
// The op's own copy of its result's shape, where it carries one (else null).
template <class T>
Shape* carried_shape(T& op) {
  if constexpr (std::is_same_v<T, ir::Binary> || std::is_same_v<T, ir::Where>) {
    return &op.out_shape;
  } else if constexpr (std::is_same_v<T, ir::Fill>) {
    return &op.shape;
  } else {
    return nullptr;
  }
}
// Before r's op runs on the inner backend: gives it back the shape its Value took.
void give_back_result_shape(Record& r);

// Whether k is a row op: a reduction, softmax or layer norm, which a group may take along rows
// (Note [Fused rows] in backend/fused_group.hpp).
inline bool is_row_op(ir::OpKind k) {
  return k == ir::OpKind::Reduce || k == ir::OpKind::Softmax || k == ir::OpKind::LayerNorm;
}

// What the streams of one Fusion device share.
struct Shared {
  Shared(std::shared_ptr<backend::Backend> in, const Options& opt)
      : inner(std::move(in)),
        options(opt),
        fills(inner->fused_caps().fills),
        random(inner->fused_caps().random),
        row_reduction(inner->fused_caps().row_reduction),
        row_epilogue(row_reduction && inner->fused_caps().row_epilogue),
        report(opt.log) {}
  const std::shared_ptr<backend::Backend> inner;
  const Options options;
  const bool fills;   // inner's run_fused takes Fill sources (Note [Scalar sources])
  const bool random;  // ... and Random sources, at counters reserved when recorded
  bool (*const row_reduction)(ir::ReduceFn, DType);  // groups may end in such a Reduce
  const bool row_epilogue;  // ... or go on after a row instruction (Note [Row epilogues])
  ReportState report;
};

// Note [Ops run at once, counted by their stream]: an op that cannot fuse, recorded with
// nothing pending, runs at once (FusionBackendImpl::execute) and counts in the report as a
// record run alone. Counted on the report's atomics that was two locked read-modify-writes
// an op (about 16 ns of the 50 an op the decorator added to a chain of cumsums), so the
// recording thread counts it in its own stream, with a plain load and store (it is the
// only writer); the report adds the counts of the live streams when it is read, and a
// stream gives its count to the report when it ends (ReportState::retire_now).
struct Stream {
  explicit Stream(std::shared_ptr<Shared> s) : shared(std::move(s)) {}
  ~Stream() { shared->report.retire_now(ran_now.load(std::memory_order_relaxed)); }
  void count_ran_now() {
    ran_now.store(ran_now.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::atomic<std::size_t> ran_now{0};  // ops run at once (written by its thread alone)
  std::mutex mu;
  std::vector<Record> records;
  // Whether records is non-empty, for the recording thread to read without the lock: only
  // it adds records, so a false it reads stays false until it records again.
  std::atomic<bool> has_records{false};
  std::size_t pending_bytes = 0;
  const std::shared_ptr<Shared> shared;
};

// Runs every record of s (s.mu held), grouping what fuses; on an exception every value
// not yet produced is Failed with its message, the stream is emptied and the exception
// propagates.
void flush_locked(Stream& s, backend::CloseReason why);
// The inner handle of v for an op that reads it `uses` times: v's own reference when v is
// dropped and these are its last pending reads (so the inner backend may reuse it in
// place), else a copy. v must be Ready.
//
// Note [Readers in two streams]: a Ready value (an input made by from_data, or one flushed
// already) may have pending readers in the streams of two threads, and those streams may
// flush at the same time. Each reader's take_input counts its reads off and copies or
// moves `inner` under the value's take_mu, so exactly the last one moves it and no copy
// races with the move.
//
// Note [Counted before the drop]: "the last reader" is two facts read together, no pending
// reads left and no handle left (dropped). A record counts its read (pending_uses) before
// the handle it was given is dropped (the drop's release store orders the count before it),
// and take_input reads `dropped` before it counts its reads off: seen dropped, no handle is
// left to record another read, and every read recorded is counted; seen alive, it copies.
// So take_input sees either the new count or a handle still alive. Counted after the drop,
// a flush of the other stream could see the last handle gone and the new read not yet
// counted, and move `inner` away from a read still to come: the invariant stop "a group
// input is Consumed" (EMBER_CPU_ISA=avx2, seed 400000001 of the fusion differential: a
// program's input read by the two threads' streams at once). (The count was taken under
// take_mu, so that take_input, reading `dropped` after its count, saw the pair whole: three
// locked instructions a read of a ready value, a twentieth of recording `x * w`.)
ir::Handle take_input(Value& v, std::int32_t uses = 1);

// Note [Reads of a pending value]: while v is Pending, every record that reads it is in its
// own stream (another thread's op flushes that stream before it reads v, Note [Readers in
// two streams]), so its pending reads are counted and counted off only under that stream's
// lock: by the recording thread holding it, or by a flush. There they change with a plain
// load and store — a locked read-modify-write per read, on the recording path, cost more
// than the rest of counting it. Once v is Ready, readers in two streams count with atomic
// arithmetic (counted off in take_input, under take_mu). Returns the new count.
inline std::int32_t add_pending_uses_locked(Value& v, std::int32_t d) {
  const std::int32_t n = v.pending_uses.load(std::memory_order_relaxed) + d;
  v.pending_uses.store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace ember::fusion
