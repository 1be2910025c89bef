// Flushing a stream: the records run in order, element-wise chains as fused groups
// (fusion/elementwise_fuser.hpp), everything else op by op on the inner backend.
#include "fusion/stream.hpp"

#include <exception>

#include "ember/base/error.hpp"
#include "fusion/elementwise_fuser.hpp"

namespace ember::fusion {

ir::Handle take_input(Value& v, std::int32_t uses) {
  std::lock_guard lk(v.take_mu);
  EMBER_ASSERT(v.state == State::Ready && uses >= 1);
  const std::int32_t before =
      v.pending_uses.fetch_sub(uses, std::memory_order_acq_rel) - (uses - 1);
  if (before == 1 && v.dropped.load(std::memory_order_acquire)) {
    v.state = State::Consumed;
    return std::move(v.inner);
  }
  return v.inner;
}

void run_alone(Shared& shared, Record& r) {
  ir::Op op = std::move(r.op);
  for (std::size_t i = 0; i < r.args.size(); ++i) {
    if (r.args[i]) ir::operand(op, i) = take_input(*r.args[i]);
  }
  const char* name = ir::name(ir::kind_of(op));
  auto outs = shared.inner->execute(std::move(op));
  EMBER_ASSERT(outs.size() == r.outs.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    r.outs[k]->inner = std::move(outs[k]);
    r.outs[k]->state = State::Ready;
  }
  shared.report.alone(name);
}

void flush_locked(Stream& s, backend::CloseReason why) {
  if (s.records.empty()) return;
  std::vector<Record> records = std::move(s.records);
  s.records.clear();
  s.pending_bytes = 0;
  s.shared->report.flush(records.size(), why);
  try {
    run_records(*s.shared, records, why);
  } catch (const std::exception& e) {
    for (Record& r : records) {
      for (auto& v : r.outs) {
        v->source = nullptr;  // (the records go now)
        v->group_id = -1;
        if (v->state == State::Pending) {
          v->state = State::Failed;
          v->error = e.what();
        }
      }
    }
    throw;
  }
}

}  // namespace ember::fusion
