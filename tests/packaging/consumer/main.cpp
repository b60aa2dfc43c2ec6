// A program that uses an installed pnmem: built by install_test.sh via pkg-config,
// via CMake's find_package(pnmem) and via a Meson subproject. It decides at compile
// time (static_assert) and prints the plan; the test compares the output.
#include <pnmem/pnmem.hpp>

#include <cstdio>

namespace {

using namespace pnmem::literals;

// A 64 GiB host with 10 GiB available: the reserve is max(1 GiB, 15 %) = 9.6 GiB,
// so only 0.4 GiB of slack is left, under a quarter of the reserve: TIGHT.
constexpr pnmem::mem_state snapshot = [] {
  pnmem::mem_state s;
  s.host_total_bytes = 64_GiB;
  s.host_avail_bytes = 10_GiB;
  return pnmem::with_derived_level(s);
}();
static_assert(snapshot.level == pnmem::mem_level::tight);

constexpr pnmem::ladder_config operator_config{8, 4096, false};
constexpr pnmem::ladder_plan plan = pnmem::ladder_plan_from_state(snapshot, operator_config);
static_assert(plan.max_slots == 4 && plan.prefill_window == 2048);
static_assert(plan.force_kv_q4 && plan.kv_evict && plan.degraded);

static_assert(pnmem::parse_bytes("1.5GiB").value == 1536_MiB);

}  // namespace

int main() {
  const auto level = pnmem::to_string(snapshot.level);
  std::printf("pnmem %s\n", pnmem::version_string);
  std::printf("level %.*s\n", static_cast<int>(level.size()), level.data());
  std::printf("plan max_slots=%d prefill_window=%d force_kv_q4=%d kv_evict=%d\n", plan.max_slots,
              plan.prefill_window, plan.force_kv_q4 ? 1 : 0, plan.kv_evict ? 1 : 0);
  std::printf("scratch %s\n", pnmem::format_bytes(pnmem::default_policy.die_scratch_bytes).c_str());
  return 0;
}
