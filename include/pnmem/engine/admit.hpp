// pnmem/engine/admit.hpp - the engine's one call before a request starts.
//
// The seed's pn_admit (engine.c), in its order:
//   1. fail open when no watcher is running (nothing is known: never block on it);
//   2. read the live snapshot; take the model's KV format, residency and window,
//      and the die: the one the model names, else the measured die with the least
//      free VRAM (the seed's "worst free VRAM" die);
//   3. clamp the window with the ladder's rung 3 at the snapshot's level, and say
//      so through the log sink:
//        [ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)
//      With admit_options::counters set, once when the clamp engages or changes, and once when it
//      lifts ("[ladder] OK -> prefill window back to 16384 (rung 3 off)"); every clamped admission is
//      counted (ladder_degradations). Without counters, every clamped admission logs the line.
//   4. admit_request, mapped to admitted / capped / denied.
// A request that carries images for a model with cross-attention layers (Mllama) says how many:
// admit(w, m, n_tokens, encoder_items, o); each costs the model's kv_bytes_per_encoder_item.
// The answer carries the reason, the level, the die and the window used. A cap to the configured
// window says `window`; a cap to rung 3's clamp, of a prompt within the configured window,
// says `prefill_window` (the prompt tokens admitted now; it fits whole once the box recovers).
//
//   pnmem::model_desc m{.gpu_resident = true, .max_window = 16384,
//                       .cost = my_model_cost};   // cost_model.hpp; default: the seed's model
//   (its KV is priced in the model's own format, my_model_cost.normal_kv, unless .kv names another)
//   auto a = pnmem::admit(watcher, m, n_prompt_tokens, {.policy = policy, .log = log_line});
//   if (a.status == pnmem::admit_status::denied) scheduler.notify_pressure(a.level);
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "pnmem/admission.hpp"
#include "pnmem/config.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "pnmem/live_state.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

// What the engine knows about the model a request runs on.
struct model_desc {
  // The format of the model's KV cache (fixed at its allocation); unset (the default): the model's own,
  // cost.normal_kv (request_kv_format below), as in C (PNMEM_KV_UNSET), Python (None) and the tool.
  std::optional<kv_format> kv{};
  bool gpu_resident = false;     // weights and KV on the die(s)
  int max_window = 0;            // configured context window; <= 0 = none
  int die = no_die;              // the die that bounds the host path; no_die = the tightest measured die
  int max_slots = 1;             // configured decode slots (for the ladder plan)
  model_cost cost = seed_model_cost;  // what a token costs the host (cost_model.hpp); default: the seed's model
  // What this engine's requests get when they need no host bytes and host memory is inside the reserve
  // (policy.hpp zero_cost_rule); unset (the default): the policy's (PN_ZERO_COST, hold).
  std::optional<zero_cost_rule> zero_cost{};
};

// The format a model_desc's requests are priced in: its kv when set, else its cost's normal format.
constexpr kv_format request_kv_format(const model_desc& m) noexcept { return request_kv_format(m.kv, m.cost); }

enum class admit_status : std::uint8_t { admitted, capped, denied, fail_open };

constexpr std::string_view to_string(admit_status s) noexcept {
  switch (s) {
    case admit_status::admitted: return "admitted";
    case admit_status::capped: return "capped";
    case admit_status::denied: return "denied";
    case admit_status::fail_open: return "fail_open";
  }
  return "invalid";
}

// What an answer answers: its words (engine/explain.hpp) follow it. A request's tokens (pnmem::admit,
// the gate, host_ledger::admit); host bytes (host_ledger::reserve_bytes, check_bytes); bytes on a die
// (admit_die_bytes); a model load (admit_model_load), one die's slice of one (admit_model_load_die),
// or a load's host spike (admit_load_spike).
enum class answer_kind : std::uint8_t {
  request, host_bytes, die_bytes, model_load, load_slice, load_spike, cache_insert, host_load
};
inline constexpr int answer_kinds = 8;

constexpr std::string_view to_string(answer_kind k) noexcept {
  switch (k) {
    case answer_kind::request: return "request";
    case answer_kind::host_bytes: return "host_bytes";
    case answer_kind::die_bytes: return "die_bytes";
    case answer_kind::model_load: return "model_load";
    case answer_kind::load_slice: return "load_slice";
    case answer_kind::load_spike: return "load_spike";
    case answer_kind::cache_insert: return "cache_insert";
    case answer_kind::host_load: return "host_load";
  }
  return "invalid";
}

struct admit_answer {
  admit_status status = admit_status::fail_open;
  answer_kind kind = answer_kind::request;
  int fit_tokens = 0;                  // tokens that may start (admitted: all; capped: the largest that fits)
  admit_reason reason = admit_reason::fits;
  mem_level level = mem_level::ok;     // the snapshot's level
  int die = no_die;                    // the die the request was checked against
  int window = 0;                      // the window admission used (after the ladder's clamp)
  bool window_clamped = false;         // rung 3 reduced the configured window
  admit_result detail{};               // admit_request's full result (need/limit bytes)
  request_spec request{};              // the request admission judged (for the gate: notify_pressure(level, request))
  // A refusal the waiting calls hold (held_at_reserve under the policy it was decided with: a request
  // needing no host bytes refused at the reserve, the zero-cost rule hold): admit_wait waits for it to
  // start, the gate's notify_denied holds it rather than shedding it.
  bool held = false;
};

// A pure decision's result as an answer of `kind` on a snapshot at `level`: admit -> admitted,
// cap -> capped, reject -> denied (for admit_model_load, admit_die_bytes, admit_load_spike, ...).
constexpr admit_answer answer_from(const admit_result& r, answer_kind kind, mem_level level) noexcept {
  admit_answer a;
  a.status = r.verdict == verdict::admit ? admit_status::admitted
             : r.verdict == verdict::cap ? admit_status::capped
                                         : admit_status::denied;
  a.kind = kind;
  a.fit_tokens = r.fit_tokens;
  a.reason = r.reason;
  a.level = level;
  a.die = r.die;
  a.detail = r;
  return a;
}

struct admit_options {
  pnmem::policy policy = process_policy();  // default: the PN_* variables' (config.hpp), read once
  std::function<void(std::string_view)> log{};  // one line per event worth logging; empty = silent
  engine_counters* counters = nullptr;         // counted into when set
};

// Upper-case level names, as the seed's log lines print them.
constexpr std::string_view log_name(mem_level l) noexcept {
  switch (l) {
    case mem_level::ok: return "OK";
    case mem_level::watch: return "WATCH";
    case mem_level::tight: return "TIGHT";
    case mem_level::critical: return "CRITICAL";
  }
  return "?";
}

namespace detail {
// Rung 3's clamp as engine_counters::ladder_logged keeps it: the level, the configured and the
// clamped window in one word (never 0: the level is TIGHT or worse while clamped).
constexpr std::uint64_t ladder_log_key(mem_level level, int configured, int clamped) noexcept {
  return static_cast<std::uint64_t>(level) << 62 | (static_cast<std::uint64_t>(configured) & 0x7fffffffu) << 31 |
         (static_cast<std::uint64_t>(clamped) & 0x7fffffffu);
}

// Rung 3's log line, out of the decision's way (a log sink is rare on the hot path). With counters,
// only when the clamp differs from the one last logged (it engaged, or moved with the level): the
// first admission that sees it logs it, the rest are counted (ladder_degradations).
[[gnu::noinline, gnu::cold]] inline void log_window_clamp(const std::function<void(std::string_view)>& log,
                                                           engine_counters* counters, mem_level level,
                                                           int configured, int clamped) {
  if (counters != nullptr) {
    const std::uint64_t key = ladder_log_key(level, configured, clamped);
    if (counters->ladder_logged.exchange(key, std::memory_order_relaxed) == key) return;
  }
  char line[160];
  std::snprintf(line, sizeof line, "[ladder] %s -> prefill window clamped %d -> %d (rung 3)",
                std::string(log_name(level)).c_str(), configured, clamped);
  log(line);
}

// The clamp lifted (the level is below TIGHT again) after one was logged: one line saying so.
[[gnu::noinline, gnu::cold]] inline void log_window_restored(const std::function<void(std::string_view)>& log,
                                                              engine_counters& counters, mem_level level) {
  const std::uint64_t was = counters.ladder_logged.exchange(0, std::memory_order_relaxed);
  if (was == 0) return;
  char line[160];
  std::snprintf(line, sizeof line, "[ladder] %s -> prefill window back to %d (rung 3 off)",
                std::string(log_name(level)).c_str(), static_cast<int>((was >> 31) & 0x7fffffffu));
  log(line);
}

// The decision for a model whose zero-cost rule is its own (model_desc::zero_cost): the policy with it.
[[gnu::noinline]] inline admit_result admit_own_zero_cost(const model_desc& m, const request_spec& rq, const mem_state& s,
                                                           policy p, zero_cost_rule rule) noexcept {
  p.zero_cost = rule;
  return m.gpu_resident ? admit_gpu_resident(rq, s, p) : admit_request(m.cost, rq, s, p);
}

// admit_snapshot's body: inlined whole into pnmem::admit (one call frame on the hot path).
[[gnu::always_inline]] inline admit_answer admit_snapshot_inline(const mem_state& s, const model_desc& m,
                                                                 int n_tokens, int encoder_items,
                                                                 const admit_options& o) {
  // Everything is decided in locals and the answer built once at the end: a store into the
  // answer (the caller's memory) could alias `s`, and would make the compiler reload the snapshot.
  const mem_level level = s.level;
  const int die = m.die != no_die ? m.die : tightest_die(s);

  const kv_format kv = request_kv_format(m);
  const ladder_plan plan = ladder_plan_for(level, ladder_config{m.max_slots, m.max_window > 0 ? m.max_window : 0,
                                                                kv == m.cost.compact_kv},
                                           o.policy);
  // A configured window of 0 (none) is never clamped by rung 3: the plan keeps 0.
  const bool clamped = plan.prefill_window > 0 && plan.prefill_window < m.max_window;
  if (clamped) {
    if (o.counters != nullptr) engine_counters::bump(o.counters->ladder_degradations[static_cast<std::size_t>(level)]);
    if (o.log) detail::log_window_clamp(o.log, o.counters, level, m.max_window, plan.prefill_window);
  } else if (level < mem_level::tight && o.counters != nullptr && o.log &&
             o.counters->ladder_logged.load(std::memory_order_relaxed) != 0) {
    detail::log_window_restored(o.log, *o.counters, level);
  }
  const int window = clamped ? plan.prefill_window : m.max_window;

  // Rung 3's clamp as its own bound: a prompt it cuts is capped `prefill_window`, one past the
  // configured window `window` (admission.hpp).
  // Every member, in order (no designated initializers: this header is C++17 too).
  const request_spec rq{/*n_prompt=*/n_tokens,
                        /*kv=*/kv,
                        /*gpu_resident=*/m.gpu_resident,
                        /*die=*/die,
                        /*max_window=*/m.max_window,
                        /*prefill_window=*/clamped ? window : 0,
                        /*encoder_items=*/encoder_items};
  // admit_request; a GPU engine's decision inlined whole (no host-path code around it: the hot path). A
  // model with a zero-cost rule of its own decides under a copy of the policy, out of line.
  const bool own_rule = __builtin_expect(m.zero_cost.has_value(), 0) && *m.zero_cost != o.policy.zero_cost;
  const admit_result r = own_rule         ? detail::admit_own_zero_cost(m, rq, s, o.policy, *m.zero_cost)
                         : m.gpu_resident ? detail::admit_gpu_resident(rq, s, o.policy)
                                          : admit_request(m.cost, rq, s, o.policy);
  // Admitted with nothing to check it against (the host not read, no die bounding it): fail open, and
  // say so (not_sampled), rather than "admitted (fits)".
  const bool unsampled = r.verdict == verdict::admit && r.reason == admit_reason::fits && s.host_total_bytes == 0;
  if (o.counters != nullptr) {
    if (unsampled) {
      engine_counters::bump(o.counters->fail_open);
    } else {
      o.counters->count(r);
    }
  }
  const admit_status status = unsampled                   ? admit_status::fail_open
                              : r.verdict == verdict::admit ? admit_status::admitted
                              : r.verdict == verdict::cap   ? admit_status::capped
                                                            : admit_status::denied;
  // Field by field from values in registers: copying `r` and `rq` whole made g++ load 16 bytes
  // over the narrow stores that had just built them, a store-forwarding stall each (~10 ns of a
  // 40 ns admission, BENCHMARKS.md).
  admit_answer a;
  a.status = status;
  a.fit_tokens = r.fit_tokens;
  a.reason = unsampled ? admit_reason::not_sampled : r.reason;
  a.level = level;
  a.die = die;
  a.window = window;
  a.window_clamped = clamped;
  a.detail.verdict = r.verdict;
  a.detail.fit_tokens = r.fit_tokens;
  a.detail.reason = r.reason;
  a.detail.die = r.die;
  a.detail.need_bytes = r.need_bytes;
  a.detail.limit_bytes = r.limit_bytes;
  a.request.n_prompt = rq.n_prompt;
  a.request.kv = rq.kv;
  a.request.gpu_resident = rq.gpu_resident;
  a.request.die = rq.die;
  a.request.max_window = rq.max_window;
  a.request.prefill_window = rq.prefill_window;
  a.request.encoder_items = rq.encoder_items;
  // Only a refusal can be held (the rule it was decided with: the model's own, else the policy's); decided
  // out of the admitted path, which stores false.
  if (__builtin_expect(r.verdict == verdict::reject, 0)) {
    a.held = held_at_reserve(r, own_rule ? *m.zero_cost : o.policy.zero_cost);
  }
  return a;
}
}  // namespace detail

// The decision on a snapshot already read: pure apart from the log line and the counters.
inline admit_answer admit_snapshot(const mem_state& s, const model_desc& m, int n_tokens, const admit_options& o) {
  return detail::admit_snapshot_inline(s, m, n_tokens, 0, o);
}

// The same for a request that carries encoder items (images) whose cross-attention KV it holds
// (model_cost::kv_bytes_per_encoder_item; a negative count is answered bad_request).
inline admit_answer admit_snapshot(const mem_state& s, const model_desc& m, int n_tokens, int encoder_items,
                                   const admit_options& o) {
  return detail::admit_snapshot_inline(s, m, n_tokens, encoder_items, o);
}

// The seed's pn_admit over a live watcher (anything with running() and read()). It decides
// on the snapshot's live part, which holds every number the decision reads, when the
// watcher offers it (pnmem::watcher does: live_state.hpp, with_live_snapshot).
template <class Watcher>
admit_answer admit(const Watcher& w, const model_desc& m, int n_tokens, int encoder_items, const admit_options& o = {}) {
  if (!w.running()) {
    admit_answer a;
    a.status = admit_status::fail_open;
    a.reason = admit_reason::not_watching;
    a.fit_tokens = n_tokens;
    a.window = m.max_window;
    if (o.counters != nullptr) engine_counters::bump(o.counters->fail_open);
    return a;
  }
  return with_live_snapshot(
      w, [&](const mem_state& s) { return detail::admit_snapshot_inline(s, m, n_tokens, encoder_items, o); });
}

// A request without encoder items (every text-only model's).
template <class Watcher>
admit_answer admit(const Watcher& w, const model_desc& m, int n_tokens, const admit_options& o = {}) {
  return admit(w, m, n_tokens, 0, o);
}

}  // namespace pnmem
