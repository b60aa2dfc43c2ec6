// Every decision is usable in a constant expression: proved by static_assert, with
// the default policy, a constexpr policy value and a policy given as a template argument.
#include "pnmem/pnmem.hpp"

#include <doctest/doctest.h>

using namespace pnmem;
using namespace pnmem::literals;

namespace {

constexpr mem_state make(std::uint64_t total, std::uint64_t avail, double some = 0.0, double full = 0.0) {
  mem_state s;
  s.host_total_bytes = total;
  s.host_avail_bytes = avail;
  s.host_psi_some_avg10 = some;
  s.host_psi_full_avg10 = full;
  return s;
}

constexpr mem_state with_die(mem_state s, std::uint64_t free_bytes, std::uint64_t budget) {
  const auto i = static_cast<std::size_t>(s.n_dies++);
  s.per_die_free_bytes[i] = free_bytes;
  s.per_die_budget_bytes[i] = budget;
  return s;
}

// --- levels ---
static_assert(box_reserve_bytes(8_GiB) == 1288490188);
static_assert(box_reserve_bytes(4_GiB) == 1_GiB);
static_assert(host_level(8_GiB, 1288490188) == mem_level::critical);
static_assert(host_level(8_GiB, 1288490189) == mem_level::tight);
static_assert(psi_level(0.0, 15.0) == mem_level::critical);
static_assert(psi_level(0.0, 0.01) == mem_level::tight);
static_assert(psi_level(10.0, 0.0) == mem_level::tight);
static_assert(psi_level(0.01, 0.0) == mem_level::watch);
static_assert(die_level(0, 16_GiB) == mem_level::critical);
static_assert(die_level(0, 0) == mem_level::ok);
static_assert(die_level(1_GiB - 1, 16_GiB) == mem_level::tight);
static_assert(die_level(2_GiB - 1, 16_GiB) == mem_level::watch);
static_assert(derive_level(with_die(make(64_GiB, 60_GiB), 1_GiB - 1, 16_GiB)) == mem_level::tight);
static_assert(explain_level(with_die(make(64_GiB, 60_GiB), 0, 16_GiB)).worst_die == 0);
static_assert(with_derived_level(make(8_GiB, 1_GiB)).level == mem_level::critical);

// --- ladder ---
static_assert(ladder_plan_for(mem_level::tight, {8, 16384, false}).prefill_window == 8192);
static_assert(ladder_plan_for(mem_level::tight, {8, 16384, false}).max_slots == 4);
static_assert(ladder_plan_for(mem_level::critical, {8, 16384, false}).max_slots == 1);
static_assert(ladder_plan_for(mem_level::watch, {8, 16384, false}).force_kv_q4);
static_assert(ladder_plan_for(mem_level::tight, {8, 16384, false}).kv_evict);
static_assert(ladder_plan_for(mem_level::critical, {8, 16384, false}).prefill_window == 4096);
// At OK the plan is the operator config, unchanged.
static_assert(ladder_plan_for(mem_level::ok, {8, 16384, false}).max_slots == 8);
static_assert(ladder_plan_for(mem_level::ok, {8, 16384, false}).prefill_window == 16384);
static_assert(!ladder_plan_for(mem_level::ok, {8, 16384, false}).force_kv_q4);
static_assert(!ladder_plan_for(mem_level::ok, {8, 16384, false}).kv_evict);
static_assert(!ladder_plan_for(mem_level::ok, {8, 16384, false}).degraded);

// --- cost model and admission ---
static_assert(activation_peak_bytes(4096) == 1610612736);
static_assert(host_cost_bytes(1024, kv_format::fp32) == 1024 * 40960 + 384_MiB);
static_assert(admit_request({.n_prompt = 10, .gpu_resident = true}, make(64_GiB, 60_GiB, 0, 15.0)).reason ==
              admit_reason::psi_stall);
static_assert(admit_request({.n_prompt = 20000, .gpu_resident = true, .max_window = 16384}, make(64_GiB, 60_GiB))
                  .fit_tokens == 16384);
static_assert(admit_request({.n_prompt = 8192, .kv = kv_format::fp32}, make(8_GiB, 4_GiB)).fit_tokens == 4962);
// Only a 0-token prefix fits (the budget is exactly the 256 MiB of fixed buffers): a reject
// that names the budget that bound it, and the die only when the die did. A 100-token Q4
// prompt needs its KV plus the peak interpolated between the 0 and 1024 anchors.
constexpr std::uint64_t need_100 = 100 * 5898 + 256_MiB + 100 * 128_MiB / 1024;
static_assert(admit_request({.n_prompt = 100, .kv = kv_format::q4}, make(8_GiB, 1288490188 + 256_MiB)) ==
              admit_result{verdict::reject, 0, admit_reason::host_budget, no_die, need_100, 256_MiB});
static_assert(admit_request({.n_prompt = 100, .kv = kv_format::q4, .die = 1},
                            with_die(with_die(make(64_GiB, 60_GiB), 8_GiB, 16_GiB), 256_MiB, 16_GiB)) ==
              admit_result{verdict::reject, 0, admit_reason::die_vram, 1, need_100, 256_MiB});
// The CAP solve at a compile-time boundary: cost(1024) in Q4 is 1024 * 5898 + 384 MiB.
static_assert(detail::largest_fitting_prompt(5000, kv_format::q4, 1024 * 5898 + 384_MiB) == 1024);
static_assert(detail::largest_fitting_prompt(5000, kv_format::q4, 1024 * 5898 + 384_MiB - 1) == 1023);
static_assert(admit_model_load({10_GiB, 2_GiB}, with_die(make(8_GiB, 4_GiB), 20_GiB, 79_GiB)).verdict ==
              verdict::admit);
// A slice: 6 + 1 GiB and the 1.5 GiB scratch, in the die's free VRAM less its 1 GiB reserve (as a whole load).
static_assert(admit_model_load_die(6_GiB, 1_GiB, with_die(make(8_GiB, 4_GiB), 19_GiB / 2, 79_GiB), 0).verdict ==
              verdict::admit);
static_assert(admit_model_load_die(6_GiB, 1_GiB, with_die(make(8_GiB, 4_GiB), 19_GiB / 2 - 1, 79_GiB), 0).verdict ==
              verdict::reject);
static_assert(admit_load_spike(make(8_GiB, 3_GiB)).reason == admit_reason::host_budget);

// --- parsing ---
static_assert(parse_bytes("2.4GiB").value == 2576980377);
static_assert(parse_bytes("8GB").error == parse_errc::ambiguous_unit);
static_assert(parse_percent_bp("15.5%").value == 1550);
static_assert(parse_switch("on").value);
static_assert(parse_mem_level("TIGHT") == mem_level::tight);

// --- a policy fixed at compile time, as a constexpr value ---
constexpr policy strict = [] {
  policy p;
  p.host_reserve_min_bytes = 2_GiB;
  p.psi_full_reject_bp = 500;
  p.die_reserve_bytes = 2_GiB;
  return p;
}();
static_assert(box_reserve_bytes(8_GiB, strict) == 2_GiB);
static_assert(derive_level(make(8_GiB, 2_GiB), strict) == mem_level::critical);
static_assert(derive_level(make(8_GiB, 2_GiB)) == mem_level::watch);  // the default sees it differently
static_assert(admit_request({.n_prompt = 1, .gpu_resident = true}, make(64_GiB, 60_GiB, 0, 5.0), strict).reason ==
              admit_reason::psi_stall);

// --- a policy as a template argument (policy is a structural type) ---
template <policy P>
struct engine_gate {
  static constexpr mem_level level(const mem_state& s) { return derive_level(s, P); }
  static constexpr admit_result admit(const request_spec& r, const mem_state& s) { return admit_request(r, s, P); }
};
static_assert(engine_gate<strict>::level(make(8_GiB, 2_GiB)) == mem_level::critical);
static_assert(engine_gate<default_policy>::level(make(8_GiB, 2_GiB)) == mem_level::watch);
static_assert(engine_gate<strict>::admit({.n_prompt = 100, .gpu_resident = true}, make(8_GiB, 2_GiB)).reason ==
              admit_reason::host_reserve);

// An engine can check its own configuration at build time.
constexpr ladder_config engine_cfg{16, 32768, false};
static_assert(ladder_plan_for(mem_level::critical, engine_cfg).prefill_window >= 4096,
              "at CRITICAL the engine still accepts a 4k prompt");

}  // namespace

TEST_CASE("compile-time results match run-time results") {
  // The same calls at run time: a volatile input keeps the compiler from folding them.
  volatile std::uint64_t avail = 4_GiB;
  const mem_state s = make(8_GiB, avail);
  CHECK(admit_request({.n_prompt = 8192, .kv = kv_format::fp32}, s).fit_tokens == 4962);
  CHECK(engine_gate<strict>::level(make(8_GiB, avail / 2)) == mem_level::critical);
}
