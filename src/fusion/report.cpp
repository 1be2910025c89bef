#include "fusion/report.hpp"

#include <cstdio>

namespace ember::fusion {

namespace {
constexpr std::size_t kRecent = 256;
std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (const auto& x : v) (s += s.empty() ? "" : " ") += x;
  return s;
}
}  // namespace

void ReportState::flush(std::size_t records, backend::CloseReason why) {
  {
    std::lock_guard lk(mu_);
    ++r_.flushes;
    ++r_.flushed[static_cast<std::size_t>(why)];
    flushed_records_ += records;
  }
  if (log_ >= 1) {
    std::fprintf(stderr, "[ember fusion] flush (%s): %zu records\n", backend::name(why), records);
  }
}

void ReportState::alone(ir::OpKind op, bool counted) {
  if (counted) alone_.fetch_add(1, std::memory_order_relaxed);
  if (log_ >= 2) std::fprintf(stderr, "[ember fusion]   alone %s\n", ir::name(op));
}

void ReportState::group(backend::FusionGroupInfo info) {
  std::lock_guard lk(mu_);
  info.plan_cached = !keys_.insert(info.key).second;
  ++r_.groups;
  ++r_.kernels;
  r_.ops_fused += info.ops.size();
  r_.bytes_saved += info.bytes_saved;
  ++(info.plan_cached ? r_.plans_reused : r_.plans_built);
  ++r_.closed[static_cast<std::size_t>(info.closed)];
  if (log_ >= 2) {
    std::fprintf(stderr,
                 "[ember fusion]   group [%s] %zu in -> %zu out, %zu elided, %zu bytes saved, key "
                 "%016llx (%s, %s), closed: %s\n",
                 join(info.ops).c_str(), info.inputs, info.outputs, info.elided, info.bytes_saved,
                 static_cast<unsigned long long>(info.key),
                 info.plan_cached ? "plan reused" : "plan built",
                 info.fused ? "one program" : "op by op", backend::name(info.closed));
  }
  // The recent groups as a ring (the oldest is overwritten; snapshot() puts them in order).
  if (recent_.size() < kRecent) {
    recent_.push_back(std::move(info));
  } else {
    recent_[head_] = std::move(info);
    head_ = (head_ + 1) % kRecent;
  }
}

void ReportState::print_decision(const std::string& line) const {
  std::fprintf(stderr, "[ember fusion]     %s\n", line.c_str());
}

backend::FusionReport ReportState::snapshot(std::size_t pending, std::size_t ran_now) const {
  std::lock_guard lk(mu_);
  backend::FusionReport r = r_;
  const std::size_t since = flushed_records_ + pending;  // (pending_at_reset_ among them)
  const std::size_t all_now = ran_now + retired_now_.load(std::memory_order_relaxed);
  const std::size_t now = all_now > now_at_reset_ ? all_now - now_at_reset_ : 0;
  r.records = now + (since > pending_at_reset_ ? since - pending_at_reset_ : 0);
  const std::size_t alone = alone_.load(std::memory_order_relaxed) + now;
  r.ops_unfused += alone;
  r.kernels += alone;
  r.recent.assign(recent_.begin() + static_cast<std::ptrdiff_t>(head_), recent_.end());
  r.recent.insert(r.recent.end(), recent_.begin(),
                  recent_.begin() + static_cast<std::ptrdiff_t>(head_));
  return r;
}

void ReportState::reset(std::size_t pending, std::size_t ran_now) {
  std::lock_guard lk(mu_);
  r_ = {};
  now_at_reset_ = ran_now + retired_now_.load(std::memory_order_relaxed);
  flushed_records_ = 0;
  pending_at_reset_ = pending;
  alone_.store(0, std::memory_order_relaxed);
  recent_.clear();
  head_ = 0;
  keys_.clear();
}

}  // namespace ember::fusion
