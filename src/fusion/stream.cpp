// Flushing a stream: the records run in order, element-wise chains as fused groups
// (fusion/elementwise_fuser.hpp), everything else op by op on the inner backend.
#include "fusion/stream.hpp"

#include <exception>

#include "ember/base/error.hpp"
#include "fusion/block_pool.hpp"
#include "fusion/elementwise_fuser.hpp"

namespace ember::fusion {

namespace {
// The control block of a user's handle: its destructor is the drop event
// (Note [One shape per value]).
struct Holder {
  explicit Holder(std::shared_ptr<Value> v) : value(std::move(v)) {}
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
  ~Holder() {  // (value is null where an op took it: Note [The last handle's reference])
    if (value) value->dropped.store(true, std::memory_order_release);
  }
  std::shared_ptr<Value> value;
};
}  // namespace

std::shared_ptr<Value> make_value(const void* owner, Shape s, DType d, std::shared_ptr<Stream> st,
                                  State state) {
  return std::allocate_shared<Value>(BlockAllocator<Value>{}, owner, std::move(s), d, std::move(st),
                                     state);
}

ir::Handle handle_of(std::shared_ptr<Value> v) {
  Value* node = v.get();
  auto holder = std::allocate_shared<Holder>(BlockAllocator<Holder>{}, std::move(v));
  node->self = &holder->value;
  return ir::Handle(std::move(holder), node);
}

ir::Handle take_input(Value& v, std::int32_t uses) {
  std::lock_guard lk(v.take_mu);
  EMBER_ASSERT(v.state == State::Ready && uses >= 1);
  // `dropped` first (Note [Counted before the drop]).
  const bool dropped = v.dropped.load(std::memory_order_acquire);
  const std::int32_t before =
      v.pending_uses.fetch_sub(uses, std::memory_order_acq_rel) - (uses - 1);
  if (before == 1 && dropped) {
    v.state = State::Consumed;
    return std::move(v.inner);
  }
  return v.inner;
}

void give_back_result_shape(Record& r) {
  std::visit(
      [&](auto& op) {
        if (Shape* s = carried_shape(op)) *s = r.outs[0]->shape();
      },
      r.op);
}

ir::Fill constant_fill(const Value& v, bool with_shape) {
  EMBER_ASSERT(v.constant.has_value());
  return ir::Fill{with_shape ? v.shape() : Shape{}, v.dtype(), v.constant->value,
                  v.constant->int_value};
}

void run_constant(Value& v) {
  EMBER_ASSERT(is_source(v));
  Shared& shared = *v.stream->shared;
  auto outs = shared.inner->execute(constant_fill(v, true));
  EMBER_ASSERT(outs.size() == 1);
  v.inner = std::move(outs[0]);
  v.state = State::Ready;
  shared.report.alone(ir::OpKind::Fill);
}

void run_alone(Shared& shared, Record& r) {
  give_back_result_shape(r);
  ir::Op op = std::move(r.op);
  for (std::size_t i = 0; i < r.args.size(); ++i) {
    if (r.args[i]) ir::operand(op, i) = take_input(*r.args[i]);
  }
  const ir::OpKind kind = ir::kind_of(op);
  // A draw at the counters it reserved when recorded (Note [Reserved draws]).
  auto outs =
      r.draw ? std::vector<ir::Handle>{shared.inner->draw_random(std::get<ir::Random>(op), *r.draw)}
             : shared.inner->execute(std::move(op));
  EMBER_ASSERT(outs.size() == r.outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    r.outs[k]->inner = std::move(outs[k]);
    r.outs[k]->state = State::Ready;
  }
  shared.report.alone(kind);
}

void flush_locked(Stream& s, backend::CloseReason why) {
  if (s.records.empty()) return;
  std::vector<Record> records;
  records.swap(s.records);  // (the stream keeps its storage: see the end)
  s.has_records.store(false, std::memory_order_release);
  s.pending_bytes = 0;
  s.shared->report.flush(records.size(), why);
  try {
    run_records(*s.shared, records, why);
  } catch (const std::exception& e) {
    for (Record& r : records) {
      for (auto& v : r.outs) {
        v->group_id = -1;
        if (v->state == State::Pending) {
          v->state = State::Failed;
          v->error = e.what();
        }
      }
    }
    throw;
  }
  // The records' storage goes back to the stream, so the next records do not grow a new
  // vector op by op.
  records.clear();
  if (s.records.empty()) s.records.swap(records);
}

}  // namespace ember::fusion
