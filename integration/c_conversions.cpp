// integration/c_conversions.cpp - the C ABI's conversions (c_conversions.hpp), and the
// compile-time proof that every constant pnmem_c.h mirrors agrees with the C++ one.
#include "c_conversions.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include "pnmem/admission.hpp"
#include "pnmem/level.hpp"

namespace pnmem::c_abi {

// --- What pnmem_c.h mirrors ------------------------------------------------------
// A C++ enum that gains a value makes its to_string(next value) stop being
// "invalid", and the assert on it fails: the C header needs the value too.

static_assert(PNMEM_MAX_DIES == max_dies);
static_assert(no_die == -1, "pnmem_c.h documents die -1 as 'the tightest measured die' / 'none'");

static_assert(PNMEM_LEVEL_OK == static_cast<int>(mem_level::ok));
static_assert(PNMEM_LEVEL_WATCH == static_cast<int>(mem_level::watch));
static_assert(PNMEM_LEVEL_TIGHT == static_cast<int>(mem_level::tight));
static_assert(PNMEM_LEVEL_CRITICAL == static_cast<int>(mem_level::critical));
static_assert(PNMEM_LEVEL_CRITICAL + 1 == mem_level_count);
static_assert(to_string(static_cast<mem_level>(mem_level_count)) == "invalid");
// level_from_c reads a pnmem_level's bytes as its underlying type.
static_assert(sizeof(pnmem_level) == sizeof(int));

static_assert(PNMEM_ADMITTED == static_cast<int>(admit_status::admitted));
static_assert(PNMEM_CAPPED == static_cast<int>(admit_status::capped));
static_assert(PNMEM_DENIED == static_cast<int>(admit_status::denied));
static_assert(PNMEM_FAIL_OPEN == static_cast<int>(admit_status::fail_open));
static_assert(to_string(static_cast<admit_status>(PNMEM_FAIL_OPEN + 1)) == "invalid");

// pnmem_admit_answer.reason: the strings pnmem_c.h lists, in admit_reason's order.
namespace {
constexpr std::array<std::string_view, 7> documented_reasons = {
    "fits", "window", "psi_stall", "host_reserve", "host_budget", "die_vram", "bad_request"};
constexpr bool reasons_as_documented() noexcept {
  for (std::size_t i = 0; i < documented_reasons.size(); ++i) {
    if (to_string(static_cast<admit_reason>(i)) != documented_reasons[i]) return false;
  }
  return to_string(static_cast<admit_reason>(documented_reasons.size())) == "invalid";
}
}  // namespace
static_assert(reasons_as_documented());

// pnmem_gate_status is not numbered as gate_status (no cancelled; an ERROR value):
// to_c(gate_status) maps each one by name, and a new gate_status must be added there.
static_assert(to_string(gate_status::queue_full) == "queue_full");
static_assert(to_string(static_cast<gate_status>(static_cast<int>(gate_status::queue_full) + 1)) == "invalid");

// --- C++ -> C ------------------------------------------------------------------
namespace {

// The per-die arrays: the C array's length is PNMEM_MAX_DIES, the C++ one's max_dies.
template <std::size_t N, std::size_t M>
void copy_dies(std::uint64_t (&to)[N], const std::array<std::uint64_t, M>& from) noexcept {
  static_assert(N == M, "PNMEM_MAX_DIES and pnmem::max_dies disagree");
  std::copy(from.begin(), from.end(), to);
}

}  // namespace

pnmem_level to_c(mem_level l) noexcept { return static_cast<pnmem_level>(static_cast<int>(l)); }

pnmem_admit_status to_c(admit_status s) noexcept { return static_cast<pnmem_admit_status>(static_cast<int>(s)); }

pnmem_gate_status to_c(gate_status s) noexcept {
  switch (s) {
    case gate_status::acquired: return PNMEM_GATE_ACQUIRED;
    case gate_status::overloaded: return PNMEM_GATE_OVERLOADED;
    case gate_status::timed_out: return PNMEM_GATE_TIMED_OUT;
    case gate_status::queue_full: return PNMEM_GATE_QUEUE_FULL;
    case gate_status::cancelled: return PNMEM_GATE_TIMED_OUT;  // no stop token from C
  }
  return PNMEM_GATE_ERROR;
}

pnmem_state to_c(const mem_state& m) noexcept {
  pnmem_state out{};
  for_each_host_number([&](std::string_view, auto field) { field(out) = field(m); });
  out.n_dies = die_count(m);
  copy_dies(out.per_die_free, m.per_die_free_bytes);
  copy_dies(out.per_die_budget, m.per_die_budget_bytes);
  copy_dies(out.per_die_used, m.per_die_used_bytes);
  copy_dies(out.per_die_retiring, m.per_die_retiring_bytes);
  out.level = to_c(m.level);
  out.raw_level = to_c(m.raw_level);
  out.seq = m.seq;
  out.sample_time_ns = m.sample_time_ns;
  return out;
}

pnmem_admit_answer to_c(const admit_answer& a, std::uint64_t pending_bytes) noexcept {
  pnmem_admit_answer out{};
  out.status = to_c(a.status);
  out.fit_tokens = a.fit_tokens;
  out.reason = to_string(a.reason).data();  // string literals: NUL-terminated, static
  out.level = to_c(a.level);
  out.die = a.die;
  out.window = a.window;
  out.need_bytes = a.detail.need_bytes;
  out.limit_bytes = a.detail.limit_bytes;
  out.pending_bytes = pending_bytes;
  return out;
}

pnmem_ladder_plan to_c(const ladder_plan& p) noexcept {
  pnmem_ladder_plan out{};
  out.level = to_c(p.level);
  out.max_slots = p.max_slots;
  out.force_kv_q4 = p.force_kv_q4;
  out.kv_evict = p.kv_evict;
  out.prefill_window = p.prefill_window;
  out.degraded = p.degraded;
  out.note = p.note;
  return out;
}

// --- C -> C++ --------------------------------------------------------------------

std::optional<mem_level> level_from_c(const pnmem_level& l) noexcept {
  // The bytes, not the enum: C passes any int as a pnmem_level, and in C++ loading
  // an enum object that holds a value outside its enumerators' range is undefined
  // (UBSan's -fsanitize=enum reports it). Hence also the reference parameter.
  std::underlying_type_t<pnmem_level> raw{};
  std::memcpy(&raw, &l, sizeof raw);
  if (!std::in_range<int>(raw)) return std::nullopt;
  const int v = static_cast<int>(raw);
  if (v < PNMEM_LEVEL_OK || v > PNMEM_LEVEL_CRITICAL) return std::nullopt;
  return static_cast<mem_level>(v);
}

std::optional<model_desc> model_from_c(const pnmem_model& model) noexcept {
  if (model.die < no_die || model.die >= max_dies) return std::nullopt;
  model_desc m;
  m.kv = model.kv_q4 != 0 ? kv_format::q4 : kv_format::fp32;
  m.gpu_resident = model.gpu_resident != 0;
  m.max_window = model.max_window;
  m.die = model.die;
  m.max_slots = model.max_slots;
  return m;
}

std::chrono::milliseconds gate_timeout_from_c(std::int64_t timeout_ms) noexcept {
  if (timeout_ms < 0) return std::chrono::milliseconds{0};
  if (timeout_ms > max_gate_wait.count()) return max_gate_wait;
  return std::chrono::milliseconds{timeout_ms};
}

pnmem_ladder_plan error_plan(int max_slots, int prefill_window, bool kv_q4) noexcept {
  pnmem_ladder_plan out = to_c(ladder_plan_for(mem_level::ok, ladder_config{max_slots, prefill_window, kv_q4}));
  out.note = "error: operator config";
  return out;
}

}  // namespace pnmem::c_abi
