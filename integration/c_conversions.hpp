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
#include <cstdint>
#include <optional>

#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/pnmem_c.h"

namespace pnmem::c_abi {

// --- C++ -> C ------------------------------------------------------------------
pnmem_level to_c(mem_level l) noexcept;
pnmem_admit_status to_c(admit_status s) noexcept;
pnmem_gate_status to_c(gate_status s) noexcept;
// The one place a C snapshot is filled from a mem_state.
pnmem_state to_c(const mem_state& m) noexcept;
// `pending_bytes`: what host_ledger::admit reported (0 for pnmem_admit).
pnmem_admit_answer to_c(const admit_answer& a, std::uint64_t pending_bytes) noexcept;
pnmem_ladder_plan to_c(const ladder_plan& p) noexcept;

// --- C -> C++ (checked) ----------------------------------------------------------
// nullopt for a value outside [PNMEM_LEVEL_OK, PNMEM_LEVEL_CRITICAL].
// By reference: see c_conversions.cpp (no load of an out-of-range enum).
std::optional<mem_level> level_from_c(const pnmem_level& l) noexcept;
// nullopt when model.die is outside [-1, PNMEM_MAX_DIES); the int flags are
// true when non-zero, and the ints the C++ side defines for every value
// (max_window <= 0, max_slots < 1) pass as they are.
std::optional<model_desc> model_from_c(const pnmem_model& model) noexcept;
// Negative: no wait; beyond max_gate_wait: max_gate_wait (steady_clock::now()
// plus any int64 milliseconds would overflow the clock's nanoseconds).
std::chrono::milliseconds gate_timeout_from_c(std::int64_t timeout_ms) noexcept;
inline constexpr std::chrono::milliseconds max_gate_wait =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::years{100});

// What pnmem_plan_ladder returns for a level out of range, or on failure: the
// operator config as at OK (ladder_plan_for's values at OK), flagged in the note.
pnmem_ladder_plan error_plan(int max_slots, int prefill_window, bool kv_q4) noexcept;

}  // namespace pnmem::c_abi
