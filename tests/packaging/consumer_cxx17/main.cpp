// A C++17 engine's use of pnmem (llama.cpp pins C++17): a watcher over the Linux sampler, read
// lock-free through the seqlock, a request admitted, the ladder's plan, the engine layer's admit,
// the back-pressure gate, the host ledger and the /metrics text with the fleet series. Compiled with -std=c++17 -Wall -Wextra -Wpedantic
// -Werror by g++ and clang++ against the source tree's headers (tests/packaging/meson.build,
// test cxx17-consumer) and against an installed prefix (install_test.sh); needs only
// -I<prefix>/include and -lpnmem_linux -lpthread.
//
// Prints one line: cxx17 <level> <verdict> slots=<n>.
#include <pnmem/engine/admit.hpp>
#include <pnmem/engine/backpressure_gate.hpp>
#include <pnmem/engine/fleet_load.hpp>
#include <pnmem/engine/host_ledger.hpp>
#include <pnmem/engine/metrics.hpp>
#include <pnmem/linux/linux_sampler.hpp>
#include <pnmem/live_state.hpp>
#include <pnmem/pnmem.hpp>
#include <pnmem/watcher.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#if __cplusplus != 201703L
#error "this consumer is the C++17 one: compile it with -std=c++17"
#endif

namespace {

// What C++17 gets in place of C++20's concepts and defaulted comparisons (detail/cxx.hpp).
static_assert(pnmem::host_sampler<pnmem::linux_sampler> && pnmem::event_sampler<pnmem::linux_sampler>);
static_assert(!pnmem::host_sampler<int>);
static_assert(pnmem::seqlock_shaped_layout<pnmem::mem_state_live_layout, pnmem::mem_state>);
static_assert(pnmem::seed_model_cost == pnmem::seed_model_cost);
static_assert(pnmem::preallocated_model_cost != pnmem::seed_model_cost);
static_assert(pnmem::default_policy == pnmem::policy{});
static_assert(pnmem::ladder_plan_for(pnmem::mem_level::tight, pnmem::ladder_config{8, 4096, false}).max_slots == 4);

}  // namespace

int main() {
  pnmem::watcher<pnmem::linux_sampler> w{pnmem::linux_sampler{}};
  if (!w.start()) {
    std::fprintf(stderr, "cxx17: the watcher's thread did not start\n");
    return 1;
  }

  // Lock-free reads of the published snapshot: whole, and its live part.
  const pnmem::mem_state s = w.read();
  pnmem::mem_state live = w.read_live();
  w.read_live(live);
  if (live.level != s.level && w.read().seq == s.seq) {
    std::fprintf(stderr, "cxx17: the live part of one publication has another level\n");
    return 1;
  }

  // The decision headers: a 4096-token prompt of the seed's model on the host path, and the ladder.
  pnmem::request_spec rq;
  rq.n_prompt = 4096;
  rq.kv = pnmem::seed_model_cost.normal_kv;
  const pnmem::admit_result r = pnmem::admit_request(pnmem::seed_model_cost, rq, s, pnmem::default_policy);
  const pnmem::ladder_plan plan = pnmem::ladder_plan_from_state(s, pnmem::ladder_config{8, 4096, false});

  // The engine layer: admit through the watcher's kept live snapshot, a gate, a ledger.
  pnmem::model_desc m;
  m.max_window = 8192;
  m.max_slots = 8;
  const pnmem::admit_answer a = pnmem::admit(w, m, 4096);
  pnmem::backpressure_gate gate{8};
  const pnmem::gate_connection conn = gate.connect(w);
  pnmem::gate_result slot = gate.acquire_for(std::chrono::milliseconds(1));
  if (a.status == pnmem::admit_status::fail_open || slot.status == pnmem::gate_status::cancelled) {
    std::fprintf(stderr, "cxx17: admit failed open on a running watcher, or a gate acquire was cancelled\n");
    return 1;
  }
  // GET /metrics, with the model-server protocol's gauges for a fleet router.
  const pnmem::fleet_load load = pnmem::gate_load(gate);
  const std::string body = pnmem::prometheus_text(w.read(), nullptr, &load);
  const std::string running = "\npnmem_running_requests " + std::to_string(slot ? 1 : 0) + "\n";
  if (body.find(running) == std::string::npos) {
    std::fprintf(stderr, "cxx17: the metrics lack%s", running.c_str());
    return 1;
  }
  slot.slot.release();
  pnmem::host_ledger ledger;
  pnmem::host_ledger::admission held = ledger.admit(w, m, 1024);
  held.held.settle();

  w.stop();
  const auto level = pnmem::to_string(s.level);
  const auto verdict = pnmem::to_string(r.verdict);
  std::printf("cxx17 %.*s %.*s slots=%d\n", static_cast<int>(level.size()), level.data(),
              static_cast<int>(verdict.size()), verdict.data(), plan.max_slots);
  return 0;
}
