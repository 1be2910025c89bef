// The Fusion decorator (include/ember/fusion/fusion.hpp): handles, the per-thread streams
// and when they flush.
//
// execute() records the op in the calling thread's stream and returns handles of values
// still to be computed; their shapes and dtypes come from ir/infer. The stream flushes
// (fusion/stream.cpp) when a pending value is read (to_data), on sync and seed, when an op
// no fuser takes is recorded (it runs at once, after what it reads), before an op whose
// output shape depends on values (nonzero), when another thread uses a pending value, and
// when the stream reaches its length or pending-memory cap. With Options::enabled false
// (EMBER_FUSION=0) every op runs at once: a pass-through.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <string>
#include <thread>
#include <type_traits>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"
#include "fusion/elementwise_fuser.hpp"
#include "fusion/stream.hpp"

namespace ember::fusion {

using backend::CloseReason;

namespace {

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  EMBER_CHECK(end && *end == '\0',
              std::string(name) + "='" + v + "': expected a non-negative integer");
  return static_cast<std::size_t>(x);
}

// The stream my_stream() returned last on this thread, and its device's id: trivially
// destructible, so reading it skips tls_streams' guarded initialisation (ids are never
// reused, and the deque keeps the element in place).
struct LastStream {
  std::uint64_t id = 0;
  const std::shared_ptr<Stream>* stream = nullptr;
};
thread_local LastStream tls_last_stream;

// The streams this thread recorded into, flushed when it ends (Note [Thread exit]).
//
// Note [Thread exit]: what a thread leaves pending runs when the thread ends, since another
// thread may hold its values. That flush runs on a thread of its own: this one is being
// torn down, and thread_local objects constructed after this list — the inner backend's
// scratch buffers, for one — are already destroyed, so kernels run here would use them.
struct ThreadStreams {
  // (A deque: my_stream hands out references to its elements, which must outlive a stream
  // of another Fusion device added meanwhile.)
  std::deque<std::pair<std::uint64_t, std::shared_ptr<Stream>>> list;
  ~ThreadStreams() {
    tls_last_stream = {};
    for (auto& [id, s] : list) {
      std::lock_guard lk(s->mu);
      if (s->records.empty()) continue;
      Stream& stream = *s;
      std::thread([&stream] {
        try {
          flush_locked(stream, CloseReason::ThreadExit);
        } catch (...) {  // the values say what failed; nobody is left to tell
        }
      }).join();
    }
  }
};
thread_local ThreadStreams tls_streams;

std::atomic<std::uint64_t> next_backend_id{1};

// Calls out(shape, dtype) for each output of op, whose operands are handles with shapes
// and dtypes; a shape op carries is moved out (Note [Result shapes moved to values]).
template <class Out>
void outputs_of(ir::Op& op, Out&& out) {
  std::visit(
      [&](auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, ir::Sort>) {
          out(ir::out_shape(o), ir::out_dtype(o, 0));
          out(ir::out_shape(o), ir::out_dtype(o, 1));
        } else if constexpr (std::is_same_v<T, ir::BatchNorm> ||
                             std::is_same_v<T, ir::BatchNormGrad> ||
                             std::is_same_v<T, ir::Attention> ||
                             std::is_same_v<T, ir::RmsNormGrad> ||
                             std::is_same_v<T, ir::GroupNorm> ||
                             std::is_same_v<T, ir::GroupNormGrad>) {
          out(ir::out_shape(o, 0), ir::out_dtype(o, 0));
          out(ir::out_shape(o, 1), ir::out_dtype(o, 1));
        } else if constexpr (std::is_same_v<T, ir::Svd> || std::is_same_v<T, ir::AttentionGrad>) {
          out(ir::out_shape(o, 0), ir::out_dtype(o, 0));
          out(ir::out_shape(o, 1), ir::out_dtype(o, 1));
          out(ir::out_shape(o, 2), ir::out_dtype(o, 2));
        } else if constexpr (std::is_same_v<T, ir::Nonzero>) {
          EMBER_ASSERT(false);  // data-dependent: never recorded
        } else if (Shape* carried = carried_shape(o)) {
          out(std::move(*carried), ir::out_dtype(o));
        } else {
          out(ir::out_shape(o), ir::out_dtype(o));
        }
      },
      op);
}

// An op's operand slots (null where absent), found once: each ir::operand(op, i) visits the
// op's variant again.
class Slots {
 public:
  explicit Slots(ir::Op& op) {
    ir::for_each_operand(op, [&](ir::Handle& h) {
      if (n_ < in_place_.size()) {
        in_place_[n_] = &h;
      } else {
        if (heap_.empty()) heap_.assign(in_place_.begin(), in_place_.end());
        heap_.push_back(&h);
      }
      ++n_;
    });
  }
  std::size_t size() const { return n_; }
  ir::Handle& operator[](std::size_t i) const {
    return *(n_ > in_place_.size() ? heap_[i] : in_place_[i]);
  }

 private:
  std::array<ir::Handle*, 4> in_place_{};
  std::vector<ir::Handle*> heap_;
  std::size_t n_ = 0;
};

// Ops a fuser may take; any other op flushes the stream when it is recorded. A Matmul (or a Conv)
// waits for the element-wise ops that form its epilogue. A Reduce, a Softmax or a LayerNorm waits
// in the stream when the inner backend fuses row reductions (Note [Fused rows]): by the flush, the
// temporaries of its prologue are dropped and need not be written.
bool fusable(ir::OpKind k, const Shared& shared) {
  const ir::OpClass c = ir::op_class(k);
  return c == ir::OpClass::ElementWise || c == ir::OpClass::View || c == ir::OpClass::Creation ||
         k == ir::OpKind::Matmul ||  // opens a group for its epilogue (Note [Matmul epilogues])
         k == ir::OpKind::Conv ||    // so does a forward conv (Note [Conv epilogues])
         (is_row_op(k) && shared.row_reduction);
}

class FusionBackendImpl final : public backend::Backend, public backend::FusionInspector {
 public:
  FusionBackendImpl(std::shared_ptr<backend::Backend> inner, const Options& opt)
      : shared_(std::make_shared<Shared>(std::move(inner), opt)) {}

  ~FusionBackendImpl() override {
    std::lock_guard lk(streams_mu_);
    for (auto& w : streams_) {
      if (auto s = w.lock()) {
        std::lock_guard slk(s->mu);
        try {
          flush_locked(*s, CloseReason::Sync);
        } catch (...) {  // the values say what failed
        }
      }
    }
  }

  std::string name() const override { return inner_be().name() + "+fusion"; }

  ir::Handle from_data(const TensorData& data) override {
    return ready(inner_be().from_data(data), kFresh);
  }
  ir::Handle adopt_host(std::byte* data, const Shape& shape, DType dtype,
                        std::shared_ptr<const void> owner) override {
    ir::Handle h = inner_be().adopt_host(data, shape, dtype, std::move(owner));
    return h ? ready(std::move(h), kFresh) : nullptr;
  }

  HostTensor empty_host(const Shape& shape, DType dtype) override {
    HostTensor t = inner_be().empty_host(shape, dtype);
    if (t.handle) t.handle = ready(std::move(t.handle), kFresh);
    return t;
  }
  // A pending value is computed first; the Value keeps its inner tensor alive.
  const std::byte* host_data(const ir::Handle& x) override {
    return inner_be().host_data(materialize(unwrap(x), CloseReason::Read));
  }
  TensorData to_data(const ir::Handle& x) override {
    return inner_be().to_data(materialize(unwrap(x), CloseReason::Read));
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    const ir::OpKind kind = ir::kind_of(op);
    if (!shared_->options.enabled) return run_now(std::move(op));
    const std::shared_ptr<Stream>& s = my_stream();
    if (kind == ir::OpKind::Fill && shared_->fills) {  // (Note [Scalar constants])
      auto& f = std::get<ir::Fill>(op);
      if (f.shape.num_elements() == 1) {
        auto v = make_value(this, std::move(f.shape), f.dtype, s, State::Pending);
        v->constant = Value::Constant{f.value, f.int_value};
        std::vector<ir::Handle> outs;
        outs.push_back(handle_of(std::move(v)));
        return outs;
      }
    }
    if (!fusable(kind, *shared_) && !s->has_records.load(std::memory_order_acquire)) {
      // Nothing pending and nothing to fuse with: run it now, as a flush of its one record
      // would, without the record (the cost of ops that cannot fuse: launch_overhead). Only
      // this thread adds records to s, so none can appear meanwhile. Counted by s (Note [Ops
      // run at once, counted by their stream]).
      s->count_ran_now();
      return run_now(std::move(op), false);
    }
    const Slots slots(op);
    const std::size_t n = slots.size();
    // Values pending in another thread's stream: flush that stream first (never holding
    // two stream locks at once).
    for (std::size_t i = 0; i < n; ++i) {
      if (const ir::Handle& h = slots[i]) {
        Value& v = unwrap(h);
        if (v.stream && v.stream != s) materialize(v, CloseReason::CrossThread);
      }
    }
    std::unique_lock lk(s->mu);
    for (std::size_t i = 0; i < n; ++i) {
      const ir::Handle& h = slots[i];
      if (h && static_cast<const Value&>(*h).state == State::Failed) {
        fail(static_cast<const Value&>(*h).error);
      }
    }
    if (kind == ir::OpKind::Nonzero) {
      flush_locked(*s, CloseReason::DataDependent);
      lk.unlock();
      return run_now(std::move(op));
    }
    // Note [The last handle's reference]: an operand that is the only handle of its value
    // (moved in: std::move(x).exp(), a temporary) gives the record its Holder's reference
    // rather than a copy of it: a reference count taken and given back at once is two
    // locked instructions. The drop event (dropped) is then the record's to set, after its
    // read is counted (Note [Counted before the drop]). Taken past the last check that may
    // throw, so an op refused leaves its operands' handles whole.
    Args args(n);
    std::uint32_t took = 0;  // operands whose reference was taken, a bit each
    for (std::size_t i = 0; i < n; ++i) {
      const ir::Handle& h = slots[i];
      if (!h) continue;
      Value& v = static_cast<Value&>(*h);
      if (h.use_count() == 1 && i < 32) {
        args[i] = std::move(*v.self);
        took |= 1u << i;
      } else {
        args[i] = *v.self;
      }
    }
    Outs values;
    outputs_of(op, [&](Shape shape, DType dtype) {
      values.push_back(make_value(this, std::move(shape), dtype, s, State::Pending));
      s->pending_bytes += values.back()->bytes();
    });
    if (ir::op_class(kind) == ir::OpClass::View) {
      values[0]->layout = static_cast<std::uint8_t>(kind);
    }
    std::vector<ir::Handle> outs;
    outs.reserve(values.size());
    for (const auto& v : values) outs.push_back(handle_of(v));
    // Each read is counted before any handle moved in is dropped (Note [Counted before the
    // drop]).
    for (const auto& v : args) {
      if (!v) continue;
      if (v->stream == s && v->state == State::Pending) {
        add_pending_uses_locked(*v, 1);  // (s->mu held: Note [Reads of a pending value])
      } else {
        v->pending_uses.fetch_add(1, std::memory_order_relaxed);
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (took & (1u << i)) args[i]->dropped.store(true, std::memory_order_release);
      slots[i].reset();  // a handle moved in is dropped here (Note [Values and handles])
    }
    Record& rec = s->records.emplace_back(std::move(op), std::move(args), std::move(values));
    if (kind == ir::OpKind::Random && shared_->random && inner_be().supports(rec.op)) {
      // Its counters now, as unfused (Note [Reserved draws]): grouping never changes them.
      rec.draw = inner_be().reserve_random(rec.outs[0]->shape().num_elements());
    }
    s->has_records.store(true, std::memory_order_release);
    if (!fusable(kind, *shared_)) {
      flush_locked(*s, CloseReason::NonFusableOp);
    } else if (s->records.size() >= shared_->options.max_records) {
      flush_locked(*s, CloseReason::StreamCap);
    } else if (s->pending_bytes >= shared_->options.max_pending_bytes) {
      // Over the budget by the running total: count again what is still referenced (a
      // dropped value stays dropped, so the recount only ever shrinks the total).
      std::size_t live = 0;
      for (const Record& rec : s->records) {
        for (const auto& v : rec.outs) {
          if (v->state == State::Pending && !v->dropped.load(std::memory_order_acquire)) {
            live += v->bytes();
          }
        }
      }
      s->pending_bytes = live;
      if (live >= shared_->options.max_pending_bytes) flush_locked(*s, CloseReason::MemoryBudget);
    }
    return outs;
  }

  // Note [Programs pass through]: a group built whole by its caller (ops::ElementwiseProgram:
  // an optimizer's step) is already one pass over memory; recorded op by op it would be
  // regrouped at a cost (the Adam step over 10M params took 1.4-1.75x its time on the plain
  // Cpu). So it runs at once on the inner backend's executor, after what it reads, its inputs
  // handed over where this device holds their only handle, as run_now hands an op's.
  std::vector<ir::Handle> run_fused(backend::FusedGroup group) override {
    for (ir::Handle& h : group.inputs) to_inner(h);
    auto outs = inner_be().run_fused(std::move(group));
    for (auto& o : outs) o = ready(std::move(o), kFresh);
    return outs;
  }

  bool supports(const ir::Op& op) const override { return inner_be().supports(op); }
  void seed(std::uint64_t v) override {
    flush_all(CloseReason::Seed);
    inner_be().seed(v);
  }
  backend::MemoryStats memory_stats() const override { return inner_be().memory_stats(); }
  void empty_cache() override { inner_be().empty_cache(); }
  void sync() override {
    flush_all(CloseReason::Sync);
    inner_be().sync();
  }
  DType default_float() const override { return inner_be().default_float(); }
  DType default_int() const override { return inner_be().default_int(); }
  std::shared_ptr<backend::Backend> inner() const override { return shared_->inner; }
  backend::FusionInspector* fusion_inspector() override { return this; }

  // (The streams are held until the report has read the counts: one ending meanwhile would
  // give the report a count already counted in it.)
  backend::FusionReport report() const override {
    const auto streams = live_streams();
    const auto [pending, ran_now] = stream_counts(streams);
    return shared_->report.snapshot(pending, ran_now);
  }
  void reset_report() override {
    const auto streams = live_streams();
    const auto [pending, ran_now] = stream_counts(streams);
    shared_->report.reset(pending, ran_now);
  }

 private:
  backend::Backend& inner_be() const { return *shared_->inner; }

  // A handle of this device is a Value (Note [One shape per value]), known by its owner.
  Value& unwrap(const ir::Handle& h) const {
    EMBER_CHECK(
        h != nullptr && h->decorator() == this,
        "fusion: a tensor of another device was given to " + name() + " (move it with to_device)");
    return static_cast<Value&>(*h);
  }

  ir::Handle ready(ir::Handle inner, std::uint8_t layout) {
    auto v = make_value(this, inner->shape(), inner->dtype(), nullptr, State::Ready);
    v->inner = std::move(inner);
    v->layout = layout;
    return handle_of(std::move(v));
  }

  // v's inner handle, flushing its stream first when it is pending (a scalar constant
  // runs alone: it depends on nothing).
  static ir::Handle materialize(Value& v, CloseReason why) {
    if (!v.stream) return v.inner;
    std::lock_guard lk(v.stream->mu);
    if (is_source(v)) {
      run_constant(v);
    } else if (v.state == State::Pending) {
      flush_locked(*v.stream, why);
    }
    EMBER_CHECK(v.state != State::Failed, v.error);
    EMBER_ASSERT(v.state == State::Ready);
    return v.inner;
  }

  // Replaces the operand h (of this device) by its inner handle, computed first when
  // pending. An operand holding the only handle of a value nobody else holds (no record, no
  // pending reader in any stream either) is handed over: the inner backend may reuse it in
  // place, as the op would unfused. (v's only owner is then h's Holder, which goes when h is
  // replaced.)
  void to_inner(ir::Handle& h) {
    Value& v = unwrap(h);
    ir::Handle inner = materialize(v, CloseReason::CrossThread);
    if (h.use_count() == 1 && v.self->use_count() == 1 &&
        v.pending_uses.load(std::memory_order_acquire) == 0) {
      v.inner.reset();
      v.state = State::Consumed;
    }
    h = std::move(inner);
  }

  // Runs op at once on the inner backend (pass-through, ops that cannot fuse, data-dependent
  // ops), after what it reads; counted as run alone unless its stream counted it.
  std::vector<ir::Handle> run_now(ir::Op op, bool count = true) {
    ir::for_each_operand(op, [&](ir::Handle& h) {
      if (h) to_inner(h);
    });
    const ir::OpKind kind = ir::kind_of(op);
    auto outs = inner_be().execute(std::move(op));
    shared_->report.alone(kind, count);
    const std::uint8_t layout =
        ir::op_class(kind) == ir::OpClass::View ? static_cast<std::uint8_t>(kind) : kFresh;
    for (auto& o : outs) o = ready(std::move(o), layout);
    return outs;
  }

  // This thread's stream (held by its list until the thread ends).
  const std::shared_ptr<Stream>& my_stream() {
    if (tls_last_stream.id == id_) return *tls_last_stream.stream;
    const std::shared_ptr<Stream>* found = nullptr;
    for (auto& [id, s] : tls_streams.list) {
      if (id == id_) found = &s;
    }
    if (!found) {
      auto s = std::make_shared<Stream>(shared_);
      {
        std::lock_guard lk(streams_mu_);
        std::erase_if(streams_, [](const std::weak_ptr<Stream>& w) { return w.expired(); });
        streams_.push_back(s);
      }
      found = &tls_streams.list.emplace_back(id_, std::move(s)).second;
    }
    tls_last_stream = {id_, found};
    return *found;
  }

  // The records pending in these streams (Note [Records counted by the flush]) and the ops
  // they ran at once (Note [Ops run at once, counted by their stream]).
  static std::pair<std::size_t, std::size_t> stream_counts(
      const std::vector<std::shared_ptr<Stream>>& streams) {
    std::size_t pending = 0, ran_now = 0;
    for (const auto& s : streams) {
      std::lock_guard lk(s->mu);
      pending += s->records.size();
      ran_now += s->ran_now.load(std::memory_order_relaxed);
    }
    return {pending, ran_now};
  }

  std::vector<std::shared_ptr<Stream>> live_streams() const {
    std::vector<std::shared_ptr<Stream>> all;
    std::lock_guard lk(streams_mu_);
    for (auto& w : streams_) {
      if (auto s = w.lock()) all.push_back(std::move(s));
    }
    return all;
  }

  void flush_all(CloseReason why) {
    for (auto& s : live_streams()) {
      std::lock_guard lk(s->mu);
      flush_locked(*s, why);
    }
  }

  std::shared_ptr<Shared> shared_;
  const std::uint64_t id_ = next_backend_id.fetch_add(1);
  mutable std::mutex streams_mu_;
  std::vector<std::weak_ptr<Stream>> streams_;
};

}  // namespace

Options options_from_env() {
  Options o;
  if (const char* v = std::getenv("EMBER_FUSION")) o.enabled = std::string(v) != "0";
  o.log = static_cast<int>(std::min<std::size_t>(env_size("EMBER_FUSION_LOG", 0), 3));
  o.max_records = std::max<std::size_t>(1, env_size("EMBER_FUSION_MAX_RECORDS", o.max_records));
  o.max_pending_bytes = env_size("EMBER_FUSION_MAX_PENDING_MB", o.max_pending_bytes >> 20) << 20;
  return o;
}

std::shared_ptr<backend::Backend> make_fusion_backend(std::shared_ptr<backend::Backend> inner,
                                                      const Options& options) {
  EMBER_CHECK(inner != nullptr, "fusion: no backend to wrap");
  for (backend::Backend* b = inner.get(); b; b = b->inner().get()) {
    EMBER_CHECK(b->autodiff() == nullptr,
                "Device::fusion(): " + inner->name() +
                    " is an autodiff device; autodiff goes outside fusion, so that it sees every "
                    "op: write fusion().autodiff() (\"" +
                    inner->name().substr(0, inner->name().find('+')) + "+fusion+autodiff\")");
  }
  return std::make_shared<FusionBackendImpl>(std::move(inner), options);
}

}  // namespace ember::fusion
