// integration/c_api.cpp - include/pnmem/pnmem.h over the C++ library.
//
// One process-wide watcher over the platform sampler, created on first start
// with the policy from the PN_* variables (bad values are logged through the
// sink and their defaults stay). Functions never throw across the C boundary.
#include "pnmem/pnmem.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pnmem/config.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/watcher.hpp"

namespace {

using platform_watcher = pnmem::watcher<pnmem::linux_sampler>;

struct log_sink {
  pnmem_log_fn fn = nullptr;
  void* user = nullptr;
};

struct global_state {
  std::mutex mu;  // guards creation, the sink, and start/stop
  std::unique_ptr<platform_watcher> watcher;
  pnmem::policy policy = pnmem::default_policy;
  bool policy_loaded = false;
  log_sink sink;
  // Reserved admissions (pnmem_admit_reserved): the ledger is read under mu (with
  // the watcher), the handles under res_mu; never both at once.
  pnmem::host_ledger ledger;
  std::mutex res_mu;
  std::unordered_map<pnmem_reservation, pnmem::host_ledger::reservation> reservations;
  pnmem_reservation next_reservation = 0;

  void log(std::string_view line) {
    log_sink s;
    {
      std::lock_guard<std::mutex> lk(mu);
      s = sink;
    }
    if (s.fn != nullptr) s.fn(s.user, std::string(line).c_str());
  }

  // Called with mu held. Bad PN_* values wait in `pending` for flush(), whichever
  // entry point loads the policy first.
  const pnmem::policy& load_policy() {
    if (!policy_loaded) {
      pnmem::env_config cfg = pnmem::policy_from_env();
      policy = cfg.value;
      for (const auto& e : cfg.errors) pending.push_back("pnmem: " + e.to_string());
      policy_loaded = true;
    }
    return policy;
  }

  // Called with mu held: the watcher, created on first need (start, or a die fed
  // before start), without its thread.
  platform_watcher& ensure_watcher() {
    if (!watcher) {
      pnmem::watcher_options o;
      o.policy = load_policy();
      watcher = std::make_unique<platform_watcher>(pnmem::linux_sampler{}, o);
    }
    return *watcher;
  }

  // Logs what load_policy() left, outside the lock (the sink may call back into pnmem).
  void flush() {
    std::vector<std::string> lines;
    {
      std::lock_guard<std::mutex> lk(mu);
      lines.swap(pending);
    }
    for (const auto& l : lines) log(l);
  }

  std::vector<std::string> pending;  // guarded by mu
};

// What admit() needs of a watcher, taken under the lock: admit()'s own fail-open
// path then applies when no watcher runs.
struct snapshot_view {
  bool is_running = false;
  pnmem::mem_state state;
  bool running() const { return is_running; }
  pnmem::mem_state read() const { return state; }
};

global_state& g() {
  static global_state state;  // never destroyed before the engine's last call: static storage
  return state;
}

pnmem_level to_c(pnmem::mem_level l) { return static_cast<pnmem_level>(static_cast<int>(l)); }

pnmem::mem_level from_c(pnmem_level l) {
  const int v = static_cast<int>(l);
  return v < 0 ? pnmem::mem_level::ok : (v > 3 ? pnmem::mem_level::critical : static_cast<pnmem::mem_level>(v));
}

// The live watcher as host_ledger::admit reads it: under the ledger's lock, so
// snapshots reach the ledger in the order they were read.
struct live_watcher {
  const platform_watcher* w;
  bool running() const { return w != nullptr && w->running(); }
  pnmem::mem_state read() const { return w != nullptr ? w->read() : pnmem::mem_state{}; }
};

int admit_c(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out, pnmem_reservation* reservation) {
  if (model == nullptr || out == nullptr) return -1;
  pnmem::model_desc m;
  m.kv = model->kv_q4 != 0 ? pnmem::kv_format::q4 : pnmem::kv_format::fp32;
  m.gpu_resident = model->gpu_resident != 0;
  m.max_window = model->max_window;
  m.die = model->die < 0 ? pnmem::no_die : model->die;
  m.max_slots = model->max_slots;

  pnmem::admit_options o;
  std::string line;
  o.log = [&line](std::string_view l) { line.assign(l); };
  pnmem::admit_answer a;
  std::uint64_t pending = 0;
  pnmem::host_ledger::reservation held;
  {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    o.policy = s.policy;
    const live_watcher view{s.watcher.get()};
    if (reservation != nullptr) {
      auto r = s.ledger.admit(view, m, n_tokens, o);
      a = r.answer;
      pending = r.pending_bytes;
      held = std::move(r.held);
    } else {
      a = pnmem::admit(view, m, n_tokens, o);
    }
  }
  if (!line.empty()) g().log(line);  // outside the lock: the sink may call back into pnmem
  if (held) {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.res_mu);
    const pnmem_reservation id = ++s.next_reservation;
    s.reservations.emplace(id, std::move(held));
    *reservation = id;
  }

  *out = pnmem_admit_answer{};
  out->status = static_cast<pnmem_admit_status>(static_cast<int>(a.status));
  out->fit_tokens = a.fit_tokens;
  out->reason = pnmem::to_string(a.reason).data();  // string literals: NUL-terminated, static
  out->level = to_c(a.level);
  out->die = a.die;
  out->window = a.window;
  out->need_bytes = a.detail.need_bytes;
  out->limit_bytes = a.detail.limit_bytes;
  out->pending_bytes = pending;
  return 0;
}

}  // namespace

struct pnmem_gate {
  pnmem::backpressure_gate gate;
  pnmem::gate_connection connection;  // declared after the gate: disconnects first
  pnmem_gate(int slots, std::size_t waiters) : gate(slots, waiters) {}
};

extern "C" {

int pnmem_watcher_start(void) {
  int rc = -1;
  try {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    rc = s.ensure_watcher().start() ? 0 : -1;
  } catch (...) {
    rc = -1;
  }
  g().flush();
  return rc;
}

void pnmem_watcher_stop(void) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.watcher) s.watcher->stop();
}

bool pnmem_watcher_running(void) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.watcher && s.watcher->running();
}

void pnmem_watcher_poll_now(void) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.watcher) return;
  try {
    s.watcher->poll_now();
  } catch (...) {
  }
}

int pnmem_read(pnmem_state* out) {
  if (out == nullptr) return -1;
  pnmem::mem_state m;
  {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.watcher) m = s.watcher->read();
  }
  *out = pnmem_state{};
  out->host_total_bytes = m.host_total_bytes;
  out->host_avail_bytes = m.host_avail_bytes;
  out->host_psi_some_avg10 = m.host_psi_some_avg10;
  out->host_psi_full_avg10 = m.host_psi_full_avg10;
  out->host_psi_some_rate = m.host_psi_some_rate;
  out->host_psi_full_rate = m.host_psi_full_rate;
  out->cgroup_current_bytes = m.cgroup_current_bytes;
  out->cgroup_high_bytes = m.cgroup_high_bytes;
  out->cgroup_max_bytes = m.cgroup_max_bytes;
  out->n_dies = pnmem::die_count(m);
  for (std::size_t i = 0; i < PNMEM_MAX_DIES; ++i) {
    out->per_die_free[i] = m.per_die_free[i];
    out->per_die_budget[i] = m.per_die_budget[i];
    out->per_die_used[i] = m.per_die_used[i];
    out->per_die_retiring[i] = m.per_die_retiring[i];
  }
  out->level = to_c(m.level);
  out->raw_level = to_c(m.raw_level);
  out->seq = m.seq;
  out->sample_time_ns = m.sample_time_ns;
  return 0;
}

int pnmem_set_die(int die, uint64_t free_bytes, uint64_t budget_bytes, uint64_t used_bytes, uint64_t retiring_bytes) {
  if (die < 0 || die >= PNMEM_MAX_DIES) return -1;
  int rc = -1;
  try {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    rc = s.ensure_watcher().set_die(die, free_bytes, budget_bytes, used_bytes, retiring_bytes) ==
                 pnmem::set_die_status::ok
             ? 0
             : -1;
  } catch (...) {
    rc = -1;
  }
  g().flush();
  return rc;
}

int pnmem_admit(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out) {
  return admit_c(model, n_tokens, out, nullptr);
}

int pnmem_admit_reserved(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out,
                         pnmem_reservation* reservation) {
  if (reservation == nullptr) return -1;
  *reservation = 0;
  return admit_c(model, n_tokens, out, reservation);
}

void pnmem_reservation_settle(pnmem_reservation reservation) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.res_mu);
  const auto it = s.reservations.find(reservation);
  if (it == s.reservations.end()) return;
  it->second.settle();
  s.reservations.erase(it);
}

void pnmem_reservation_cancel(pnmem_reservation reservation) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.res_mu);
  s.reservations.erase(reservation);  // the reservation's destructor gives the bytes back
}

uint64_t pnmem_pending_bytes(void) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.ledger.pending_bytes(live_watcher{s.watcher.get()});
}

pnmem_ladder_plan pnmem_plan_ladder(pnmem_level level, int max_slots, int prefill_window, bool kv_q4) {
  pnmem::policy p;
  {
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    p = s.load_policy();
  }
  g().flush();
  const pnmem::ladder_plan plan = pnmem::ladder_plan_for(from_c(level), {max_slots, prefill_window, kv_q4}, p);
  pnmem_ladder_plan out{};
  out.level = to_c(plan.level);
  out.max_slots = plan.max_slots;
  out.force_kv_q4 = plan.force_kv_q4;
  out.kv_evict = plan.kv_evict;
  out.prefill_window = plan.prefill_window;
  out.degraded = plan.degraded;
  out.note = plan.note;
  return out;
}

void pnmem_set_log_sink(pnmem_log_fn fn, void* user) {
  global_state& s = g();
  std::lock_guard<std::mutex> lk(s.mu);
  s.sink = log_sink{fn, user};
}

pnmem_gate* pnmem_gate_create(int max_slots, int max_waiters) {
  try {
    auto gate = std::make_unique<pnmem_gate>(max_slots, static_cast<std::size_t>(max_waiters < 0 ? 0 : max_waiters));
    global_state& s = g();
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.watcher) gate->connection = gate->gate.connect(*s.watcher);
    return gate.release();
  } catch (...) {
    return nullptr;
  }
}

void pnmem_gate_destroy(pnmem_gate* gate) { delete gate; }

pnmem_gate_status pnmem_gate_acquire(pnmem_gate* gate, int64_t timeout_ms) {
  if (gate == nullptr) return PNMEM_GATE_ERROR;
  try {
    pnmem::gate_result r = gate->gate.acquire_for(std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
    switch (r.status) {
      case pnmem::gate_status::acquired:
        r.slot.detach();  // C callers return it with pnmem_gate_release
        return PNMEM_GATE_ACQUIRED;
      case pnmem::gate_status::overloaded: return PNMEM_GATE_OVERLOADED;
      case pnmem::gate_status::timed_out: return PNMEM_GATE_TIMED_OUT;
      case pnmem::gate_status::queue_full: return PNMEM_GATE_QUEUE_FULL;
      case pnmem::gate_status::cancelled: return PNMEM_GATE_TIMED_OUT;  // no stop token from C
    }
  } catch (...) {
  }
  return PNMEM_GATE_ERROR;
}

void pnmem_gate_release(pnmem_gate* gate) {
  if (gate != nullptr) gate->gate.release();
}

void pnmem_gate_notify_pressure(pnmem_gate* gate, pnmem_level level) {
  if (gate != nullptr) gate->gate.notify_pressure(from_c(level));
}

void pnmem_gate_set_capacity(pnmem_gate* gate, int max_slots) {
  if (gate != nullptr) gate->gate.set_capacity(max_slots);
}

const char* pnmem_level_name(pnmem_level level) { return pnmem::to_string(from_c(level)).data(); }

}  // extern "C"
