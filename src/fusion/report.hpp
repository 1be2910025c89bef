// The Fusion decorator's report: counters, the recent groups and the close reasons behind
// fusion::report(device), and the EMBER_FUSION_LOG lines. Private to src/fusion/.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "ember/backend/fused_group.hpp"

namespace ember::fusion {

class ReportState {
 public:
  explicit ReportState(int log_level) : log_(log_level) {}
  int log_level() const { return log_; }

  // A flush of `records` records, for `why` (they count as recorded from here on; until
  // then the snapshot counts them in their streams: Note [Records counted by the flush]).
  void flush(std::size_t records, backend::CloseReason why);
  // An op run alone (not inside a group); `counted` false: its stream counts it (Note [Ops
  // run at once, counted by their stream] in stream.hpp), only the log line is written.
  void alone(ir::OpKind op, bool counted = true);
  // A group of instructions; fills info.plan_cached from the keys seen before.
  void group(backend::FusionGroupInfo info);
  // The ops a stream ran at once (Note [Ops run at once, counted by their stream] in
  // stream.hpp), given by the stream when it ends.
  void retire_now(std::size_t ran) { retired_now_.fetch_add(ran, std::memory_order_relaxed); }
  // EMBER_FUSION_LOG=3: one decision of the grouping (line() is called only at that level,
  // so the recording path builds no strings otherwise).
  template <class Line>
  void decision(Line&& line) const {
    if (log_ >= 3) print_decision(line());
  }

  // Note [Records counted by the flush]: a record is counted when its stream flushes, not
  // when it is recorded — an atomic count per record was the dearest instruction of the
  // recording path — so the snapshot and the reset take the records still pending in the
  // device's streams (`pending`) from the caller, which holds the streams; and so the ops
  // they ran at once (`ran_now`, each counted as a record run alone).
  backend::FusionReport snapshot(std::size_t pending, std::size_t ran_now) const;
  void reset(std::size_t pending, std::size_t ran_now);

 private:
  void print_decision(const std::string& line) const;

  mutable std::mutex mu_;
  int log_;
  std::atomic<std::size_t> retired_now_{0};  // ops run at once by streams that ended
  std::size_t now_at_reset_ = 0;             // ops run at once before the reset
  std::size_t flushed_records_ = 0;          // records flushed since the reset
  std::size_t pending_at_reset_ = 0;         // records pending then: counted by flushed_records_
  std::atomic<std::size_t> alone_{0};        // ops run alone (counted apart: no lock per op)
  std::vector<backend::FusionGroupInfo> recent_;  // a ring of the last groups
  std::size_t head_ = 0;                          // its oldest entry, once full
  backend::FusionReport r_;
  std::unordered_set<std::uint64_t> keys_;
};

}  // namespace ember::fusion
