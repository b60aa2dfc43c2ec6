// pnmem/engine/fleet_load.hpp - what a fleet router reads from one model server.
//
// When a deployment outgrows one box, an inference gateway routes each request to one of
// several model servers by the numbers of its model-server protocol (the Gateway API
// Inference Extension's endpoint picker, which llm-d builds on). The protocol fixes each
// metric's type and meaning, not its name (the picker is told the names by flags):
//
//   TotalQueuedRequests    gauge  requests waiting to run         pnmem_queued_requests
//   TotalRunningRequests   gauge  requests being served           pnmem_running_requests
//   KVCacheUtilization     gauge  fraction of the KV cache in     pnmem_kv_cache_usage_ratio
//                                 use, from 0 to 1
//
// prometheus_text(s, &counters, p, &load) (engine/metrics.hpp) writes them, with pnmem's own
// series, for an engine's /metrics. A fleet_load says what they are now:
//
//   gate_load(gate)     the back-pressure gate's waiting acquirers (queued), slots held
//                       (running) and slot capacity (which follows the ladder: under pressure
//                       the same running count is a larger share)
//   cuda::add_kv(load, owner.tally())  (pnmem/cuda/buffer_owner.hpp) the CUDA owner's KV
//                       bytes: the bound slots' over the ring's; several owners add up
//
// and an engine adds what only it knows (requests in its own queue ahead of the gate, its
// block manager's KV bytes). KVCacheUtilization is the bytes' fraction when KV bytes are
// known, else the fraction of the slot capacity in use (an engine whose slots each hold a
// whole window, as the CUDA owner's and llama.cpp's server's do, has exactly that much of its
// KV in use), else 0. Above 1 (slots held past a capacity the ladder lowered) reads 1.
//
// A pressured node should stop getting traffic at all rather than look busy: that is the
// readiness probe's job (`pnmem probe --max-level tight`; docs/fleet.md), which takes the pod
// out of the endpoints the picker chooses from.
#pragma once

#include <cstdint>

namespace pnmem {

struct fleet_load {
  std::uint64_t queued_requests = 0;    // waiting to run: the gate's queue and the engine's own
  std::uint64_t running_requests = 0;   // being served (decode slots held)
  std::uint64_t slot_capacity = 0;      // requests the engine may run at once now; 0 = unknown
  std::uint64_t kv_used_bytes = 0;      // KV cache bytes in use
  std::uint64_t kv_capacity_bytes = 0;  // KV cache bytes the engine holds for requests; 0 = unknown
};

// KVCacheUtilization: KV bytes used over capacity when the capacity is known, else running
// requests over the slot capacity, else 0; never above 1.
constexpr double kv_cache_usage(const fleet_load& f) noexcept {
  double r = 0;
  if (f.kv_capacity_bytes > 0) {
    r = static_cast<double>(f.kv_used_bytes) / static_cast<double>(f.kv_capacity_bytes);
  } else if (f.slot_capacity > 0) {
    r = static_cast<double>(f.running_requests) / static_cast<double>(f.slot_capacity);
  }
  return r > 1 ? 1.0 : r;
}

// The gate's part (pnmem::backpressure_gate, or anything with its waiting(), in_use() and
// capacity()): three separate reads, each consistent, not one cut of all three.
template <class Gate>
fleet_load gate_load(const Gate& gate) {
  fleet_load f;
  f.queued_requests = static_cast<std::uint64_t>(gate.waiting());
  const auto held = gate.in_use();
  f.running_requests = held > 0 ? static_cast<std::uint64_t>(held) : 0;
  const auto cap = gate.capacity();
  f.slot_capacity = cap > 0 ? static_cast<std::uint64_t>(cap) : 0;
  return f;
}

}  // namespace pnmem
