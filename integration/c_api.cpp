// integration/c_api.cpp - the C ABI's entry points (include/pnmem/pnmem_c.h).
//
// Each one is a boundary() (c_boundary.hpp) around a short body: required pointers
// checked, C values converted with the checked conversions of c_conversions.hpp,
// the process-wide state (c_global_state.hpp) used as it says (reads take no lock),
// and every exception turned into the documented error value. Nothing here throws into C.
#include "pnmem/pnmem_c.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "c_boundary.hpp"
#include "c_conversions.hpp"
#include "c_global_state.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/detail/printable.hpp"
#include "pnmem/die_uuid.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/admit_wait.hpp"
#include "pnmem/engine/admit_after_eviction.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/engine/retry_after.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/keep_set.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "pnmem/model_shape.hpp"

using pnmem::c_abi::boundary;
using pnmem::c_abi::global_state;
using pnmem::c_abi::state;

struct pnmem_gate {
  pnmem::model_desc model;  // whose requests it gates: their cost and shape (pnmem_gate_create: the seed's)
  pnmem::backpressure_gate gate;
  pnmem::gate_connection connection;  // declared after the gate: disconnects first
  // The model and policy of its release re-check: the engine's model, the C ABI's policy (the
  // environment's, pnmem_policy_get).
  pnmem_gate(const pnmem::model_desc& m, int slots, std::size_t waiters, const pnmem::policy& p,
             pnmem::engine_counters* counters)
      : model(m),
        gate(pnmem::gate_options{
            .max_slots = slots, .max_waiters = waiters, .counters = counters, .model = m.cost, .policy = p}) {}

  // A request of n_tokens of the model, on `die` (no_die: the model's own choice).
  pnmem::request_spec request(int n_tokens, int die = pnmem::no_die) const noexcept {
    pnmem::request_spec rq;
    rq.n_prompt = n_tokens;
    rq.kv = model.kv;
    rq.gpu_resident = model.gpu_resident;
    rq.max_window = model.max_window;
    rq.die = die != pnmem::no_die ? die : model.die;
    return rq;
  }
};

namespace {

// Logs "pnmem: <entry>: <why>" for an argument refused field by field.
void refuse(global_state& s, const char* entry, const std::string& why) {
  s.log(std::string("pnmem: ") + entry + ": " + why);
}

// The policy admission applies: the one the watcher was created with (the environment's);
// no watcher: the default (every answer fails open then).
pnmem::policy policy_of(const pnmem::c_abi::platform_watcher* w) {
  return w != nullptr ? w->options().policy : pnmem::default_policy;
}

// A C reservation's options (the watcher's policy, ttl_ms as the C calls take it) and when its handle
// expires (0: never): no later than the ledger's entry, its clock read first.
struct c_reserve {
  pnmem::host_ledger::reserve_options options;
  std::int64_t handle_expires_ns = 0;
};
c_reserve reserve_for(global_state& s, const pnmem::c_abi::platform_watcher* w, std::int64_t ttl_ms) {
  c_reserve out;
  out.options.policy = policy_of(w);
  out.options.ttl = pnmem::c_abi::ttl_from_c(ttl_ms);
  const std::int64_t expires = pnmem::host_ledger::expiry_after(s.ledger.now_ns(), out.options.ttl);
  out.handle_expires_ns = expires == pnmem::host_ledger::never ? 0 : expires;  // 0: the handle never expires
  return out;
}

// The options a live admission runs with: the watcher's policy, and its log line (the ladder's clamp)
// kept in `line` for the caller to hand to the sink once the decision is made.
pnmem::admit_options live_options(global_state& s, const pnmem::c_abi::platform_watcher* w, std::string& line) {
  pnmem::admit_options o;
  o.counters = &s.counters;
  o.log = [&line](std::string_view l) { line.assign(l); };
  o.policy = policy_of(w);
  return o;
}

// pnmem_admit and pnmem_admit_reserved (reservation != nullptr): *out is written
// only when the whole call succeeds; on any throw the held bytes go back.
// With `patience` (pnmem_admit_wait, no reservation): a request held at the reserve waits up to it.
int admit_c(const char* entry, const pnmem_model& model, int n_tokens, pnmem_admit_answer& out,
            pnmem_reservation* reservation, int encoder_items = 0, const std::chrono::milliseconds* patience = nullptr) {
  global_state& s = state();
  std::string why;
  const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(model, why);
  if (!m) {
    refuse(s, entry, why);
    return -1;
  }

  std::string line;
  pnmem::c_abi::platform_watcher* w = s.watcher();  // no lock: published once, never destroyed
  const pnmem::admit_options o = live_options(s, w, line);
  const pnmem::c_abi::live_watcher view{w};
  pnmem::admit_answer a;
  std::uint64_t pending = 0;
  pnmem::host_ledger::reservation held;
  if (patience != nullptr && w != nullptr) {
    a = pnmem::admit_wait(*w, *m, n_tokens, encoder_items, std::chrono::steady_clock::now() + *patience, o);
  } else if (reservation != nullptr) {
    auto r = s.ledger.admit(view, *m, n_tokens, encoder_items, o);  // the ledger's mutex
    a = r.answer;
    pending = r.pending_bytes;
    held = std::move(r.held);
  } else {
    a = pnmem::admit(view, *m, n_tokens, encoder_items, o);  // a seqlock read: no lock
  }
  if (!line.empty()) {
    try {
      s.log(line);  // the sink may call back into pnmem
    } catch (...) {
      // Not delivered: not remembered as logged, so the next clamped admission logs it again.
      s.counters.ladder_logged.store(0, std::memory_order_relaxed);
      throw;
    }
  }
  if (a.status == pnmem::admit_status::fail_open) s.note_fail_open();
  if (reservation != nullptr) *reservation = s.keep(std::move(held), 0);
  out = pnmem::c_abi::to_c(a, pending);
  return 0;
}

// The model-load checks (pnmem_admit_model_load, _die, pnmem_admit_load_spike): fail open
// without a running watcher (as pnmem_admit: nothing is known), else `check(snapshot, policy)`
// on the live snapshot (a seqlock read: no lock) with the policy the watcher runs.
// A check's answer with no watcher running: fail open, nothing known.
pnmem_admit_answer not_watching(pnmem::answer_kind kind, int die) {
  pnmem::admit_answer a;  // fail_open, 0 bytes
  a.kind = kind;
  a.reason = pnmem::admit_reason::not_watching;
  a.die = die;
  return pnmem::c_abi::to_c(a, 0);
}

template <class Check>
pnmem_admit_answer load_check(pnmem::answer_kind kind, int die, Check&& check) {
  const pnmem::c_abi::platform_watcher* w = state().watcher();  // no lock: published once, never destroyed
  if (w == nullptr || !w->running()) return not_watching(kind, die);
  const pnmem::mem_state s = w->read();
  const pnmem::admit_result r = check(s, w->options().policy);
  if (die == pnmem::no_die && s.host_total_bytes == 0 && r.verdict == pnmem::verdict::admit) {
    // A host check on a host that was not read: nothing was checked (fail open, and say so).
    pnmem::admit_answer a = pnmem::answer_from(r, kind, s.level);
    a.status = pnmem::admit_status::fail_open;
    a.reason = pnmem::admit_reason::not_sampled;
    a.die = die;
    return pnmem::c_abi::to_c(a, 0);
  }
  return pnmem::c_abi::to_c(r, kind, s.level);
}

// pnmem_admit_model_load(_die) and their _reserved forms: the load checked, then answered by the ledger
// on the live snapshot with what is promised on the dies taken off their free VRAM (the box's, for dies
// named by UUID), and with `reservation` the need reserved on the die when admitted. Fail open without a
// running watcher (nothing reserved).
int model_load_c(const char* entry, pnmem::answer_kind kind, const pnmem_model_load& load, pnmem_admit_answer& out,
                 pnmem_reservation* reservation) {
  global_state& s = state();
  std::string why;
  const std::optional<pnmem::c_abi::model_load_request> l = pnmem::c_abi::model_load_from_c(load, why);
  if (!l) {
    refuse(s, entry, why);
    return -1;
  }
  const pnmem::c_abi::platform_watcher* w = s.watcher();  // no lock: published once, never destroyed
  if (w == nullptr || !w->running()) {
    out = not_watching(kind, l->die);
    return 0;
  }
  pnmem::host_ledger::reserve_options o;
  o.policy = w->options().policy;
  const pnmem::c_abi::live_watcher view{w};
  const bool whole = kind == pnmem::answer_kind::model_load;
  const std::uint64_t weights = l->spec.weights_bytes;
  const std::uint64_t kv = l->spec.kv_max_ctx_bytes;
  pnmem::host_ledger::admission r =  // the ledger's mutex
      reservation == nullptr
          ? (whole ? s.ledger.check_model_load(view, l->spec, l->die, o.policy)
                   : s.ledger.check_model_load_die(view, weights, kv, l->die, o.policy))
          : (whole ? s.ledger.reserve_model_load(view, l->spec, l->die, o)
                   : s.ledger.reserve_model_load_die(view, weights, kv, l->die, o));
  if (reservation != nullptr) *reservation = s.keep(std::move(r.held), 0);
  out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
  return 0;
}

// The gates of pnmem_gate_create and pnmem_gate_create_for.
pnmem_gate* create_gate(global_state& s, const pnmem::model_desc& m, int max_slots, int max_waiters) {
  pnmem::policy p = s.policy();
  if (m.zero_cost) p.zero_cost = *m.zero_cost;  // the model's own rule: what its denials are held or shed by
  s.flush();
  auto gate =
      std::make_unique<pnmem_gate>(m, max_slots, static_cast<std::size_t>(max_waiters < 0 ? 0 : max_waiters), p,
                                             &s.counters);
  if (pnmem::c_abi::platform_watcher* w = s.watcher()) gate->connection = gate->gate.connect(*w);
  s.add_gate(&gate->gate);  // its queue and slots in the fleet gauges while it lives
  return gate.release();
}

pnmem_gate_status gate_status_to_c(pnmem::gate_result r) {
  if (r.status == pnmem::gate_status::acquired) r.slot.detach();  // C callers return it with pnmem_gate_release
  return pnmem::c_abi::to_c(r.status);
}

}  // namespace

namespace {

// Every *_init_sized: a size below the first version's (or past a uint32_t) is refused and nothing is
// written; else the caller's whole struct is zeroed (a newer caller's tail too), its known prefix
// gets the defaults (`defaults()`, called inside the boundary: it may allocate), and struct_size is set.
template <class T, class Defaults>
int init_versioned(const char* entry, T* out, size_t struct_size, std::size_t size_v1, Defaults&& defaults) {
  return boundary(entry, -1, {out}, [&] {
    if (struct_size < size_v1 || struct_size > UINT32_MAX) return -1;
    const T d = defaults();
    std::memset(static_cast<void*>(out), 0, struct_size);
    std::memcpy(static_cast<void*>(out), &d, std::min(struct_size, sizeof d));
    out->struct_size = static_cast<std::uint32_t>(struct_size);
    return 0;
  });
}

// Every versioned read (pnmem_read_snapshot, pnmem_host_room): out->struct_size as its init set it is
// checked (a line names it when not valid, nothing is written), `value()` is computed inside the
// boundary, and the fields this library knows are copied; a newer caller's tail is left and its
// struct_size kept.
template <class T, class Value>
int read_versioned_out(const char* entry, T* out, std::size_t size_v1, const char* init, Value&& value) {
  return boundary(entry, -1, {out}, [&] {
    const std::uint32_t size = out->struct_size;
    const std::string why = pnmem::c_abi::struct_size_problem(size, size_v1, "out", init);
    if (!why.empty()) {
      refuse(state(), entry, why);
      return -1;
    }
    const T v = value();
    std::memcpy(static_cast<void*>(out), &v, std::min<std::size_t>(size, sizeof v));
    out->struct_size = size;
    return 0;
  });
}

// `msg` into a caller's buffer (an error message, a text; when given), truncated to len - 1 bytes and NUL-terminated.
void write_err(char* err, size_t err_len, std::string_view msg) noexcept {
  if (err == nullptr || err_len == 0) return;
  const std::size_t n = std::min(msg.size(), err_len - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

// What every pnmem_model_cost_from_* does around its reader: the NULL and struct_size checks naming
// the argument, the reader's answer (a description, or the message naming the key), the cost fields
// written only when all of it succeeded, and a failure inside pnmem (no memory) said as such.
// `read(why)` returns the description, or nothing with `why` set.
template <class Read>
int cost_into(const char* entry, std::initializer_list<std::pair<const void*, const char*>> args, pnmem_model* model,
              char* err, size_t err_len, Read&& read) {
  write_err(err, err_len, "");
  const int rc = boundary(entry, -1, {}, [&] {
    for (const auto& [p, name] : args) {
      if (p == nullptr) {
        write_err(err, err_len, std::string(name) + " is NULL");
        return -1;
      }
    }
    if (model == nullptr) {
      write_err(err, err_len, "model is NULL");
      return -1;
    }
    const std::string size_problem = pnmem::c_abi::struct_size_problem(model->struct_size, pnmem::c_abi::model_size_v1,
                                                                       "model", "pnmem_model_init");
    if (!size_problem.empty()) {
      write_err(err, err_len, size_problem);
      return -1;
    }
    std::string why;
    const std::optional<pnmem::model_files::model_description> d = read(why);
    if (!d) {
      write_err(err, err_len, why.empty() ? std::string_view("refused") : std::string_view(why));
      return -1;
    }
    if (const std::string_view v = pnmem::validate(d->cost); !v.empty()) {
      write_err(err, err_len, v);
      return -1;
    }
    pnmem::c_abi::cost_to_c(d->cost, *model);  // the cost fields only: nothing here throws
    return 0;
  });
  if (rc != 0 && err != nullptr && err_len > 0 && err[0] == '\0') write_err(err, err_len, "failure inside pnmem (see the log sink)");
  return rc;
}

// The engine rule a caller passed (NULL: the exact rule), or nothing with `why` naming the field.
std::optional<pnmem::engine_rule> engine_of(const pnmem_engine_rule* engine, std::string& why) {
  if (engine == nullptr) return pnmem::exact_engine;
  return pnmem::c_abi::engine_rule_from_c(*engine, why);
}

// A reader's result as the optional cost_into wants.
std::optional<pnmem::model_files::model_description> taken(pnmem::model_files::read_result<pnmem::model_files::model_description> r,
                                                           std::string& why) {
  if (!r.value) why = r.error;
  return std::move(r.value);
}

// cost_into's fill for a model file's reader: `read(rule)` under the caller's engine rule.
template <class Read>
auto read_under(const pnmem_engine_rule* engine, Read read) {
  return [engine, read](std::string& why) -> std::optional<pnmem::model_files::model_description> {
    const std::optional<pnmem::engine_rule> e = engine_of(engine, why);
    if (!e) return std::nullopt;
    return taken(read(*e), why);
  };
}

}  // namespace

extern "C" {

int pnmem_watcher_options_init_sized(pnmem_watcher_options* options, size_t struct_size) {
  return init_versioned(__func__, options, struct_size, pnmem::c_abi::watcher_options_size_v1, pnmem::c_abi::default_watcher_options);
}

int pnmem_watcher_start_with(const pnmem_watcher_options* options) {
  const char* const entry = __func__;  // the lambda's own __func__ is "operator()"
  return boundary(entry, -1, {options}, [&] {
    global_state& s = state();
    std::string why;
    const std::optional<pnmem::watcher_options> o = pnmem::c_abi::watcher_options_from_c(*options, why);
    const std::optional<std::string> root = o ? pnmem::c_abi::watcher_root_from_c(*options, why) : std::nullopt;
    const std::optional<std::string> ledger = root ? pnmem::c_abi::watcher_ledger_from_c(*options, why) : std::nullopt;
    if (!o || !root || !why.empty()) {
      refuse(s, entry, why);
      return -1;
    }
    const auto [w, same] = s.ensure_watcher(*o, *root);
    s.flush();
    if (!same) {
      refuse(s, entry,
             "the watcher exists already with other options (created by an earlier pnmem_watcher_start, "
             "pnmem_watcher_start_with or pnmem_set_die): call pnmem_watcher_start_with first");
      return -1;
    }
    if (!w->start()) return -1;  // the watcher's lifecycle lock
    s.join_box(ledger);
    return 0;
  });
}

int pnmem_watcher_start(void) {
  return boundary(__func__, -1, {}, [] {
    global_state& s = state();
    pnmem::c_abi::platform_watcher& w = s.ensure_watcher();
    s.flush();
    if (!w.start()) return -1;
    s.join_box(std::nullopt);
    return 0;
  });
}

void pnmem_watcher_stop(void) {
  boundary(__func__, {}, [] {
    if (pnmem::c_abi::platform_watcher* w = state().watcher()) w->stop();  // std::thread::join can throw
  });
}

bool pnmem_watcher_running(void) {
  return boundary(__func__, false, {}, [] {
    const pnmem::c_abi::platform_watcher* w = state().watcher();
    return w != nullptr && w->running();
  });
}

void pnmem_watcher_poll_now(void) {
  boundary(__func__, {}, [] {
    if (pnmem::c_abi::platform_watcher* w = state().watcher()) w->poll_now();
  });
}

int pnmem_read(pnmem_state* out) {
  return boundary(__func__, -1, {out}, [&] {
    const pnmem::c_abi::platform_watcher* w = state().watcher();
    *out = pnmem::c_abi::to_c(w != nullptr ? w->read() : pnmem::mem_state{});
    return 0;
  });
}

int pnmem_snapshot_init_sized(pnmem_snapshot* snapshot, size_t struct_size) {
  return init_versioned(__func__, snapshot, struct_size, pnmem::c_abi::snapshot_size_v1, [] { return pnmem_snapshot{}; });
}

int pnmem_read_snapshot(pnmem_snapshot* out) {
  return read_versioned_out(__func__, out, pnmem::c_abi::snapshot_size_v1, "pnmem_snapshot_init", [] {
    const pnmem::c_abi::platform_watcher* w = state().watcher();
    return pnmem::c_abi::snapshot_to_c(w != nullptr ? w->read() : pnmem::mem_state{}, policy_of(w));
  });
}

int pnmem_set_die(int die, uint64_t free_bytes, uint64_t budget_bytes, uint64_t used_bytes, uint64_t retiring_bytes) {
  return boundary(__func__, -1, {}, [&] {
    // Checked before the watcher exists: a bad die id creates nothing.
    if (die < 0 || die >= pnmem::max_dies) return -1;
    global_state& s = state();
    pnmem::c_abi::platform_watcher& w = s.ensure_watcher();
    s.flush();
    const pnmem::set_die_status st = w.set_die(die, free_bytes, budget_bytes, used_bytes, retiring_bytes);
    return st == pnmem::set_die_status::ok ? 0 : -1;
  });
}

int pnmem_model_init_sized(pnmem_model* model, size_t struct_size) {
  return init_versioned(__func__, model, struct_size, pnmem::c_abi::model_size_v1, pnmem::c_abi::unset_model);
}

int pnmem_model_init_reference_sized(pnmem_model* model, size_t struct_size) {
  return init_versioned(__func__, model, struct_size, pnmem::c_abi::model_size_v1, pnmem::c_abi::default_model);
}

int pnmem_model_init_preallocated_sized(pnmem_model* model, size_t struct_size) {
  return init_versioned(__func__, model, struct_size, pnmem::c_abi::model_size_v1, pnmem::c_abi::preallocated_model);
}

int pnmem_model_cost_from_json(const char* json, size_t len, pnmem_model* model, char* err, size_t err_len) {
  return cost_into(__func__, {{json, "json"}}, model, err, err_len, [&](std::string& why) {
    return taken(pnmem::model_files::read_model_json(std::string_view(json, len)), why);
  });
}

int pnmem_model_cost_from_hf_config(const char* json, size_t len, const pnmem_engine_rule* engine, pnmem_model* model,
                                    char* err, size_t err_len) {
  return cost_into(__func__, {{json, "json"}}, model, err, err_len, read_under(engine, [&](const pnmem::engine_rule& e) {
                     return pnmem::model_files::read_hf_config(std::string_view(json, len), e);
                   }));
}

int pnmem_model_cost_from_hf_config_file(const char* path, const pnmem_engine_rule* engine, pnmem_model* model,
                                         char* err, size_t err_len) {
  return cost_into(__func__, {{path, "path"}}, model, err, err_len, read_under(engine, [&](const pnmem::engine_rule& e) {
                     return pnmem::model_files::read_hf_config_file(path, e);
                   }));
}

int pnmem_model_cost_from_gguf_file(const char* path, const pnmem_engine_rule* engine, pnmem_model* model, char* err,
                                    size_t err_len) {
  return cost_into(__func__, {{path, "path"}}, model, err, err_len, read_under(engine, [&](const pnmem::engine_rule& e) {
                     return pnmem::model_files::read_gguf_file(path, e);
                   }));
}

int pnmem_model_cost_from_shape(const pnmem_model_shape* shape, const pnmem_engine_rule* engine, pnmem_model* model,
                                char* err, size_t err_len) {
  return cost_into(__func__, {{shape, "shape"}}, model, err, err_len,
                   [&](std::string& why) -> std::optional<pnmem::model_files::model_description> {
                     const std::optional<pnmem::engine_rule> e = engine_of(engine, why);
                     if (!e) return std::nullopt;
                     const std::optional<pnmem::model_shape> s = pnmem::c_abi::model_shape_from_c(*shape, why);
                     if (!s) return std::nullopt;
                     if (const std::string_view problem = pnmem::rule_problem(*s, *e); !problem.empty()) {
                       why = "engine: " + std::string(problem);
                       return std::nullopt;
                     }
                     if (e->mtp) {  // the config readers add the MTP layers; a shape holds what it holds
                       why = "engine->mtp: the MTP layers are read from a config.json (pnmem_model_cost_from_hf_config); "
                             "a shape holds its layers as given: add them to it";
                       return std::nullopt;
                     }
                     pnmem::model_files::model_description d;
                     d.cost = pnmem::from_shape(*s, *e);
                     return d;
                   });
}

int pnmem_model_shape_from_hf_config(const char* json, size_t len, pnmem_model_shape* shape, char* err, size_t err_len) {
  write_err(err, err_len, "");
  const int rc = boundary(__func__, -1, {}, [&] {
    if (json == nullptr || shape == nullptr) {
      write_err(err, err_len, json == nullptr ? "json is NULL" : "shape is NULL");
      return -1;
    }
    const std::string size_problem = pnmem::c_abi::struct_size_problem(shape->struct_size, pnmem::c_abi::model_shape_size_v1,
                                                                       "shape", "pnmem_model_shape_init");
    if (!size_problem.empty()) {
      write_err(err, err_len, size_problem);
      return -1;
    }
    const auto r = pnmem::model_files::read_hf_config(std::string_view(json, len));
    if (!r.value) {
      write_err(err, err_len, r.error);
      return -1;
    }
    // Written up to the caller's struct_size: a version-1 struct has no side_bytes, and a shape that
    // needs them is refused rather than written without them (it would price the model low).
    const pnmem::model_shape& s = *r.value->shape;
    if (shape->struct_size < sizeof(pnmem_model_shape)) {
      for (std::uint32_t i = 0; i < s.n_groups && i < pnmem::max_layer_groups; ++i) {
        if (s.groups[i].side_bytes == 0) continue;
        write_err(err, err_len, "shape is a version-1 pnmem_model_shape, without side_bytes for the caches this model "
                                "keeps beside its KV (group " + std::to_string(i) + ": " +
                                    std::to_string(s.groups[i].side_bytes) + " B a token and layer): rebuild against this pnmem_c.h");
        return -1;
      }
    }
    pnmem_model_shape c = pnmem::c_abi::default_model_shape();
    const std::uint32_t size = shape->struct_size;
    pnmem::c_abi::shape_to_c(s, c);
    std::memcpy(static_cast<void*>(shape), &c, std::min<std::size_t>(size, sizeof c));
    shape->struct_size = size;
    return 0;
  });
  if (rc != 0 && err != nullptr && err_len > 0 && err[0] == '\0') write_err(err, err_len, "failure inside pnmem (see the log sink)");
  return rc;
}

int pnmem_engine_rule_init_sized(pnmem_engine_rule* rule, size_t struct_size) {
  return init_versioned(__func__, rule, struct_size, pnmem::c_abi::engine_rule_size_v1, pnmem::c_abi::default_engine_rule);
}

int pnmem_model_shape_init_sized(pnmem_model_shape* shape, size_t struct_size) {
  return init_versioned(__func__, shape, struct_size, pnmem::c_abi::model_shape_size_v1, pnmem::c_abi::default_model_shape);
}

int pnmem_request_init_sized(pnmem_request* request, size_t struct_size) {
  return init_versioned(__func__, request, struct_size, pnmem::c_abi::request_size_v1, pnmem::c_abi::default_request);
}

int pnmem_admit(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out) {
  const char* const entry = __func__;
  return boundary(entry, -1, {model, out}, [&] { return admit_c(entry, *model, n_tokens, *out, nullptr); });
}

int pnmem_admit_wait(const pnmem_model* model, int n_tokens, int64_t timeout_ms, pnmem_admit_answer* out) {
  const char* const entry = __func__;
  const std::chrono::milliseconds patience = pnmem::c_abi::gate_timeout_from_c(timeout_ms);  // the gate's bounds
  return boundary(entry, -1, {model, out},
                  [&] { return admit_c(entry, *model, n_tokens, *out, nullptr, 0, &patience); });
}

int pnmem_admit_reserved(const pnmem_model* model, int n_tokens, pnmem_admit_answer* out,
                         pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  const char* const entry = __func__;
  return boundary(entry, -1, {model, out, reservation},
                  [&] { return admit_c(entry, *model, n_tokens, *out, reservation); });
}

int pnmem_admit_request(const pnmem_model* model, const pnmem_request* request, pnmem_admit_answer* out,
                        pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  const char* const entry = __func__;
  return boundary(entry, -1, {model, request, out}, [&] {
    std::string why;
    const std::optional<pnmem_request> rq = pnmem::c_abi::request_from_c(*request, why);
    if (!rq) {
      refuse(state(), entry, why);
      return -1;
    }
    return admit_c(entry, *model, rq->n_tokens, *out, reservation, rq->encoder_items);
  });
}

int pnmem_reserve_bytes(uint64_t bytes, int64_t ttl_ms, pnmem_admit_answer* out, pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  return boundary(__func__, -1, {out, reservation}, [&] {
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const c_reserve c = reserve_for(s, w, ttl_ms);
    auto r = s.ledger.reserve_bytes(pnmem::c_abi::live_watcher{w}, bytes, c.options);  // the ledger's mutex
    const pnmem_reservation id = s.keep(std::move(r.held), c.handle_expires_ns);
    *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
    *reservation = id;
    return 0;
  });
}

int pnmem_make_room(uint64_t bytes, int64_t ttl_ms, pnmem_free_fn free_older, void* user, pnmem_admit_answer* out,
                    pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  return boundary(__func__, -1, {out, reservation}, [&] {
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const c_reserve c = reserve_for(s, w, ttl_ms);
    auto made = s.ledger.make_room(pnmem::c_abi::live_watcher{w}, bytes, [&](std::uint64_t want) -> std::uint64_t {
      return free_older != nullptr ? free_older(want, user) : 0;  // the engine's, no lock of pnmem's held
    }, c.options);
    const pnmem_reservation id = s.keep(std::move(made.admitted.held), c.handle_expires_ns);
    *out = pnmem::c_abi::to_c(made.admitted.answer, made.admitted.pending_bytes);
    *reservation = id;
    return 0;
  });
}

int pnmem_admit_host_load(uint64_t fixed_bytes, uint64_t bytes_per_token, int wanted_tokens, int least_tokens,
                          int64_t ttl_ms, pnmem_admit_answer* out, pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  const char* const entry = __func__;
  return boundary(entry, -1, {out}, [&] {
    global_state& s = state();
    if (wanted_tokens < 0 || least_tokens < 0 || least_tokens > wanted_tokens) {
      refuse(s, entry, "the context asked is " + std::to_string(wanted_tokens) + " tokens and the least " +
                           std::to_string(least_tokens) + ": each must be >= 0, the least no more than the asked");
      return -1;
    }
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const pnmem::host_load_spec l{fixed_bytes, bytes_per_token, wanted_tokens, least_tokens};
    if (reservation == nullptr) {
      const auto r = s.ledger.check_host_load(pnmem::c_abi::live_watcher{w}, l, policy_of(w));  // the ledger's mutex
      *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
      return 0;
    }
    const c_reserve c = reserve_for(s, w, ttl_ms);
    auto r = s.ledger.reserve_host_load(pnmem::c_abi::live_watcher{w}, l, c.options);  // the ledger's mutex
    const pnmem_reservation id = s.keep(std::move(r.held), c.handle_expires_ns);
    *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
    *reservation = id;
    return 0;
  });
}

int pnmem_shed_bytes(uint64_t* out) {
  return boundary(__func__, -1, {out}, [&] {
    *out = state().shed_bytes();
    return 0;
  });
}

int pnmem_set_shed_hook(pnmem_free_fn fn, void* user) {
  return boundary(__func__, -1, {}, [&] {
    state().set_shed_hook(fn, user);
    return 0;
  });
}

int pnmem_check_bytes(uint64_t bytes, int die, pnmem_admit_answer* out) {
  return boundary(__func__, -1, {out}, [&] {
    if (die < pnmem::no_die || die >= pnmem::max_dies) return -1;
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    if (die == pnmem::no_die) {
      const auto r = s.ledger.check_bytes(pnmem::c_abi::live_watcher{w}, bytes, policy_of(w));  // the ledger's mutex
      *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
      return 0;
    }
    if (w == nullptr || !w->running()) {
      *out = not_watching(pnmem::answer_kind::die_bytes, die);
    } else {
      // What is promised on the die counted (the box's, for a die named by UUID): the ledger's mutex.
      const auto r = s.ledger.check_die_bytes(pnmem::c_abi::live_watcher{w}, die, bytes, policy_of(w));
      *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
    }
    out->need_bytes = bytes;
    return 0;
  });
}

void pnmem_reservation_settle(pnmem_reservation reservation) {
  boundary(__func__, {}, [&] { state().settle(reservation); });
}

void pnmem_reservation_cancel(pnmem_reservation reservation) {
  boundary(__func__, {}, [&] { state().cancel(reservation); });
}

uint64_t pnmem_pending_bytes(void) {
  return boundary(__func__, std::uint64_t{0}, {}, [] {
    global_state& s = state();
    return s.ledger.pending_bytes(pnmem::c_abi::live_watcher{s.watcher()});
  });
}

int pnmem_policy_get(pnmem_policy* out) {
  return boundary(__func__, -1, {out}, [&] {
    global_state& s = state();
    const pnmem::policy p = s.policy();
    s.flush();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    *out = pnmem::c_abi::to_c(p, w != nullptr ? w->read() : pnmem::mem_state{});
    return 0;
  });
}

int pnmem_host_budget(pnmem_budget* out) {
  return boundary(__func__, -1, {out}, [&] {
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const pnmem::mem_state snap = w != nullptr ? w->read() : pnmem::mem_state{};
    const std::uint64_t pending = s.ledger.pending_bytes(pnmem::c_abi::snapshot_view{snap});  // the ledger's mutex
    *out = pnmem::c_abi::budget_to_c(snap, policy_of(w), pending);
    return 0;
  });
}

int pnmem_room_init_sized(pnmem_room* room, size_t struct_size) {
  return init_versioned(__func__, room, struct_size, pnmem::c_abi::room_size_v1, [] { return pnmem_room{}; });
}

int pnmem_host_room(pnmem_room* out) {
  return read_versioned_out(__func__, out, pnmem::c_abi::room_size_v1, "pnmem_room_init", [] {
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    if (w == nullptr || !w->running()) return pnmem::c_abi::to_c(pnmem::host_room{}, 0);
    const pnmem::mem_state snap = w->read();
    return pnmem::c_abi::to_c(s.ledger.room(pnmem::c_abi::snapshot_view{snap}, policy_of(w)), snap.seq);  // ledger's mutex
  });
}

int pnmem_credit_freed(uint64_t bytes) {
  return boundary(__func__, -1, {}, [&] {
    state().ledger.credit_freed(bytes);
    return 0;
  });
}

pnmem_subscription pnmem_subscribe(pnmem_level_fn fn, void* user) {
  return boundary(__func__, pnmem_subscription{0}, {},
                  [&] { return fn != nullptr ? state().subscribe(fn, user) : pnmem_subscription{0}; });
}

void pnmem_unsubscribe(pnmem_subscription id) {
  boundary(__func__, {}, [&] {
    if (id != 0) state().unsubscribe(id);
  });
}

int pnmem_explain(const pnmem_admit_answer* a, char* buf, size_t len) {
  return boundary(__func__, -1, {a}, [&] { return pnmem::c_abi::explain(*a, buf, len); });
}

int64_t pnmem_retry_after_ms(const pnmem_admit_answer* a, const char** basis) {
  const char* const entry = __func__;
  return boundary(entry, std::int64_t{-1}, {a}, [&]() -> std::int64_t {
    std::string why;
    const std::optional<pnmem::admit_answer> answer = pnmem::c_abi::answer_from_c(*a, why);
    if (!answer) {
      refuse(state(), entry, "a->" + why);
      return -1;
    }
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const pnmem::retry_hint h =
        w != nullptr ? pnmem::retry_after(*answer, *w, &s.ledger, policy_of(w)) : pnmem::retry_hint{};
    if (basis != nullptr) *basis = to_string(h.basis).data();
    return h.after_ms;
  });
}

int64_t pnmem_retry_after_seconds(int64_t after_ms) { return pnmem::retry_after_seconds(after_ms); }

int pnmem_retry_basis_is_guess(const char* basis) {
  if (basis == nullptr) return 0;
  for (int i = 0; i < pnmem::retry_basis_count; ++i) {
    const auto b = static_cast<pnmem::retry_basis>(i);
    if (to_string(b) == basis) return pnmem::retry_basis_is_guess(b) ? 1 : 0;
  }
  return 0;
}

int pnmem_model_load_init_sized(pnmem_model_load* load, size_t struct_size) {
  return init_versioned(__func__, load, struct_size, pnmem::c_abi::model_load_size_v1, pnmem::c_abi::default_model_load);
}

int pnmem_admit_model_load(const pnmem_model_load* load, pnmem_admit_answer* out) {
  const char* const entry = __func__;
  return boundary(entry, -1, {load, out}, [&] {
    return model_load_c(entry, pnmem::answer_kind::model_load, *load, *out, nullptr);
  });
}

int pnmem_admit_model_load_die(const pnmem_model_load* load, pnmem_admit_answer* out) {
  const char* const entry = __func__;
  return boundary(entry, -1, {load, out}, [&] {
    return model_load_c(entry, pnmem::answer_kind::load_slice, *load, *out, nullptr);
  });
}

int pnmem_admit_model_load_reserved(const pnmem_model_load* load, pnmem_admit_answer* out,
                                    pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;  // whatever fails below, nothing is reserved
  const char* const entry = __func__;
  return boundary(entry, -1, {load, out, reservation}, [&] {
    return model_load_c(entry, pnmem::answer_kind::model_load, *load, *out, reservation);
  });
}

int pnmem_admit_model_load_die_reserved(const pnmem_model_load* load, pnmem_admit_answer* out,
                                        pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;
  const char* const entry = __func__;
  return boundary(entry, -1, {load, out, reservation}, [&] {
    return model_load_c(entry, pnmem::answer_kind::load_slice, *load, *out, reservation);
  });
}

int pnmem_reserve_die_bytes(int die, uint64_t bytes, int64_t ttl_ms, pnmem_admit_answer* out,
                            pnmem_reservation* reservation) {
  if (reservation != nullptr) *reservation = 0;
  const char* const entry = __func__;
  return boundary(entry, -1, {out, reservation}, [&] {
    global_state& s = state();
    if (die < 0 || die >= pnmem::max_dies) {
      refuse(s, entry, "die " + std::to_string(die) + " is outside [0, " + std::to_string(pnmem::max_dies) + ")");
      return -1;
    }
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const c_reserve c = reserve_for(s, w, ttl_ms);
    auto r = s.ledger.reserve_die_bytes(pnmem::c_abi::live_watcher{w}, die, bytes, c.options);  // the ledger's mutex
    if (r.answer.status == pnmem::admit_status::fail_open) r.answer.die = die;
    const pnmem_reservation id = s.keep(std::move(r.held), c.handle_expires_ns);
    *out = pnmem::c_abi::to_c(r.answer, r.pending_bytes);
    out->need_bytes = bytes;
    *reservation = id;
    return 0;
  });
}

int pnmem_set_die_uuid(int die, const char* uuid) {
  const char* const entry = __func__;
  return boundary(entry, -1, {uuid}, [&] {
    global_state& s = state();
    if (die < 0 || die >= pnmem::max_dies) {
      refuse(s, entry, "die " + std::to_string(die) + " is outside [0, " + std::to_string(pnmem::max_dies) + ")");
      return -1;
    }
    pnmem::die_uuid id;
    const std::string_view text(uuid, ::strnlen(uuid, 256));
    if (!pnmem::parse_die_uuid(text, id)) {
      refuse(s, entry, "uuid \"" + pnmem::detail::printable(text) +
                           "\": not a GPU's UUID (GPU- and 8-4-4-4-12 hex digits, as nvidia-smi -L prints it, or 32 "
                           "hex digits)");
      return -1;
    }
    if (!s.ledger.name_die(die, id)) {
      refuse(s, entry, "die " + std::to_string(die) + " holds reservations under another UUID");
      return -1;
    }
    return 0;
  });
}

int pnmem_admit_load_spike(pnmem_admit_answer* out) {
  return boundary(__func__, -1, {out}, [&] {
    *out = load_check(pnmem::answer_kind::load_spike, pnmem::no_die,
                      [](const pnmem::mem_state& snap, const pnmem::policy& p) { return pnmem::admit_load_spike(snap, p); });
    return 0;
  });
}

int pnmem_kv_allocation_for(const pnmem_ladder_plan* plan, const pnmem_model* model, uint64_t tokens,
                            pnmem_kv_allocation* out) {
  const char* const entry = __func__;
  return boundary(entry, -1, {plan, model, out}, [&] {
    global_state& s = state();
    std::string why;
    const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(*model, why);
    if (!m) {
      refuse(s, entry, why);
      return -1;
    }
    pnmem::ladder_plan p;  // only rung 4a's flag is read
    p.force_kv_q4 = pnmem::c_abi::flag_from_c(plan->force_kv_q4);
    *out = pnmem::c_abi::to_c(pnmem::kv_allocation_for(p, m->cost, tokens));
    return 0;
  });
}

pnmem_ladder_plan pnmem_plan_ladder(pnmem_level level, int max_slots, int prefill_window, bool kv_q4) {
  const pnmem_ladder_plan error_value = pnmem::c_abi::error_plan(max_slots, prefill_window, kv_q4);
  return boundary(__func__, error_value, {}, [&] {
    const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(level);
    if (!l) return error_value;
    global_state& s = state();
    const pnmem::policy p = s.policy();
    s.flush();
    return pnmem::c_abi::to_c(pnmem::ladder_plan_for(*l, {max_slots, prefill_window, kv_q4}, p));
  });
}

pnmem_ladder_plan pnmem_plan_ladder_now(int max_slots, int prefill_window, bool kv_q4) {
  const pnmem_ladder_plan error_value = pnmem::c_abi::error_plan(max_slots, prefill_window, kv_q4);
  return boundary(__func__, error_value, {}, [&] {
    global_state& s = state();
    const pnmem::policy p = s.policy();
    s.flush();
    const pnmem::c_abi::platform_watcher* w = s.watcher();
    const pnmem::mem_state snap = w != nullptr ? w->read() : pnmem::mem_state{};
    return pnmem::c_abi::to_c(pnmem::ladder_plan_from_state(snap, {max_slots, prefill_window, kv_q4}, p));
  });
}

void pnmem_set_log_sink(pnmem_log_fn fn, void* user) {
  boundary(__func__, {}, [&] { state().set_sink(fn, user); });
}


pnmem_gate* pnmem_gate_create(int max_slots, int max_waiters) {
  return boundary(__func__, static_cast<pnmem_gate*>(nullptr), {}, [&] {
    global_state& s = state();  // first: its constructor takes the environment's errors for the sink
    return create_gate(s, pnmem::model_desc{}, max_slots, max_waiters);
  });
}

pnmem_gate* pnmem_gate_create_for(const pnmem_model* model, int max_waiters) {
  return boundary(__func__, static_cast<pnmem_gate*>(nullptr), {model}, [&]() -> pnmem_gate* {
    global_state& s = state();
    std::string why;
    const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(*model, why);
    if (!m) {
      refuse(s, "pnmem_gate_create_for", why);
      return nullptr;
    }
    return create_gate(s, *m, m->max_slots, max_waiters);
  });
}

void pnmem_gate_destroy(pnmem_gate* gate) {
  boundary(__func__, {gate}, [&] {
    state().remove_gate(&gate->gate);
    delete gate;
  });
}

pnmem_gate_status pnmem_gate_acquire(pnmem_gate* gate, int64_t timeout_ms) {
  return boundary(__func__, PNMEM_GATE_ERROR, {gate}, [&] {
    return gate_status_to_c(gate->gate.acquire_for(pnmem::c_abi::gate_timeout_from_c(timeout_ms)));
  });
}

pnmem_gate_status pnmem_gate_acquire_tokens(pnmem_gate* gate, int n_tokens, int64_t timeout_ms) {
  return boundary(__func__, PNMEM_GATE_ERROR, {gate}, [&] {
    if (n_tokens < 0) {
      refuse(state(), "pnmem_gate_acquire_tokens", "n_tokens " + std::to_string(n_tokens) + " is negative");
      return PNMEM_GATE_ERROR;
    }
    const pnmem::request_spec rq = gate->request(n_tokens);  // outlives the wait
    return gate_status_to_c(gate->gate.acquire_for(pnmem::c_abi::gate_timeout_from_c(timeout_ms), rq));
  });
}

void pnmem_gate_notify_denied(pnmem_gate* gate, const pnmem_admit_answer* answer, int n_tokens) {
  boundary(__func__, {gate, answer}, [&] {
    if (answer->status != PNMEM_DENIED || n_tokens < 0) return;
    const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(answer->level);
    if (!l) return;
    // As the decision the answer gives: a refusal of a request needing no host bytes at the reserve is held
    // (TIGHT) under the gate's zero-cost rule hold, not shed.
    // An answer whose reason is not pnmem's string is pushed as it says, never held.
    std::string ignored;
    const std::optional<pnmem::admit_answer> a = pnmem::c_abi::answer_from_c(*answer, ignored);
    pnmem::admit_result unread;
    unread.verdict = pnmem::verdict::reject;
    unread.reason = pnmem::admit_reason::bad_request;
    gate->gate.notify_denied(*l, a ? a->detail : unread,
                             gate->request(n_tokens, answer->die >= 0 ? answer->die : pnmem::no_die));
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

static_assert(std::string_view(PNMEM_METRICS_CONTENT_TYPE) == pnmem::prometheus_content_type);

int pnmem_metrics_text(char* buf, size_t len, unsigned what) {
  return boundary(__func__, -1, {}, [&] {
    if ((buf == nullptr && len > 0) || what == 0 || (what & ~PNMEM_METRICS_ALL) != 0) return -1;
    global_state& s = state();
    const pnmem::c_abi::platform_watcher* w = s.watcher();  // no lock: published once, never destroyed
    std::string text;
    if ((what & PNMEM_METRICS_BOX) != 0) {
      const pnmem::mem_state snap = w != nullptr ? w->read() : pnmem::mem_state{};
      text = pnmem::prometheus_text(snap, (what & PNMEM_METRICS_COUNTERS) != 0 ? &s.counters : nullptr, policy_of(w));
    } else {
      text = pnmem::prometheus_counters_text(s.counters);
    }
    if ((what & PNMEM_METRICS_COUNTERS) != 0) {
      // The model-server protocol's gauges: the C gates' queues and slots and the engine's own numbers.
      if (const std::optional<pnmem::fleet_load> f = s.fleet()) text += pnmem::prometheus_fleet_text(*f);
      // The box ledger this process joined: what every process of the box has promised, as this one counts it.
      const pnmem::host_ledger::figures f = s.ledger.ledger_figures(pnmem::c_abi::live_watcher{w});
      if (f.box) {
        pnmem::ledger_load l{f.scope, f.processes, f.pending_bytes, f.credited_bytes};
        for (const auto& d : f.dies) l.dies.push_back({pnmem::to_string(d.uuid), d.pending_bytes, d.retiring_bytes});
        text += pnmem::prometheus_ledger_text(l);
      }
    }
    if (text.size() > static_cast<std::size_t>(INT_MAX)) return -1;
    write_err(buf, len, text);  // cut to len - 1 bytes and NUL-terminated, as snprintf
    return static_cast<int>(text.size());
  });
}

int pnmem_set_fleet_load(uint64_t queued_requests, uint64_t running_requests, uint64_t slot_capacity,
                         uint64_t kv_used_bytes, uint64_t kv_capacity_bytes) {
  return boundary(__func__, -1, {}, [&] {
    state().set_fleet_load(pnmem::fleet_load{queued_requests, running_requests, slot_capacity, kv_used_bytes,
                                             kv_capacity_bytes});
    return 0;
  });
}

const char* pnmem_level_name(pnmem_level level) {
  return boundary(__func__, "invalid", {}, [&]() -> const char* {
    const std::optional<pnmem::mem_level> l = pnmem::c_abi::level_from_c(level);
    return l ? pnmem::to_string(*l).data() : "invalid";  // string literals: NUL-terminated, static
  });
}

}  // extern "C"

// --- Rung 4b: KV eviction ---------------------------------------------------------------------------

namespace {

pnmem::eviction_limits limits_from_c(const pnmem_eviction_limits* l) {
  return l == nullptr ? pnmem::eviction_limits{} : pnmem::eviction_limits{l->min_keep_tokens, l->min_keep_permille};
}

void put_slots(const int* slot_tokens, int n_slots, const std::vector<pnmem::keep_budget_answer>& each,
               pnmem_keep_answer* per_slot) {
  if (per_slot == nullptr) return;
  for (int i = 0; i < n_slots; ++i) {
    const auto& e = each[static_cast<std::size_t>(i)];
    per_slot[i] = pnmem_keep_answer{slot_tokens[i], e.keep_tokens, e.freed_bytes};
  }
}

pnmem_eviction eviction_to_c(const pnmem::eviction_admission& a) {
  pnmem_eviction e{};
  e.considered = a.considered ? 1 : 0;
  e.after_eviction = a.after_eviction ? 1 : 0;
  e.enough = a.plan.enough ? 1 : 0;
  e.cut_to_tokens = a.plan.cut_to;
  e.slots_cut = a.plan.slots_cut;
  e.evict_bytes = a.evict_bytes;
  e.freed_bytes = a.plan.freed_bytes;
  return e;
}

// The slots' arguments: n_slots >= 0, slot_tokens not NULL when there are any.
bool slots_ok(global_state& s, const char* entry, const int* slot_tokens, int n_slots) {
  if (n_slots < 0) {
    refuse(s, entry, "n_slots is negative (" + std::to_string(n_slots) + ")");
    return false;
  }
  if (n_slots > 0 && slot_tokens == nullptr) {
    refuse(s, entry, "slot_tokens is NULL with n_slots " + std::to_string(n_slots));
    return false;
  }
  return true;
}

}  // namespace

int pnmem_select_keep(const float* scores, int n_tokens, int budget, int sinks, int recent, int* keep, float* scratch) {
  const char* const entry = __func__;
  return boundary(entry, -1, {keep}, [&] {
    if (scores != nullptr && scratch == nullptr && n_tokens > budget && budget > 0) {
      refuse(state(), entry, "scratch is NULL (n_tokens floats are needed with scores)");
      return -1;
    }
    return pnmem::select_keep(scores, n_tokens, budget, pnmem::keep_window{sinks, recent}, keep, scratch);
  });
}

int pnmem_observation_scores(const float* attn, int rows, int n_tokens, int kernel, float* scores, float* scratch) {
  const char* const entry = __func__;
  return boundary(entry, -1, {attn, scores, scratch}, [&] {
    if (rows < 0 || n_tokens < 0) {
      refuse(state(), entry, "rows and n_tokens must not be negative");
      return -1;
    }
    pnmem::observation_scores(attn, rows, n_tokens, kernel, scores, scratch);
    return 0;
  });
}

int pnmem_key_norm_scores(const float* keys, int n_tokens, int dim, float* scores) {
  const char* const entry = __func__;
  return boundary(entry, -1, {keys, scores}, [&] {
    if (n_tokens < 0 || dim < 0) {
      refuse(state(), entry, "n_tokens and dim must not be negative");
      return -1;
    }
    pnmem::key_norm_scores(keys, n_tokens, dim, scores);
    return 0;
  });
}

pnmem_eviction_limits pnmem_eviction_limits_default(void) {
  const pnmem::eviction_limits l{};
  return pnmem_eviction_limits{l.min_keep_tokens, l.min_keep_permille};
}

int pnmem_plan_eviction(const pnmem_model* model, const int* slot_tokens, int n_slots, uint64_t bytes_to_free,
                        const pnmem_eviction_limits* limits, pnmem_keep_answer* per_slot, pnmem_eviction* out) {
  const char* const entry = __func__;
  return boundary(entry, -1, {model, out}, [&] {
    global_state& s = state();
    if (!slots_ok(s, entry, slot_tokens, n_slots)) return -1;
    std::string why;
    const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(*model, why);
    if (!m) {
      refuse(s, entry, why);
      return -1;
    }
    std::vector<pnmem::keep_budget_answer> each(static_cast<std::size_t>(n_slots));
    pnmem::eviction_admission a;
    a.considered = true;
    a.evict_bytes = bytes_to_free;
    a.plan = pnmem::plan_eviction(m->cost, pnmem::request_kv_format(*m), slot_tokens, n_slots, bytes_to_free, limits_from_c(limits),
                                  each.data());
    put_slots(slot_tokens, n_slots, each, per_slot);
    *out = eviction_to_c(a);
    return 0;
  });
}

int pnmem_admit_after_eviction(const pnmem_model* model, const pnmem_request* request, const int* slot_tokens,
                               int n_slots, const pnmem_eviction_limits* limits, pnmem_admit_answer* out,
                               pnmem_eviction* eviction, pnmem_keep_answer* per_slot) {
  const char* const entry = __func__;
  return boundary(entry, -1, {model, request, out, eviction}, [&] {
    global_state& s = state();
    if (!slots_ok(s, entry, slot_tokens, n_slots)) return -1;
    std::string why;
    const std::optional<pnmem::model_desc> m = pnmem::c_abi::model_from_c(*model, why);
    const std::optional<pnmem_request> rq = m ? pnmem::c_abi::request_from_c(*request, why) : std::nullopt;
    if (!m || !rq) {
      refuse(s, entry, why);
      return -1;
    }
    std::string line;
    const pnmem::c_abi::platform_watcher* w = s.watcher();  // no lock: published once, never destroyed
    const pnmem::admit_options o = live_options(s, w, line);
    std::vector<pnmem::keep_budget_answer> each(static_cast<std::size_t>(n_slots));
    const pnmem::admit_eviction_answer a =
        pnmem::admit_after_eviction(pnmem::c_abi::live_watcher{w}, *m, rq->n_tokens, rq->encoder_items, slot_tokens,
                                    n_slots, o, each.data(), limits_from_c(limits));
    if (!line.empty()) s.log(line);  // the sink may call back into pnmem
    if (!a.eviction.considered) {  // nothing evicted: every slot keeps what it holds
      for (int i = 0; i < n_slots; ++i) each[static_cast<std::size_t>(i)] = {slot_tokens[i], 0, false};
    }
    put_slots(slot_tokens, n_slots, each, per_slot);
    *out = pnmem::c_abi::to_c(a.answer, 0);
    *eviction = eviction_to_c(a.eviction);
    return 0;
  });
}

