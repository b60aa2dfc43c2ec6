// examples/survival/workload.hpp - the engine the survival run puts in a memory cgroup.
//
// A CPU batched decoder like examples/batched_decoder.cpp, with a fixed burst
// schedule and really allocated host memory (mmap'd and touched, unmapped when
// done, so a free is visible to the cgroup at once):
//   prefill  the cost model's activation peak (transient) + KV for the prompt: fp32, or
//            (policy on) the format the ladder's rung 4a gives a cache allocated now
//            (kv_allocation_for: Q4 at WATCH or worse), in which admission prices it;
//   decode   one token per ~3 ms, KV grown 16 tokens at a time, in the cache's format.
// Policy off: every request starts at once on a free decode slot, as an engine
// without pnmem would. Policy on: the back-pressure gate (ladder rung 2 sets its
// capacity), pnmem::host_ledger admission (rung 3 clamps the window), a denied
// request held and retried until its patience runs out, then rejected with the
// reason. Every request ends with an "E" event line (events.hpp). Its ledger joins the box ledger
// PN_LEDGER names (pnmem/linux/box_ledger.hpp), so several workload processes in one cgroup count each
// other's promises; PN_LEDGER=off: each counts only its own.
#pragma once

#include <cstdint>
#include <string>

namespace survival {

struct workload_options {
  bool policy_on = true;
  bool use_ledger = true;    // policy on without the ledger: what admitting on stale snapshots does
  std::string events_path;  // event lines are appended here
  std::uint64_t seed = 7;
  int slots = 8;
  int bursts = 4;            // bursts of burst_size requests arriving together
  int burst_size = 8;
  int burst_gap_ms = 2500;
  int trickle_ms = 400;      // one request every trickle_ms between bursts
  int patience_ms = 4000;    // how long a denied request is held before it is rejected
  int min_prompt = 256;
  int max_prompt = 2560;
  int max_window = 4096;
  bool verbose = false;      // a log line per request on stdout
  std::int64_t t0_ns = 0;    // steady-clock time 0 of the event times (the supervisor's); 0 = now
  int id_base = 0;           // the first request's id (one of several processes: ids never collide)
  bool timeline = true;      // writes the level timeline (one process of several does)
};

// Runs the schedule to the end. 0 when every request ended; 1 on a setup error.
int run_workload(const workload_options& o);

}  // namespace survival
