// integration/c_conversions.hpp - every value that crosses the C ABI, converted in one place.
//
// Outgoing (C++ -> C) conversions cannot fail: each C++ value has a C one, and
// c_conversions.cpp asserts at compile time that the mirrored constants agree.
// Incoming (C -> C++) conversions are checked: a C caller can pass any int where
// the header says pnmem_level or a die id, and an out-of-range value becomes
// std::nullopt (the entry point's error value), never an invalid enum.
// Internal to libpnmem_c.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "pnmem/admission.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/host_room.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/model_shape.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/pnmem_c.h"
#include "pnmem/policy.hpp"
#include "pnmem/provenance.hpp"
#include "pnmem/watcher.hpp"

namespace pnmem::c_abi {

// --- C++ -> C ------------------------------------------------------------------
pnmem_level to_c(mem_level l) noexcept;
pnmem_admit_status to_c(admit_status s) noexcept;
pnmem_gate_status to_c(gate_status s) noexcept;
// The one place a C snapshot is filled from a mem_state.
pnmem_state to_c(const mem_state& m) noexcept;
// The snapshot with its provenance (struct_size = sizeof(pnmem_snapshot): pnmem_read_snapshot
// copies the caller's part of it).
pnmem_snapshot snapshot_to_c(const mem_state& m, const policy& p) noexcept;  // p: for the per-source levels
pnmem_cgroup_mode to_c(cgroup_mode m) noexcept;
pnmem_psi_mode to_c(psi_mode m) noexcept;
// `pending_bytes`: what host_ledger::admit reported (0 for pnmem_admit).
pnmem_admit_answer to_c(const admit_answer& a, std::uint64_t pending_bytes) noexcept;
pnmem_ladder_plan to_c(const ladder_plan& p) noexcept;
// The policy, with the reserve it implies for `s` (the latest snapshot: host_reserve_bytes(s, p),
// the container rule where its total is a cgroup's limit).
pnmem_policy to_c(const policy& p, const mem_state& s) noexcept;
// The host budget of a snapshot with `pending_bytes` promised (the ledger's).
pnmem_budget budget_to_c(const mem_state& s, const policy& p, std::uint64_t pending_bytes) noexcept;
// The C change (its `state` points at `state_out`, which the caller keeps alive for the call).
pnmem_level_change to_c(const level_change& c, pnmem_state& state_out) noexcept;
// Writes a model's cost into the cost fields of `out` (the request fields are left).
void cost_to_c(const model_cost& m, pnmem_model& out) noexcept;
pnmem_kv_format to_c(kv_format f) noexcept;
pnmem_zero_cost to_c(zero_cost_rule r) noexcept;
// A pure check's answer (admission.hpp's admit_result: a model load, die bytes, the load spike) as an
// answer of `kind` on a snapshot at `level`.
pnmem_admit_answer to_c(const admit_result& r, answer_kind kind, mem_level level) noexcept;
pnmem_kv_allocation to_c(const kv_allocation& a) noexcept;
// A ledger's room (host_room.hpp) on the snapshot numbered `seq` (struct_size = sizeof).
pnmem_room to_c(const host_room& r, std::uint64_t seq) noexcept;

// --- Versioned structs ------------------------------------------------------------------
// The first version's sizes: a caller's struct_size below these is refused. A later
// version that adds fields keeps these (the offset of its first new field).
inline constexpr std::size_t model_size_v1 = offsetof(pnmem_model, n_more_windows);
inline constexpr std::size_t watcher_options_size_v1 = offsetof(pnmem_watcher_options, root);  // before `root`
inline constexpr std::size_t watcher_options_size_v2 = offsetof(pnmem_watcher_options, ledger);  // before `ledger`
inline constexpr std::size_t model_load_size_v1 = sizeof(pnmem_model_load);
inline constexpr std::size_t snapshot_size_v1 = offsetof(pnmem_snapshot, host_level);  // before the levels
inline constexpr std::size_t engine_rule_size_v1 = offsetof(pnmem_engine_rule, mtp);  // before `mtp`
inline constexpr std::size_t model_shape_size_v1 = offsetof(pnmem_model_shape, side_bytes);  // before side_bytes
inline constexpr std::size_t request_size_v1 = sizeof(pnmem_request);
inline constexpr std::size_t room_size_v1 = sizeof(pnmem_room);

// The defaults with the seed's cost, struct_size set to sizeof (the init narrows it):
// pnmem_model_init_reference, and what a caller's older, smaller struct reads past its end.
pnmem_model default_model() noexcept;
// PNMEM_KV_UNSET as an int: a model's normal_kv as pnmem_model_init leaves it.
inline constexpr int kv_unset_raw = -1;
// pnmem_model_init's: the request defaults, every cost 0 and normal_kv PNMEM_KV_UNSET (never set).
pnmem_model unset_model() noexcept;
// The same request defaults with every cost 0 (preallocated_model_cost): pnmem_model_init_preallocated.
pnmem_model preallocated_model() noexcept;
// The watcher's: the environment's (PN_MEMWATCH_POLL_MS, PN_PRESSURE_POLL_MS, PN_STEP_DOWN_DWELL_MS;
// config.hpp, read once, its errors left for the state to log); may throw std::bad_alloc.
pnmem_watcher_options default_watcher_options();
pnmem_model_load default_model_load() noexcept;
pnmem_engine_rule default_engine_rule() noexcept;
pnmem_model_shape default_model_shape() noexcept;
pnmem_request default_request() noexcept;

// A caller's engine rule / shape / request as the C++ value, or nothing with `why` naming the field
// ("engine->seqs is 0", "shape->groups[2].kind is 9: ..."). struct_size is checked here too.
std::optional<engine_rule> engine_rule_from_c(const pnmem_engine_rule& in, std::string& why);
std::optional<model_shape> model_shape_from_c(const pnmem_model_shape& in, std::string& why);
std::optional<pnmem_request> request_from_c(const pnmem_request& in, std::string& why);
// A shape into the C struct (struct_size kept).
void shape_to_c(const model_shape& s, pnmem_model_shape& out) noexcept;

// What is wrong with a caller's struct_size, or "" if it is valid: `what` names the
// struct ("model"), `init` the call that initialises it.
std::string struct_size_problem(std::uint32_t struct_size, std::size_t size_v1, const char* what, const char* init);

// A caller's struct read as this library's version: the defaults, overwritten by the
// first min(struct_size, sizeof) bytes of `in`. Call only after struct_size_problem
// found nothing wrong.
pnmem_model read_model(const pnmem_model& in) noexcept;
pnmem_watcher_options read_watcher_options(const pnmem_watcher_options& in);
pnmem_model_load read_model_load(const pnmem_model_load& in) noexcept;

// --- C -> C++ (checked) ----------------------------------------------------------
// nullopt for a value outside [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL].
// By reference: see c_conversions.cpp (no load of an out-of-range enum).
std::optional<mem_level> level_from_c(const pnmem_level& l) noexcept;
// The caller's model (any struct_size), checked field by field: nullopt with `why`
// naming the field ("model->die is -2: ...") when struct_size is not valid, a format
// is not a pnmem_kv_format, die is outside [-1, PNMEM_MAX_DIES), or the cost is not
// valid (more than 8 anchors, anchors not increasing, a table and coefficients: the
// checks of pnmem::validate). The int flags are true when non-zero, and the ints the
// C++ side defines for every value (max_window <= 0, max_slots < 1) pass as they are.
std::optional<model_desc> model_from_c(const pnmem_model& model, std::string& why);
// A kv format from C: nullopt outside [PNMEM_KV_Q4, PNMEM_KV_Q4_0] (by reference, as level_from_c).
std::optional<kv_format> kv_format_from_c(const pnmem_kv_format& f) noexcept;
// The caller's options checked: nullopt with `why` naming the field. The policy is left default.
std::optional<watcher_options> watcher_options_from_c(const pnmem_watcher_options& o, std::string& why);
// The sampler's root directory a C caller's options name ("/" for NULL, or a caller built against the
// first header); nullopt with `why` when it is empty or longer than max_root_bytes.
inline constexpr std::size_t max_root_bytes = 4095;
std::optional<std::string> watcher_root_from_c(const pnmem_watcher_options& o, std::string& why);
// The box ledger a C caller's options name: nullopt for NULL (or a caller built before 0.3: PN_LEDGER's),
// else the text; `why` set (and "" returned) when it is longer than max_root_bytes.
std::optional<std::string> watcher_ledger_from_c(const pnmem_watcher_options& o, std::string& why);
// A model load from C: its spec and die, checked (nullopt with `why` naming the field: struct_size,
// or a die outside [-1, PNMEM_MAX_DIES)).
struct model_load_request {
  model_load_spec spec;
  int die = no_die;
};
std::optional<model_load_request> model_load_from_c(const pnmem_model_load& load, std::string& why);
// A C bool's byte read as a byte (a caller's struct may hold any value there): non-zero is true.
bool flag_from_c(const bool& b) noexcept;
// ttl_ms <= 0: 0 (never expires); beyond what nanoseconds hold: the most they hold.
std::chrono::nanoseconds ttl_from_c(std::int64_t ttl_ms) noexcept;
// Negative: no wait; beyond max_gate_wait: max_gate_wait (steady_clock::now()
// plus any int64 milliseconds would overflow the clock's nanoseconds).
std::chrono::milliseconds gate_timeout_from_c(std::int64_t timeout_ms) noexcept;
inline constexpr std::chrono::milliseconds max_gate_wait =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::years{100});

// What pnmem_plan_ladder returns for a level out of range, or on failure: the
// operator config as at OK (ladder_plan_for's values at OK), flagged in the note.
pnmem_ladder_plan error_plan(int max_slots, int prefill_window, bool kv_q4) noexcept;

// The C++ answer a C one stands for (status, reason, die and the bytes), for pnmem_retry_after_ms;
// nullopt with `why` naming the field when the status is out of range or the reason is not one of
// the strings pnmem writes (compared by address: a caller's own string is never read).
std::optional<admit_answer> answer_from_c(const pnmem_admit_answer& a, std::string& why);

// pnmem_explain's line (snprintf's convention: the length it needed; -1 for a NULL
// buf with len > 0).
int explain(const pnmem_admit_answer& a, char* buf, std::size_t len);

}  // namespace pnmem::c_abi
