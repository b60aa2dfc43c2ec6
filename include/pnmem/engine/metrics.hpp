// pnmem/engine/metrics.hpp - a snapshot and the engine's counters as Prometheus text.
//
// prometheus_text() renders the text exposition format 0.0.4 (the body an engine
// serves on its own /metrics with "Content-Type: text/plain; version=0.0.4"):
// one "# HELP" and one "# TYPE" line per family, then that family's samples.
// `pnmem metrics` prints the same text for one sample of the box.
//
//   gauges    pnmem_level, pnmem_raw_level, pnmem_os_level (0 ok .. 3 critical),
//             pnmem_host_{total,avail,reserve}_bytes,
//             pnmem_psi_{avg10,rate}_percent{kind="some|full"},
//             pnmem_cgroup_{usage,limit,working_set}_bytes,
//             pnmem_die_{free,budget,used,retiring}_bytes{die="N"} (only when there are dies),
//             pnmem_snapshot_seq, pnmem_snapshot_age_seconds (only when the snapshot has a sample time),
//             pnmem_provenance_info{cgroup_mode,psi_mode,limit_cgroup} 1,
//             pnmem_source_read{source}, pnmem_source_failed{source} (0/1)
//   counters  (only with a non-null engine_counters)
//             pnmem_admissions_total{verdict,reason}: every combination the admission can
//               answer, always (0 included), plus any other one whose count is not zero,
//             pnmem_fail_open_total, pnmem_level_transitions_total{from,to} (from != to),
//             pnmem_ladder_degradations_total{level}, pnmem_gate_{acquired,waits,overloaded,
//             timed_out,cancelled,queue_full}_total, pnmem_held_{served,timed_out}_total,
//             pnmem_shed_calls_total, pnmem_shed_freed_bytes_total
//   fleet     (only with a fleet_load: engine/fleet_load.hpp) the model-server protocol's three
//             gauges an inference gateway's endpoint picker routes by:
//             pnmem_queued_requests (TotalQueuedRequests), pnmem_running_requests
//             (TotalRunningRequests), pnmem_kv_cache_usage_ratio (KVCacheUtilization, 0 to 1),
//             and pnmem_slot_capacity (the slots the ratio is over when no KV bytes are known)
//   ledger    (prometheus_ledger_text: a process joined to a box ledger) pnmem_ledger_processes,
//             pnmem_ledger_pending_bytes, pnmem_ledger_credited_bytes{scope};
//             pnmem_ledger_die_pending_bytes, pnmem_ledger_die_retiring_bytes{scope,gpu}
//
// Not on the decision path: it allocates. Counters are read with relaxed loads,
// each on its own (the text is not one atomic cut of all of them).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pnmem/admission.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/config.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/engine/detail/exposition_writer.hpp"
#include "pnmem/engine/fleet_load.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem {

// The Content-Type an HTTP server sends with prometheus_text().
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

namespace detail::metrics {

inline std::uint64_t load(const std::atomic<std::uint64_t>& c) noexcept { return c.load(std::memory_order_relaxed); }

// The (verdict, reason) pairs the admission answers (admission.hpp).
struct outcome {
  verdict v;
  admit_reason r;
};

inline constexpr outcome possible_outcomes[] = {
    {verdict::admit, admit_reason::fits},         {verdict::cap, admit_reason::window},
    {verdict::cap, admit_reason::host_budget},    {verdict::cap, admit_reason::die_vram},
    {verdict::reject, admit_reason::psi_stall},   {verdict::reject, admit_reason::host_reserve},
    {verdict::reject, admit_reason::host_budget}, {verdict::reject, admit_reason::die_vram},
    {verdict::reject, admit_reason::bad_request}, {verdict::cap, admit_reason::prefill_window},
};

constexpr bool is_possible(verdict v, admit_reason r) noexcept {
  for (const auto& o : possible_outcomes) {
    if (o.v == v && o.r == r) return true;
  }
  return false;
}

inline void write_counters(writer& w, const engine_counters& c) {
  constexpr std::string_view adm = "pnmem_admissions_total";
  w.family(adm, "counter", "Admission answers by verdict (admit, cap, reject) and reason.");
  constexpr verdict verdicts[] = {verdict::admit, verdict::cap, verdict::reject};
  for (const verdict v : verdicts) {
    const auto& arr = v == verdict::admit ? c.admitted : (v == verdict::cap ? c.capped : c.denied);
    for (int i = 0; i < admit_reason_count; ++i) {
      const auto r = static_cast<admit_reason>(i);
      const std::uint64_t n = load(arr[static_cast<std::size_t>(i)]);
      if (n == 0 && !is_possible(v, r)) continue;
      w.sample(adm, {{"verdict", to_string(v)}, {"reason", to_string(r)}}, n);
    }
  }

  w.family("pnmem_fail_open_total", "counter",
           "Requests admitted without a check: no watcher running, or the host's memory not read.");
  w.sample("pnmem_fail_open_total", {}, load(c.fail_open));

  constexpr std::string_view tr = "pnmem_level_transitions_total";
  w.family(tr, "counter", "Level changes observed, by the level left and the level entered.");
  for (int f = 0; f < mem_level_count; ++f) {
    for (int t = 0; t < mem_level_count; ++t) {
      const std::uint64_t n = load(c.level_transitions[static_cast<std::size_t>(f)][static_cast<std::size_t>(t)]);
      if (f == t && n == 0) continue;
      w.sample(tr, {{"from", to_string(static_cast<mem_level>(f))}, {"to", to_string(static_cast<mem_level>(t))}}, n);
    }
  }

  constexpr std::string_view lad = "pnmem_ladder_degradations_total";
  w.family(lad, "counter", "Degraded ladder plans applied, by the level that caused them.");
  for (int l = 0; l < mem_level_count; ++l) {
    w.sample(lad, {{"level", to_string(static_cast<mem_level>(l))}},
             load(c.ladder_degradations[static_cast<std::size_t>(l)]));
  }

  struct gate_counter {
    std::string_view name;
    std::string_view help;
    const std::atomic<std::uint64_t>& value;
  };
  const gate_counter gate[] = {
      {"pnmem_gate_acquired_total", "Back-pressure gate slots handed out.", c.gate_acquired},
      {"pnmem_gate_waits_total", "Gate acquirers that had to wait.", c.gate_waits},
      {"pnmem_gate_overloaded_total", "Gate fast failures at CRITICAL (overloaded, retry).", c.gate_overloaded},
      {"pnmem_gate_timed_out_total", "Gate acquirers whose deadline passed.", c.gate_timed_out},
      {"pnmem_gate_cancelled_total", "Gate acquirers cancelled while waiting.", c.gate_cancelled},
      {"pnmem_gate_queue_full_total", "Gate acquirers refused because the wait queue was full.", c.gate_queue_full},
      {"pnmem_held_served_total", "Requests needing no host bytes held at the reserve, then served.", c.held_served},
      {"pnmem_held_timed_out_total", "Requests needing no host bytes held at the reserve past the engine's patience.",
       c.held_timed_out},
      {"pnmem_shed_calls_total", "Calls of the engine's shed hook that freed memory.", c.shed_calls},
      {"pnmem_shed_freed_bytes_total", "Bytes the engine's shed hook freed (credited).", c.shed_freed_bytes},
  };
  for (const auto& g : gate) {
    w.family(g.name, "counter", g.help);
    w.sample(g.name, {}, load(g.value));
  }
}

// The model-server protocol's gauges (engine/fleet_load.hpp), named for pnmem.
inline void write_fleet(writer& w, const fleet_load& f) {
  w.gauge("pnmem_queued_requests",
          "Requests waiting to run (the gate's queue and the engine's own): the model-server protocol's "
          "TotalQueuedRequests.",
          f.queued_requests);
  w.gauge("pnmem_running_requests",
          "Requests being served (decode slots held): the model-server protocol's TotalRunningRequests.",
          f.running_requests);
  w.gauge("pnmem_kv_cache_usage_ratio",
          "Fraction of the KV cache in use, 0 to 1 (KV bytes, else slots over pnmem_slot_capacity): the "
          "model-server protocol's KVCacheUtilization.",
          kv_cache_usage(f));
  w.gauge("pnmem_slot_capacity", "Requests the engine may run at once now (follows the ladder); 0 = unknown.",
          f.slot_capacity);
}

}  // namespace detail::metrics

// The exposition text of one snapshot, its provenance, (when `counters` is not null)
// the engine's counters and (when `fleet` is not null) the model-server protocol's
// gauges. `p` gives the host reserve.
inline std::string prometheus_text(const mem_state& s, const engine_counters* counters, const policy& p,
                                   const fleet_load* fleet = nullptr) {
  using detail::metrics::int_text;
  detail::metrics::writer w;
  const auto level_value = [](mem_level l) { return static_cast<std::uint64_t>(l); };

  w.gauge("pnmem_level", "Pressure level after hysteresis: 0 ok, 1 watch, 2 tight, 3 critical.", level_value(s.level));
  w.gauge("pnmem_raw_level", "Pressure level before hysteresis: 0 ok, 1 watch, 2 tight, 3 critical.",
          level_value(s.raw_level));
  w.gauge("pnmem_os_level", "The OS's own pressure verdict (macOS memorystatus; 0 elsewhere).",
          level_value(s.host_os_level));
  w.gauge("pnmem_host_total_bytes", "Host memory total (MemTotal, or the container's limit); 0 = not sampled.",
          s.host_total_bytes);
  w.gauge("pnmem_host_avail_bytes", "Host memory available without swapping (MemAvailable).", s.host_avail_bytes);
  w.gauge("pnmem_host_reserve_bytes", "Host memory the policy keeps in reserve.",
          host_reserve_bytes(s, p));

  w.family("pnmem_psi_avg10_percent", "gauge", "Memory PSI avg10, percent of time stalled.");
  w.sample("pnmem_psi_avg10_percent", {{"kind", "some"}}, s.host_psi_some_avg10);
  w.sample("pnmem_psi_avg10_percent", {{"kind", "full"}}, s.host_psi_full_avg10);
  w.family("pnmem_psi_rate_percent", "gauge",
           "Memory PSI over the last sample interval, percent of time stalled (0 while the last 2 s hold under 1 %).");
  w.sample("pnmem_psi_rate_percent", {{"kind", "some"}}, s.host_psi_some_rate);
  w.sample("pnmem_psi_rate_percent", {{"kind", "full"}}, s.host_psi_full_rate);
  w.gauge("pnmem_psi_full_window_percent",
          "Memory PSI full over the policy's window (psi_full_window_ms), percent of time stalled: what confirms "
          "CRITICAL.",
          s.host_psi_full_sustained);

  const sample_provenance& pv = s.provenance;
  w.gauge("pnmem_cgroup_usage_bytes", "The cgroup's memory usage (memory.current); 0 = not in a cgroup.",
          s.cgroup_current_bytes);
  w.gauge("pnmem_cgroup_limit_bytes", "Effective cgroup memory limit over the ancestors; 0 = none.",
          pv.cgroup_limit_bytes);
  w.gauge("pnmem_cgroup_working_set_bytes", "Usage minus inactive file pages of the limiting cgroup.",
          pv.cgroup_working_set_bytes);

  const int n = die_count(s);
  if (n > 0) {
    std::array<std::string, max_dies> die_names;
    for (int i = 0; i < n; ++i) die_names[static_cast<std::size_t>(i)] = int_text(static_cast<std::uint64_t>(i));
    struct die_family {
      std::string_view name;
      std::string_view help;
      const std::array<std::uint64_t, max_dies>& values;
    };
    const die_family dies[] = {
        {"pnmem_die_free_bytes", "Free device memory per die.", s.per_die_free_bytes},
        {"pnmem_die_budget_bytes", "Device memory total minus the die reserve; 0 = die skipped.", s.per_die_budget_bytes},
        {"pnmem_die_used_bytes", "The engine's own device allocations per die.", s.per_die_used_bytes},
        {"pnmem_die_retiring_bytes", "Device memory released but not yet freed (waiting on in-flight work).",
         s.per_die_retiring_bytes},
    };
    for (const auto& f : dies) {
      w.family(f.name, "gauge", f.help);
      for (int i = 0; i < n; ++i) {
        const auto idx = static_cast<std::size_t>(i);
        w.sample(f.name, {{"die", die_names[idx]}}, f.values[idx]);
      }
    }
  }

  w.gauge("pnmem_snapshot_seq", "Monotonic snapshot counter.", s.seq);
  if (s.sample_time_ns > 0) {
    const std::int64_t now_ns = steady_now_ns();
    const std::int64_t age_ns = now_ns > s.sample_time_ns ? now_ns - s.sample_time_ns : 0;
    w.gauge("pnmem_snapshot_age_seconds", "Seconds since the snapshot was sampled (steady clock).",
            static_cast<double>(age_ns) / 1e9);
  }

  w.family("pnmem_provenance_info", "gauge", "How the cgroup and PSI were reached, and whose limit is in force.");
  w.sample("pnmem_provenance_info",
           {{"cgroup_mode", to_string(pv.cgroup)}, {"psi_mode", to_string(pv.psi)},
            {"limit_cgroup", pv.limit_cgroup_path()}},
           std::uint64_t{1});
  w.family("pnmem_source_read", "gauge", "1 when the sampler got numbers from this source.");
  for (const host_source src : all_host_sources) {
    w.sample("pnmem_source_read", {{"source", to_string(src)}}, std::uint64_t{pv.read(src) ? 1U : 0U});
  }
  w.family("pnmem_source_failed", "gauge", "1 when this source exists but could not be read or parsed.");
  for (const host_source src : all_host_sources) {
    w.sample("pnmem_source_failed", {{"source", to_string(src)}}, std::uint64_t{pv.failed(src) ? 1U : 0U});
  }

  if (counters != nullptr) detail::metrics::write_counters(w, *counters);
  if (fleet != nullptr) detail::metrics::write_fleet(w, *fleet);
  return w.take();
}

// The counters' families alone: what prometheus_text() appends after the snapshot's when given them.
inline std::string prometheus_counters_text(const engine_counters& counters) {
  detail::metrics::writer w;
  detail::metrics::write_counters(w, counters);
  return w.take();
}

// The model-server protocol's families alone: what prometheus_text() appends last when given a fleet_load.
inline std::string prometheus_fleet_text(const fleet_load& fleet) {
  detail::metrics::writer w;
  detail::metrics::write_fleet(w, fleet);
  return w.take();
}

// The box ledger's families (engine/box_book.hpp; docs/multi-process.md), for a process whose ledger
// joined one or a tool that reads it (`pnmem metrics`): gauges labelled with the scope.
//   pnmem_ledger_processes{scope}        the pnmem processes joined to it
//   pnmem_ledger_pending_bytes{scope}    bytes every one of them promised that the newest sample has not seen
//   pnmem_ledger_credited_bytes{scope}   bytes they freed (credited) that it has not seen
//   pnmem_ledger_die_pending_bytes{scope,gpu}   per GPU of the book (its UUID): bytes promised on it (model
//                                               loads, die reservations) that its newest sample has not seen
//   pnmem_ledger_die_retiring_bytes{scope,gpu}  bytes its processes released there that in-flight work still
//                                               reads (not free yet)
struct ledger_die_load {
  std::string gpu;  // "GPU-..."
  std::uint64_t pending_bytes = 0;
  std::uint64_t retiring_bytes = 0;
};
struct ledger_load {
  std::string_view scope;
  std::uint64_t processes = 0;
  std::uint64_t pending_bytes = 0;
  std::uint64_t credited_bytes = 0;
  std::vector<ledger_die_load> dies{};
};
inline std::string prometheus_ledger_text(const ledger_load& l) {
  detail::metrics::writer w;
  const std::pair<std::string_view, std::string_view> label{"scope", l.scope};
  w.family("pnmem_ledger_processes", "gauge", "pnmem processes joined to the box ledger.");
  w.sample("pnmem_ledger_processes", {label}, l.processes);
  w.family("pnmem_ledger_pending_bytes", "gauge",
           "Bytes the box ledger's processes promised (reserved, or settled) that the newest sample has not seen.");
  w.sample("pnmem_ledger_pending_bytes", {label}, l.pending_bytes);
  w.family("pnmem_ledger_credited_bytes", "gauge",
           "Bytes the box ledger's processes freed (credited) that the newest sample has not seen.");
  w.sample("pnmem_ledger_credited_bytes", {label}, l.credited_bytes);
  if (!l.dies.empty()) {
    w.family("pnmem_ledger_die_pending_bytes", "gauge",
             "Bytes the box ledger's processes promised on a GPU (model loads, die reservations) that its newest "
             "sample has not seen.");
    for (const ledger_die_load& d : l.dies) {
      w.sample("pnmem_ledger_die_pending_bytes", {label, {"gpu", d.gpu}}, d.pending_bytes);
    }
    w.family("pnmem_ledger_die_retiring_bytes", "gauge",
             "Bytes the box ledger's processes released on a GPU that in-flight work still reads.");
    for (const ledger_die_load& d : l.dies) {
      w.sample("pnmem_ledger_die_retiring_bytes", {label, {"gpu", d.gpu}}, d.retiring_bytes);
    }
  }
  return w.take();
}

// With the process's policy (the PN_* variables: config.hpp process_policy()).
inline std::string prometheus_text(const mem_state& s, const engine_counters* counters = nullptr,
                                   const fleet_load* fleet = nullptr) {
  return prometheus_text(s, counters, process_policy(), fleet);
}

}  // namespace pnmem
