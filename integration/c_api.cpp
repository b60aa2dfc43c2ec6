// integration/c_api.cpp - the C ABI's entry points (include/pnmem/pnmem_c.h).
//
// Each one is a boundary() (c_boundary.hpp) around a short body: required pointers
// checked, C values converted with the checked conversions of c_conversions.hpp,
// the process-wide state (c_global_state.hpp) used under its lock, and every
// exception turned into the documented error value. Nothing here throws into C.
#include "pnmem/pnmem_c.h"

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "c_boundary.hpp"
#include "c_conversions.hpp"
#include "c_global_state.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/ladder.hpp"

using pnmem::c_abi::boundary;
using pnmem::c_abi::global_state;
using pnmem::c_abi::state;

struct pnmem_gate {
  pnmem::backpressure_gate gate;
  pnmem::gate_connection connection;  // declared after the gate: disconnects first
  pnmem_gate(int slots, std::size_t waiters) : gate(slots, waiters) {}
};

namespace {

// pnmem_admit and pnmem_admit_reserved (reservation != nullptr): *out is written
// only when the whole call succeeds; on any throw the held bytes go back.
int admit_c(const pnmem_model& model, int n_tokens, pnmem_admit_answer& out, pnmem_reservation* reservation) {
  const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(model);
  if (!m) return -1;

  pnmem::admit_options o;
  std::string line;
  o.log = [&line](std::string_view l) { line.assign(l); };
  pnmem::admit_answer a;
  std::uint64_t pending = 0;
  pnmem::host_ledger::reservation held;
  global_state& s = state();
  {
    pnmem::detail::lock_guard lk(s.mu);
    o.policy = s.policy;
    const pnmem::c_abi::live_watcher view{s.watcher.get()};
    if (reservation != nullptr) {
      auto r = s.ledger.admit(view, *m, n_tokens, o);
      a = r.answer;
      pending = r.pending_bytes;
      held = std::move(r.held);
    } else {
      a = pnmem::admit(view, *m, n_tokens, o);
    }
  }
  if (!line.empty()) s.log(line);  // outside the lock: the sink may call back into pnmem
  if (held) {
    pnmem::detail::lock_guard lk(s.res_mu);
    const pnmem_reservation id = ++s.next_reservation;
    s.reservations.emplace(id, std::move(held));
    *reservation = id;
  }
  out = pnmem::c_abi::to_c(a, pending);
  return 0;
}

}  // namespace

extern "C" {

int pnmem_watcher_start(void) {
  return boundary(__func__, -1, {}, [] {
    global_state& s = state();
    bool started = false;
    {
      pnmem::detail::lock_guard lk(s.mu);
      started = s.ensure_watcher().start();
    }
    s.flush();
    return started ? 0 : -1;
  });
}

void pnmem_watcher_stop(void) {
  boundary(__func__, {}, [] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    if (s.watcher) s.watcher->stop();  // std::thread::join can throw
  });
}

bool pnmem_watcher_running(void) {
  return boundary(__func__, false, {}, [] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    return s.watcher != nullptr && s.watcher->running();
  });
}

void pnmem_watcher_poll_now(void) {
  boundary(__func__, {}, [] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    if (s.watcher) s.watcher->poll_now();
  });
}

int pnmem_read(pnmem_state* out) {
  return boundary(__func__, -1, {out}, [&] {
    pnmem::mem_state m;
    {
      global_state& s = state();
      pnmem::detail::lock_guard lk(s.mu);
      if (s.watcher) m = s.watcher->read();
    }
    *out = pnmem::c_abi::to_c(m);
    return 0;
  });
}

int pnmem_set_die(int die, uint64_t free_bytes, uint64_t budget_bytes, uint64_t used_bytes, uint64_t retiring_bytes) {
  return boundary(__func__, -1, {}, [&] {
    // Checked before the watcher exists: a bad die id creates nothing.
    if (die < 0 || die >= pnmem::max_dies) return -1;
    global_state& s = state();
    pnmem::set_die_status st = pnmem::set_die_status::die_out_of_range;
    {
      pnmem::detail::lock_guard lk(s.mu);
      st = s.ensure_watcher().set_die(die, free_bytes, budget_bytes, used_bytes, retiring_bytes);
    }
    s.flush();
    return st == pnmem::set_die_status::ok ? 0 : -1;
  });
}

int pnmem_admit(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out) {
  return boundary(__func__, -1, {model, out}, [&] { return admit_c(*model, n_tokens, *out, nullptr); });
}

int pnmem_admit_reserved(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out,
                         pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  return boundary(__func__, -1, {model, out, reservation},
                  [&] { return admit_c(*model, n_tokens, *out, reservation); });
}

void pnmem_reservation_settle(pnmem_reservation reservation) {
  boundary(__func__, {}, [&] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.res_mu);
    const auto it = s.reservations.find(reservation);
    if (it == s.reservations.end()) return;
    it->second.settle();
    s.reservations.erase(it);
  });
}

void pnmem_reservation_cancel(pnmem_reservation reservation) {
  boundary(__func__, {}, [&] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.res_mu);
    s.reservations.erase(reservation);  // the reservation's destructor gives the bytes back
  });
}

uint64_t pnmem_pending_bytes(void) {
  return boundary(__func__, std::uint64_t{0}, {}, [] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    return s.ledger.pending_bytes(pnmem::c_abi::live_watcher{s.watcher.get()});
  });
}

pnmem_ladder_plan pnmem_plan_ladder(pnmem_level level, int max_slots, int prefill_window, bool kv_q4) {
  const pnmem_ladder_plan error_value = pnmem::c_abi::error_plan(max_slots, prefill_window, kv_q4);
  return boundary(__func__, error_value, {}, [&] {
    const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(level);
    if (!l) return error_value;
    global_state& s = state();
    pnmem::policy p;
    {
      pnmem::detail::lock_guard lk(s.mu);
      p = s.load_policy();
    }
    s.flush();
    return pnmem::c_abi::to_c(pnmem::ladder_plan_for(*l, {max_slots, prefill_window, kv_q4}, p));
  });
}

void pnmem_set_log_sink(pnmem_log_fn fn, void* user) {
  boundary(__func__, {}, [&] {
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    s.sink = pnmem::c_abi::log_sink{fn, user};
  });
}

pnmem_gate* pnmem_gate_create(int max_slots, int max_waiters) {
  return boundary(__func__, static_cast<pnmem_gate*>(nullptr), {}, [&] {
    auto gate = std::make_unique<pnmem_gate>(max_slots, static_cast<std::size_t>(max_waiters < 0 ? 0 : max_waiters));
    global_state& s = state();
    pnmem::detail::lock_guard lk(s.mu);
    if (s.watcher) gate->connection = gate->gate.connect(*s.watcher);
    return gate.release();
  });
}

void pnmem_gate_destroy(pnmem_gate* gate) {
  boundary(__func__, {gate}, [&] { delete gate; });
}

pnmem_gate_status pnmem_gate_acquire(pnmem_gate* gate, int64_t timeout_ms) {
  return boundary(__func__, PNMEM_GATE_ERROR, {gate}, [&] {
    pnmem::gate_result r = gate->gate.acquire_for(pnmem::c_abi::gate_timeout_from_c(timeout_ms));
    if (r.status == pnmem::gate_status::acquired) r.slot.detach();  // C callers return it with pnmem_gate_release
    return pnmem::c_abi::to_c(r.status);
  });
}

void pnmem_gate_release(pnmem_gate* gate) {
  boundary(__func__, {gate}, [&] { gate->gate.release(); });
}

void pnmem_gate_notify_pressure(pnmem_gate* gate, pnmem_level level) {
  boundary(__func__, {gate}, [&] {
    if (const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(level)) gate->gate.notify_pressure(*l);
  });
}

void pnmem_gate_set_capacity(pnmem_gate* gate, int max_slots) {
  boundary(__func__, {gate}, [&] { gate->gate.set_capacity(max_slots); });
}

const char* pnmem_level_name(pnmem_level level) {
  return boundary(__func__, "invalid", {}, [&]() -> const char* {
    const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(level);
    return l ? pnmem::to_string(*l).data() : "invalid";  // string literals: NUL-terminated, static
  });
}

}  // extern "C"
