// pnmem/engine/counters.hpp - what the engine-facing pieces count, for metrics.
//
// One instance per engine (or per model), shared by the admit wrapper, the
// back-pressure gate and the metrics exposition. Lock-free: every field is an
// independent relaxed atomic counter, incremented on the decision path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "pnmem/admission.hpp"
#include "pnmem/mem_level.hpp"

namespace pnmem {

inline constexpr int admit_reason_count = static_cast<int>(admit_reason::not_sampled) + 1;
static_assert(to_string(static_cast<admit_reason>(admit_reason_count)) == "invalid",
              "admit_reason gained a value: admit_reason_count must count it");

struct engine_counters {
  // Admission outcomes by reason: admitted (fits), capped (window, prefill_window, host_budget,
  // die_vram), denied (psi_stall, host_reserve, host_budget, die_vram, bad_request).
  std::array<std::atomic<std::uint64_t>, admit_reason_count> admitted{};
  std::array<std::atomic<std::uint64_t>, admit_reason_count> capped{};
  std::array<std::atomic<std::uint64_t>, admit_reason_count> denied{};
  std::atomic<std::uint64_t> fail_open{0};  // no watcher running: admitted without a check

  // Level transitions observed (from, to).
  std::array<std::array<std::atomic<std::uint64_t>, mem_level_count>, mem_level_count> level_transitions{};

  // Times the ladder reduced something (a degraded plan was applied), by level.
  std::array<std::atomic<std::uint64_t>, mem_level_count> ladder_degradations{};
  // Not a metric: rung 3's clamp as last logged through admissions counted here (engine/admit.hpp),
  // so the line is logged when the clamp engages, changes or lifts, not on every admission; 0 = none.
  std::atomic<std::uint64_t> ladder_logged{0};

  // The back-pressure gate.
  std::atomic<std::uint64_t> gate_acquired{0};     // slots handed out
  std::atomic<std::uint64_t> gate_waits{0};        // acquirers that had to wait
  std::atomic<std::uint64_t> gate_overloaded{0};   // fast failures at CRITICAL ("overloaded, retry")
  std::atomic<std::uint64_t> gate_timed_out{0};
  std::atomic<std::uint64_t> gate_cancelled{0};
  std::atomic<std::uint64_t> gate_queue_full{0};

  // Requests held at the reserve (engine/admit_wait.hpp, zero_cost_rule::hold): served once the box let
  // them start, or refused when the engine's patience ran out.
  std::atomic<std::uint64_t> held_served{0};
  std::atomic<std::uint64_t> held_timed_out{0};

  // The shed hook (C pnmem_set_shed_hook): the calls that freed something, and the bytes they freed.
  std::atomic<std::uint64_t> shed_calls{0};
  std::atomic<std::uint64_t> shed_freed_bytes{0};

  static void bump(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

  void count(const admit_result& r) noexcept {
    const auto i = static_cast<std::size_t>(r.reason);
    if (i >= static_cast<std::size_t>(admit_reason_count)) return;
    switch (r.verdict) {
      case verdict::admit: bump(admitted[i]); break;
      case verdict::cap: bump(capped[i]); break;
      case verdict::reject: bump(denied[i]); break;
    }
  }

  void count_shed(std::uint64_t freed) noexcept {
    bump(shed_calls);
    shed_freed_bytes.fetch_add(freed, std::memory_order_relaxed);
  }

  void count_transition(mem_level from, mem_level to) noexcept {
    const auto f = static_cast<std::size_t>(from);
    const auto t = static_cast<std::size_t>(to);
    if (f < level_transitions.size() && t < level_transitions.size()) bump(level_transitions[f][t]);
  }
};

}  // namespace pnmem
