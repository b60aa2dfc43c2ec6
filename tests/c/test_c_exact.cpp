// The C ABI's answers are the C++ library's, to the byte: pnmem_admit with a pnmem_model
// from pnmem_model_init (the seed's model) and from pnmem_model_cost_from_json, against
// pnmem::admit_snapshot on the same snapshot with a model_desc built here in C++ (the seed
// model, or the cost read by the C++ reader from the same JSON); pnmem_policy_get against
// policy_from_env; pnmem_host_budget and pnmem_reserve_bytes' CAP against the reserve
// formula and admit_host_bytes; and the seed model's answers computed by hand.
//
// The snapshot is held still: the watcher polls once an hour (pnmem_watcher_start_with),
// and each comparison is kept only when the snapshot's seq did not move across it (an
// event-driven sample on a busy box may still come; the comparison is then retaken).
// The environment is test_c_api.c's (host reserve 1 byte, PSI full reject at 100 %), and
// die 0 is fed with 1 GiB free: a host-path request on die 0 is bounded by exactly 1 GiB
// wherever the box has more than 1 GiB available.
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "pnmem/config.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/admit_after_eviction.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "c_check.h"
#include "pnmem/pnmem_c.h"

namespace pnmem {
// The snapshot read through the C ABI as a watcher for the C++ admission.
struct c_abi_test_view {
  mem_state s;
  bool running() const { return true; }
  mem_state read() const { return s; }
};
}  // namespace pnmem

namespace {

constexpr std::uint64_t gib = 1024ULL * 1024 * 1024;

// A Llama-3-8B-shaped model (32 layers x 8 KV heads x 128 dims, hidden 4096, 32 query heads):
// 2 x 32 x 8 x 128 x 2 B = 131072 B per token in f16; q8_0: 2 x 32 x 32 blocks x 34 B; q4_0: x 18 B;
// q4: ceil(65536 values x 5898 / 10240). Activation: 256 MiB + 4096 x 4 x 8 B x N + 32 x 4 B x N^2.
constexpr std::string_view llama_json = R"({"format": "pnmem-model", "version": 1, "name": "Llama-3-8B",
  "kv_bytes_per_token": {"full": {"q4": 37748, "fp32": 262144, "f16": 131072, "bf16": 131072, "fp8": 65536,
                                  "q8_0": 69632, "q4_0": 36864}},
  "normal_kv": "f16", "compact_kv": "q4_0",
  "activation": {"fixed_bytes": "256MiB", "per_token_bytes": 131072, "per_token_sq_bytes": 128}})";

// Sliding-window layers, per-sequence state and an anchor table of its own.
constexpr std::string_view sliding_json = R"({"format": "pnmem-model", "version": 1, "name": "sliding",
  "kv_bytes_per_token": {"full": {"q4": 3000, "fp32": 20000, "f16": 10000, "bf16": 10000, "fp8": 5000,
                                  "q8_0": 5400, "q4_0": 2900},
                         "sliding": {"q4": 15000, "fp32": 100000, "f16": 50000, "bf16": 50000, "fp8": 25000,
                                     "q8_0": 27000, "q4_0": 14500}},
  "sliding_window": 4096, "state_bytes_per_seq": "3MiB", "normal_kv": "bf16", "compact_kv": "fp8",
  "activation": {"anchors": [[0, "100MiB"], [2048, "300MiB"], [8192, "900MiB"], [32768, "5GiB"]]}})";

// Several windows (a sliding and a chunked term), KV in 544-token blocks (vLLM's for Qwen3-Next), per-image
// KV and a recurrent state: the fields version 2 of pnmem_model added.
constexpr std::string_view groups_json = R"({"format": "pnmem-model", "version": 2, "name": "groups",
  "kv_bytes_per_token": {"full": {"q4": 1000, "fp32": 8000, "f16": 4000, "bf16": 4000, "fp8": 2000,
                                  "q8_0": 2200, "q4_0": 1200},
                         "windows": [
                           {"window": 1024, "bytes_per_token": {"q4": 3000, "fp32": 20000, "f16": 10000, "bf16": 10000,
                                                                "fp8": 5000, "q8_0": 5400, "q4_0": 2900}},
                           {"window": 9248, "bytes_per_token": {"q4": 7000, "fp32": 40000, "f16": 20000, "bf16": 20000,
                                                                "fp8": 10000, "q8_0": 10800, "q4_0": 5800}}]},
  "kv_block_tokens": 544, "kv_bytes_per_encoder_item": "200MiB",
  "state_bytes_per_seq": "38MiB", "normal_kv": "bf16", "compact_kv": "q4_0",
  "activation": {"anchors": [[0, "100MiB"], [2048, "300MiB"], [8192, "900MiB"], [32768, "5GiB"]]}})";

// An engine that preallocated its KV and compute buffers: a request costs the host nothing more.
constexpr std::string_view prealloc_json = R"({"format": "pnmem-model", "version": 1,
  "kv_bytes_per_token": 0, "activation": {"fixed_bytes": 0}})";

pnmem::mem_state from_c(const pnmem_state& c) {
  pnmem::mem_state s;
  s.host_total_bytes = c.host_total_bytes;
  s.host_avail_bytes = c.host_avail_bytes;
  s.host_psi_some_avg10 = c.host_psi_some_avg10;
  s.host_psi_full_avg10 = c.host_psi_full_avg10;
  s.host_psi_some_rate = c.host_psi_some_rate;
  s.host_psi_full_rate = c.host_psi_full_rate;
  s.cgroup_current_bytes = c.cgroup_current_bytes;
  s.cgroup_high_bytes = c.cgroup_high_bytes;
  s.cgroup_max_bytes = c.cgroup_max_bytes;
  s.n_dies = c.n_dies;
  for (int i = 0; i < PNMEM_MAX_DIES; ++i) {
    const auto k = static_cast<std::size_t>(i);
    s.per_die_free_bytes[k] = c.per_die_free[i];
    s.per_die_budget_bytes[k] = c.per_die_budget[i];
    s.per_die_used_bytes[k] = c.per_die_used[i];
    s.per_die_retiring_bytes[k] = c.per_die_retiring[i];
  }
  s.level = static_cast<pnmem::mem_level>(c.level);
  s.raw_level = static_cast<pnmem::mem_level>(c.raw_level);
  s.seq = c.seq;
  s.sample_time_ns = c.sample_time_ns;
  return s;
}

pnmem::model_cost cost_of(std::string_view json) {
  const auto r = pnmem::model_files::read_model_json(json);
  if (!r.value) {
    std::fprintf(stderr, "C++ reader refused a test description: %s\n", r.error.c_str());
    std::exit(1);
  }
  return r.value->cost;
}

// The C model's cost fields equal the C++ cost, field by field.
bool same_cost(const pnmem_model& c, const pnmem::model_cost& m) {
  // The first window is version 1's sliding term, the others more_windows.
  const pnmem::kv_window none{};
  const pnmem::kv_window& first = m.n_windows > 0 ? m.windows[0] : none;
  bool same = c.sliding_window == first.window && c.n_more_windows + (m.n_windows > 0 ? 1 : 0) == m.n_windows &&
              c.kv_block_tokens == m.kv_block_tokens && c.state_bytes_per_seq == m.state_bytes_per_seq &&
              static_cast<int>(c.normal_kv) == static_cast<int>(m.normal_kv) &&
              static_cast<int>(c.compact_kv) == static_cast<int>(m.compact_kv) &&
              c.n_anchors == m.activation.n_anchors && c.activation_fixed_bytes == m.activation.fixed_bytes &&
              c.activation_per_token_bytes == m.activation.per_token_bytes &&
              c.activation_per_token_sq_bytes == m.activation.per_token_sq_bytes;
  for (std::size_t f = 0; f < pnmem::kv_format_count; ++f) {
    same = same && c.full_kv_bytes_per_token[f] == m.full_kv_bytes_per_token[f] &&
           c.sliding_kv_bytes_per_token[f] == first.bytes_per_token[f] &&
           c.kv_bytes_per_encoder_item[f] == m.kv_bytes_per_encoder_item[f];
    for (std::uint32_t w = 0; w < c.n_more_windows && w + 1 < pnmem::max_kv_windows; ++w) {
      same = same && c.more_windows[w].window == m.windows[w + 1].window &&
             c.more_windows[w].bytes_per_token[f] == m.windows[w + 1].bytes_per_token[f];
    }
  }
  for (std::size_t i = 0; i < pnmem::max_activation_anchors; ++i) {
    same = same && c.anchors[i].tokens == m.activation.anchors[i].tokens &&
           c.anchors[i].peak_bytes == m.activation.anchors[i].peak_bytes;
  }
  return same;
}

struct compared {
  pnmem_admit_answer c{};
  pnmem::admit_answer cxx{};
  pnmem_state snap{};
};

// pnmem_admit and admit_snapshot on one snapshot (retaken while the snapshot moves).
compared admit_both(const pnmem_model& cm, const pnmem::model_desc& m, int n, const pnmem::policy& p) {
  compared out;
  for (int attempt = 0; attempt < 100; ++attempt) {
    pnmem_state before{};
    pnmem_state after{};
    CHECK(pnmem_read(&before) == 0);
    CHECK(pnmem_admit(&cm, n, &out.c) == 0);
    CHECK(pnmem_read(&after) == 0);
    if (before.seq != after.seq) continue;
    pnmem::admit_options o;
    o.policy = p;
    out.cxx = pnmem::admit_snapshot(from_c(before), m, n, o);
    out.snap = before;
    return out;
  }
  std::fprintf(stderr, "the snapshot moved on 100 attempts in a row\n");
  ++failures;
  return out;
}

int compare_all(const char* name, const pnmem_model& cm, const pnmem::model_desc& m, const pnmem::policy& p) {
  static const int prompts[] = {-1, 0, 1, 100, 1023, 1024, 1025, 2473, 2474, 2690, 2691, 4095, 4096, 4097,
                                5000, 8192, 20000, 65536, 131072, 1 << 20};
  int compared_count = 0;
  for (int n : prompts) {
    const compared r = admit_both(cm, m, n, p);
    const pnmem_admit_answer& c = r.c;
    const pnmem::admit_answer& x = r.cxx;
    const bool same = static_cast<int>(c.status) == static_cast<int>(x.status) && c.fit_tokens == x.fit_tokens &&
                      c.reason != nullptr && pnmem::to_string(x.reason) == c.reason &&
                      static_cast<int>(c.level) == static_cast<int>(x.level) && c.die == x.die &&
                      c.window == x.window && c.need_bytes == x.detail.need_bytes &&
                      c.limit_bytes == x.detail.limit_bytes && c.pending_bytes == 0;
    if (!same) {
      std::fprintf(stderr,
                   "%s, %d tokens: C %d fit %d %s need %" PRIu64 " limit %" PRIu64 " die %d window %d; "
                   "C++ %d fit %d %s need %" PRIu64 " limit %" PRIu64 " die %d window %d\n",
                   name, n, static_cast<int>(c.status), c.fit_tokens, c.reason != nullptr ? c.reason : "(null)",
                   c.need_bytes, c.limit_bytes, c.die, c.window, static_cast<int>(x.status), x.fit_tokens,
                   std::string(pnmem::to_string(x.reason)).c_str(), x.detail.need_bytes, x.detail.limit_bytes, x.die,
                   x.window);
    }
    CHECK(same);
    ++compared_count;
  }
  return compared_count;
}

// pnmem_admit_model_load, pnmem_admit_model_load_die and pnmem_admit_load_spike against
// admission.hpp's admit_model_load, admit_model_load_die and admit_load_spike on one snapshot
// (retaken while the snapshot moves). Returns the C answers of the whole-model check.
bool same_load_answer(const char* what, const pnmem_admit_answer& c, const pnmem::admit_result& x,
                      const pnmem_state& snap) {
  const int status = x.verdict == pnmem::verdict::admit ? PNMEM_ADMITTED
                     : x.verdict == pnmem::verdict::cap ? PNMEM_CAPPED
                                                         : PNMEM_DENIED;
  const bool same = static_cast<int>(c.status) == status && c.fit_tokens == 0 && c.reason != nullptr &&
                    pnmem::to_string(x.reason) == c.reason && c.level == snap.level && c.die == x.die &&
                    c.window == 0 && c.need_bytes == x.need_bytes && c.limit_bytes == x.limit_bytes &&
                    c.pending_bytes == 0;
  if (!same) {
    std::fprintf(stderr, "%s: C %d %s need %" PRIu64 " limit %" PRIu64 " die %d; C++ %d %s need %" PRIu64
                         " limit %" PRIu64 " die %d\n",
                 what, static_cast<int>(c.status), c.reason != nullptr ? c.reason : "(null)", c.need_bytes,
                 c.limit_bytes, c.die, status, std::string(pnmem::to_string(x.reason)).c_str(), x.need_bytes,
                 x.limit_bytes, x.die);
  }
  return same;
}

struct load_answers {
  pnmem_admit_answer whole{};
  pnmem_admit_answer slice{};
};

load_answers compare_load(std::uint64_t weights, std::uint64_t kv, int die, const pnmem::policy& p) {
  pnmem_model_load l;
  CHECK(pnmem_model_load_init(&l) == 0);
  l.weights_bytes = weights;
  l.kv_bytes = kv;
  l.die = die;
  load_answers out;
  for (int attempt = 0; attempt < 100; ++attempt) {
    pnmem_state before{};
    pnmem_state after{};
    CHECK(pnmem_read(&before) == 0);
    CHECK(pnmem_admit_model_load(&l, &out.whole) == 0);
    CHECK(pnmem_admit_model_load_die(&l, &out.slice) == 0);
    CHECK(pnmem_read(&after) == 0);
    if (before.seq != after.seq) continue;
    const pnmem::mem_state s = from_c(before);
    CHECK(same_load_answer("model load", out.whole, pnmem::admit_model_load({weights, kv}, s, die, p), before));
    CHECK(same_load_answer("model load die", out.slice, pnmem::admit_model_load_die(weights, kv, s, die, p), before));
    return out;
  }
  std::fprintf(stderr, "the snapshot moved on 100 attempts in a row\n");
  ++failures;
  return out;
}

pnmem_model c_model(pnmem_kv_format kv, int gpu_resident, int max_window, int die) {
  pnmem_model m;
  CHECK(pnmem_model_init_reference(&m) == 0);
  m.kv = kv;
  m.gpu_resident = gpu_resident;
  m.max_window = max_window;
  m.die = die;
  m.max_slots = 8;
  return m;
}

pnmem::model_desc cxx_model(pnmem::kv_format kv, bool gpu_resident, int max_window, int die,
                            const pnmem::model_cost& cost) {
  pnmem::model_desc m;
  m.kv = kv;
  m.gpu_resident = gpu_resident;
  m.max_window = max_window;
  m.die = die;
  m.max_slots = 8;
  m.cost = cost;
  return m;
}

pnmem_model from_json(std::string_view json, pnmem_kv_format kv, int gpu_resident, int max_window, int die) {
  pnmem_model m = c_model(kv, gpu_resident, max_window, die);
  char err[256];
  CHECK(pnmem_model_cost_from_json(json.data(), json.size(), &m, err, sizeof err) == 0);
  CHECK(err[0] == '\0');
  // The request fields are the caller's: left as they were.
  CHECK(m.kv == kv && m.gpu_resident == gpu_resident && m.max_window == max_window && m.die == die && m.max_slots == 8);
  CHECK(m.struct_size == sizeof m);
  return m;
}

}  // namespace

int main() {
  CHECK(setenv("PN_HOST_RESERVE_BYTES", "1", 1) == 0);
  CHECK(setenv("PN_PSI_FULL_REJECT", "100", 1) == 0);
  CHECK(unsetenv("PN_LADDER_DISABLE") == 0);
  // The watcher's options come from the environment too (pnmem_watcher_options_init's defaults).
  CHECK(setenv("PN_PRESSURE_POLL_MS", "90", 1) == 0);
  CHECK(setenv("PN_STEP_DOWN_DWELL_MS", "0", 1) == 0);
  const pnmem::env_config env = pnmem::policy_from_env();
  CHECK(env.ok());
  const pnmem::policy& p = env.value;

  pnmem_watcher_options o;
  CHECK(pnmem_watcher_options_init(&o) == 0);
  CHECK(o.pressure_poll_interval_ms == 90);  // PN_PRESSURE_POLL_MS, not the seed's 100
  CHECK(o.poll_interval_ms == 250);          // unset: the seed's
  o.poll_interval_ms = 3600 * 1000;
  o.pressure_poll_interval_ms = 3600 * 1000;
  if (pnmem_watcher_start_with(&o) != 0) {
    std::printf("NOTE: the watcher did not start here: nothing is compared\n");
    return 77;
  }
  CHECK(pnmem_set_die(0, gib, 16 * gib, 0, 0) == 0);  // 1 GiB free of 16: WATCH
  CHECK(pnmem_set_die(1, 1024 * gib, 1024 * gib, 0, 0) == 0);  // roomy: a host-path request on it is host-bound

  // --- The policy in force: policy_from_env's, and the reserve for the snapshot's MemTotal.
  pnmem_policy cp{};
  pnmem_state snap{};
  CHECK(pnmem_policy_get(&cp) == 0);
  CHECK(pnmem_read(&snap) == 0);
  CHECK(cp.host_reserve_min_bytes == p.host_reserve_min_bytes && cp.host_reserve_min_bytes == 1);
  CHECK(cp.host_reserve_bp == p.host_reserve_bp && cp.host_reserve_bp == 0);
  CHECK(cp.psi_full_reject_bp == p.psi_full_reject_bp && cp.psi_full_reject_bp == 10000);
  CHECK(cp.psi_some_tight_bp == p.psi_some_tight_bp);
  CHECK(cp.psi_full_window_ms == p.psi_full_window_ms);
  CHECK(cp.die_tight_divisor == p.die_tight_divisor && cp.die_watch_divisor == p.die_watch_divisor);
  CHECK(cp.die_reserve_bytes == p.die_reserve_bytes && cp.die_scratch_bytes == p.die_scratch_bytes);
  CHECK(cp.load_spike_bytes == p.load_spike_bytes && cp.ladder_disabled == p.ladder_disabled);
  CHECK(cp.host_total_bytes == snap.host_total_bytes && cp.host_total_bytes > 0);
  CHECK(cp.host_reserve_bytes == pnmem::host_reserve_bytes(from_c(snap), p));
  CHECK(cp.host_reserve_bytes == 1);

  // --- The seed's model: pnmem_model_init's defaults give the C++ default model_desc's answers.
  const pnmem::model_cost seed = pnmem::seed_model_cost;
  int n = 0;
  n += compare_all("seed q4 host die 0", c_model(PNMEM_KV_Q4, 0, 0, 0), cxx_model(pnmem::kv_format::q4, false, 0, 0, seed), p);
  n += compare_all("seed fp32 host die 0", c_model(PNMEM_KV_FP32, 0, 0, 0),
                   cxx_model(pnmem::kv_format::fp32, false, 0, 0, seed), p);
  n += compare_all("seed fp32 host die 1", c_model(PNMEM_KV_FP32, 0, 0, 1),
                   cxx_model(pnmem::kv_format::fp32, false, 0, 1, seed), p);
  n += compare_all("seed fp32 host tightest", c_model(PNMEM_KV_FP32, 0, 16384, -1),
                   cxx_model(pnmem::kv_format::fp32, false, 16384, -1, seed), p);
  n += compare_all("seed q4 gpu window", c_model(PNMEM_KV_Q4, 1, 16384, -1),
                   cxx_model(pnmem::kv_format::q4, true, 16384, -1, seed), p);
  {
    pnmem_model d;
    CHECK(pnmem_model_init_reference(&d) == 0);
    n += compare_all("pnmem_model_init as is", d, pnmem::model_desc{}, p);
  }

  // --- Models from JSON: the C reader's model gives the answers of the C++ cost read from the same text.
  struct json_case {
    const char* name;
    std::string_view json;
    pnmem_kv_format kv;
    pnmem::kv_format cxx_kv;
  };
  const json_case cases[] = {
      {"llama f16", llama_json, PNMEM_KV_F16, pnmem::kv_format::f16},
      {"llama q8_0", llama_json, PNMEM_KV_Q8_0, pnmem::kv_format::q8_0},
      {"sliding bf16", sliding_json, PNMEM_KV_BF16, pnmem::kv_format::bf16},
      {"sliding fp8", sliding_json, PNMEM_KV_FP8, pnmem::kv_format::fp8},
      {"preallocated", prealloc_json, PNMEM_KV_F16, pnmem::kv_format::f16},
      {"groups bf16", groups_json, PNMEM_KV_BF16, pnmem::kv_format::bf16},
      {"groups q4_0", groups_json, PNMEM_KV_Q4_0, pnmem::kv_format::q4_0},
  };
  for (const json_case& jc : cases) {
    const pnmem::model_cost cost = cost_of(jc.json);
    for (const int die : {0, 1, -1}) {
      for (const int window : {0, 8192}) {
        const pnmem_model cm = from_json(jc.json, jc.kv, 0, window, die);
        CHECK(same_cost(cm, cost));
        n += compare_all(jc.name, cm, cxx_model(jc.cxx_kv, false, window, die, cost), p);
      }
    }
  }
  {
    // The Llama shape's figures, as the description states them.
    const pnmem_model llama = from_json(llama_json, PNMEM_KV_F16, 0, 0, 0);
    CHECK(llama.full_kv_bytes_per_token[PNMEM_KV_F16] == 131072);
    CHECK(llama.normal_kv == PNMEM_KV_F16 && llama.compact_kv == PNMEM_KV_Q4_0);
    CHECK(llama.n_anchors == 0 && llama.activation_fixed_bytes == 256ULL << 20);
  }
  std::printf("compared %d answers with the C++ library's\n", n);

  // --- The seed model's answers by hand, where die 0's 1 GiB binds (the host has more above
  // its 1-byte reserve). Between the anchors (1024, 384 MiB) and (4096, 1.5 GiB) the activation
  // rises 393216 B per token exactly, and 384 MiB = 393216 x 1024, so
  //   q4:   cost(n) = 5898 n + 393216 n = 399114 n: the largest n within 1 GiB is 2690
  //         (1073616660 B; 2691 would be 1074015774 B), and 4096 tokens need 1634770944 B;
  //   fp32: cost(n) = 434176 n: 2473 (1073717248 B; 2474: 1074151424 B), 4096 need 1778384896 B.
  CHECK(pnmem_read(&snap) == 0);
  if (snap.host_avail_bytes <= gib + 1 || snap.host_psi_full_avg10 >= 100.0 || snap.host_psi_full_rate >= 100.0) {
    std::printf("NOTE: not checked: the box has %" PRIu64 " B available (PSI full %.2f %%): the seed's answers by "
                "hand need more than 1 GiB and no full stall\n",
                snap.host_avail_bytes, snap.host_psi_full_avg10);
  } else {
    struct by_hand {
      pnmem_kv_format kv;
      int n;
      pnmem_admit_status status;
      int fit;
      const char* reason;
      std::uint64_t need;
    };
    const by_hand want[] = {
        {PNMEM_KV_Q4, 4096, PNMEM_CAPPED, 2690, "die_vram", 1634770944},
        {PNMEM_KV_Q4, 2691, PNMEM_CAPPED, 2690, "die_vram", 1074015774},
        {PNMEM_KV_Q4, 2690, PNMEM_ADMITTED, 2690, "fits", 1073616660},
        {PNMEM_KV_FP32, 4096, PNMEM_CAPPED, 2473, "die_vram", 1778384896},
        {PNMEM_KV_FP32, 2474, PNMEM_CAPPED, 2473, "die_vram", 1074151424},
        {PNMEM_KV_FP32, 2473, PNMEM_ADMITTED, 2473, "fits", 1073717248},
    };
    for (const by_hand& w : want) {
      pnmem_model m;
      CHECK(pnmem_model_init_reference(&m) == 0);
      m.kv = w.kv;
      m.die = 0;
      pnmem_admit_answer a{};
      CHECK(pnmem_admit(&m, w.n, &a) == 0);
      CHECK(a.status == w.status);
      CHECK(a.fit_tokens == w.fit);
      CHECK(a.reason != nullptr && std::strcmp(a.reason, w.reason) == 0);
      CHECK(a.need_bytes == w.need);
      CHECK(a.limit_bytes == gib);
      CHECK(a.die == 0);
    }
    // pnmem_explain of the fp32 CAP, exactly.
    pnmem_model m;
    CHECK(pnmem_model_init_reference(&m) == 0);
    m.kv = PNMEM_KV_FP32;
    m.die = 0;
    pnmem_admit_answer a{};
    CHECK(pnmem_admit(&m, 4096, &a) == 0);
    char want_line[256];
    std::snprintf(want_line, sizeof want_line,
                  "capped (die_vram): 2473 tokens fit: the prompt needs 1.66 GiB (1778384896 B), die 0 has 1.00 GiB "
                  "(1073741824 B) free, level %s",
                  pnmem_level_name(a.level));
    char line[256];
    const int len = pnmem_explain(&a, line, sizeof line);
    CHECK(std::strcmp(line, want_line) == 0);
    CHECK(len == static_cast<int>(std::strlen(want_line)));
    if (std::strcmp(line, want_line) != 0) std::fprintf(stderr, "  got  \"%s\"\n  want \"%s\"\n", line, want_line);
  }

  // --- Model loads: the C answers are admission.hpp's on the same snapshot; by hand where die 0
  // (1 GiB free of 16) and die 1 (1024 GiB free) decide. Whole model: weights + KV + the 1.5 GiB
  // die scratch within free - the 1 GiB die reserve (1023 GiB on die 1, 0 on die 0), equality fitting;
  // a slice within the same (a slice keeps the die reserve a whole load keeps; the seed's slice did not).
  // Die -1 picks die 1, the roomiest, for a whole load; a slice must name its die.
  CHECK(p.die_reserve_bytes == gib && p.die_scratch_bytes == 3 * gib / 2);
  {
    struct load_case {
      std::uint64_t weights;
      std::uint64_t kv;
      int die;
      pnmem_admit_status whole;
      const char* whole_reason;
      pnmem_admit_status slice;
      const char* slice_reason;
    };
    const load_case load_cases[] = {
        {16 * gib, 2 * gib, -1, PNMEM_ADMITTED, "fits", PNMEM_DENIED, "bad_request"},
        {16 * gib, 2 * gib, 1, PNMEM_ADMITTED, "fits", PNMEM_ADMITTED, "fits"},
        {16 * gib, 2 * gib, 0, PNMEM_DENIED, "die_vram", PNMEM_DENIED, "die_vram"},
        {0, 0, 0, PNMEM_DENIED, "die_vram", PNMEM_DENIED, "die_vram"},            // the scratch alone: 1.5 > 1 GiB
        {0, 0, 2, PNMEM_DENIED, "bad_request", PNMEM_DENIED, "bad_request"},      // die 2 was never fed
        {1000 * gib, 43 * gib / 2, 1, PNMEM_ADMITTED, "fits", PNMEM_ADMITTED, "fits"},  // need 1023 GiB: whole at its limit
        {1000 * gib, 43 * gib / 2 + 1, 1, PNMEM_DENIED, "die_vram", PNMEM_DENIED, "die_vram"},  // one byte over
        {1000 * gib, 45 * gib / 2, 1, PNMEM_DENIED, "die_vram", PNMEM_DENIED, "die_vram"},  // need 1024 GiB: no reserve left
        {UINT64_MAX, UINT64_MAX, -1, PNMEM_DENIED, "die_vram", PNMEM_DENIED, "bad_request"},  // saturates, never wraps
    };
    for (const load_case& lc : load_cases) {
      const load_answers a = compare_load(lc.weights, lc.kv, lc.die, p);
      CHECK(a.whole.status == lc.whole);
      CHECK(a.whole.reason != nullptr && std::strcmp(a.whole.reason, lc.whole_reason) == 0);
      CHECK(a.slice.status == lc.slice);
      CHECK(a.slice.reason != nullptr && std::strcmp(a.slice.reason, lc.slice_reason) == 0);
    }
    const load_answers roomiest = compare_load(16 * gib, 2 * gib, -1, p);
    CHECK(roomiest.whole.die == 1);
    CHECK(roomiest.whole.need_bytes == 39 * gib / 2 && roomiest.whole.limit_bytes == 1023 * gib);
    char line[256];
    CHECK(pnmem_explain(&roomiest.whole, line, sizeof line) > 0);
    char want_line[256];
    std::snprintf(want_line, sizeof want_line,
                  "admitted (fits): the load (weights, KV at the longest context, scratch) needs 19.50 GiB "
                  "(20937965568 B), die 1 has 1023.00 GiB (1098437885952 B) free above its reserve, level %s",
                  pnmem_level_name(roomiest.whole.level));
    CHECK(std::strcmp(line, want_line) == 0);
    if (std::strcmp(line, want_line) != 0) std::fprintf(stderr, "  got  \"%s\"\n  want \"%s\"\n", line, want_line);
  }

  // --- The load spike: admit_load_spike on the same snapshot (the whole 2.4 GiB burst or nothing).
  {
    bool checked = false;
    for (int attempt = 0; attempt < 100 && !checked; ++attempt) {
      pnmem_state before{};
      pnmem_state after{};
      pnmem_admit_answer c{};
      CHECK(pnmem_read(&before) == 0);
      CHECK(pnmem_admit_load_spike(&c) == 0);
      CHECK(pnmem_read(&after) == 0);
      if (before.seq != after.seq) continue;
      checked = true;
      const pnmem::admit_result x = pnmem::admit_load_spike(from_c(before), p);
      CHECK(same_load_answer("load spike", c, x, before));
      CHECK(c.need_bytes == p.load_spike_bytes && c.status != PNMEM_CAPPED);
    }
    CHECK(checked);
  }

  // --- Rung 4a at KV init: pnmem_kv_allocation_for is kv_allocation_for, for the seed's model and
  // the models read from JSON, at every level's plan.
  {
    const pnmem_level c_levels[] = {PNMEM_LEVEL_OK, PNMEM_LEVEL_WATCH, PNMEM_LEVEL_TIGHT, PNMEM_LEVEL_CRITICAL};
    const std::string_view jsons[] = {llama_json, sliding_json, prealloc_json};
    int kv_compared = 0;
    for (const pnmem_level lv : c_levels) {
      const pnmem_ladder_plan cp_plan = pnmem_plan_ladder(lv, 8, 16384, false);
      const pnmem::ladder_plan plan = pnmem::ladder_plan_for(static_cast<pnmem::mem_level>(lv), {8, 16384, false}, p);
      for (const std::uint64_t tokens : {0ULL, 1ULL, 4095ULL, 4096ULL, 4097ULL, 100000ULL}) {
        pnmem_model seed_c;
        CHECK(pnmem_model_init_reference(&seed_c) == 0);
        pnmem_kv_allocation got{};
        CHECK(pnmem_kv_allocation_for(&cp_plan, &seed_c, tokens, &got) == 0);
        pnmem::kv_allocation want = pnmem::kv_allocation_for(plan, tokens);
        CHECK(static_cast<int>(got.format) == static_cast<int>(want.format));
        CHECK(got.bytes == want.bytes);
        ++kv_compared;
        for (const std::string_view json : jsons) {
          const pnmem_model m = from_json(json, PNMEM_KV_F16, 0, 0, -1);
          CHECK(pnmem_kv_allocation_for(&cp_plan, &m, tokens, &got) == 0);
          want = pnmem::kv_allocation_for(plan, cost_of(json), tokens);
          CHECK(static_cast<int>(got.format) == static_cast<int>(want.format));
          CHECK(got.bytes == want.bytes);
          ++kv_compared;
        }
      }
    }
    std::printf("compared %d KV allocations with the C++ library's\n", kv_compared);
  }

  // --- The host budget and a byte reservation's CAP: the reserve formula and admit_host_bytes.
  bool budget_checked = false;
  for (int attempt = 0; attempt < 100 && !budget_checked; ++attempt) {
    pnmem_state before{};
    pnmem_state after{};
    pnmem_budget b{};
    pnmem_admit_answer cap{};
    pnmem_reservation r = 77;
    CHECK(pnmem_read(&before) == 0);
    CHECK(pnmem_host_budget(&b) == 0);
    CHECK(pnmem_reserve_bytes(UINT64_MAX, 0, &cap, &r) == 0);
    CHECK(pnmem_read(&after) == 0);
    if (before.seq != after.seq) continue;
    budget_checked = true;
    const pnmem::mem_state s = from_c(before);
    const std::uint64_t reserve = pnmem::host_reserve_bytes(s, p);
    CHECK(b.total_bytes == s.host_total_bytes && b.avail_bytes == s.host_avail_bytes);
    CHECK(b.reserve_bytes == reserve);
    CHECK(b.headroom_bytes == (s.host_avail_bytes > reserve ? s.host_avail_bytes - reserve : 0));
    CHECK(b.pending_bytes == 0 && b.unpromised_bytes == b.headroom_bytes);
    CHECK(static_cast<int>(b.level) == static_cast<int>(s.level) && b.seq == s.seq);
    const pnmem::admit_result x = pnmem::admit_host_bytes(UINT64_MAX, s, p);
    CHECK(x.verdict == pnmem::verdict::cap);
    CHECK(cap.status == PNMEM_CAPPED && r == 0);
    CHECK(cap.limit_bytes == x.limit_bytes && cap.limit_bytes == b.unpromised_bytes);
    CHECK(cap.need_bytes == UINT64_MAX && cap.reason != nullptr && std::strcmp(cap.reason, "host_budget") == 0);
    // A reservation of half the headroom is promised: the budget and the next CAP see it.
    pnmem_admit_answer half{};
    CHECK(pnmem_reserve_bytes(b.headroom_bytes / 2, 0, &half, &r) == 0);
    CHECK(half.status == PNMEM_ADMITTED && r != 0 && half.pending_bytes == 0);
    pnmem_budget b2{};
    CHECK(pnmem_host_budget(&b2) == 0);
    pnmem_state again{};
    CHECK(pnmem_read(&again) == 0);
    pnmem_reservation none = 77;
    CHECK(pnmem_reserve_bytes(UINT64_MAX, 0, &cap, &none) == 0);
    CHECK(none == 0);
    pnmem_state last{};
    CHECK(pnmem_read(&last) == 0);
    if (again.seq == before.seq && last.seq == before.seq) {
      CHECK(b2.pending_bytes == b.headroom_bytes / 2);
      CHECK(b2.unpromised_bytes == b.headroom_bytes - b.headroom_bytes / 2);
      CHECK(cap.status == PNMEM_CAPPED && cap.pending_bytes == b.headroom_bytes / 2);
      CHECK(cap.limit_bytes == b2.unpromised_bytes);
    }
    pnmem_reservation_cancel(r);
    CHECK(pnmem_pending_bytes() == 0);
  }
  CHECK(budget_checked);

  // --- Rung 4b: pnmem_admit_after_eviction against the C++ admit_after_eviction on the same snapshot.
  // Die 0 at 512 MiB free of 16 GiB makes the box TIGHT (free below budget / 16): eviction is on. A
  // Llama-style model on die 1 (roomy) with a prompt past what the host has is capped by host memory;
  // four running slots of 2M tokens hold ~1 TiB of KV between them: evicting makes room.
  CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 0, 0) == 0);
  pnmem_model em;
  CHECK(pnmem_model_init_reference(&em) == 0);
  em.kv = PNMEM_KV_F16;
  em.normal_kv = PNMEM_KV_F16;
  em.die = 1;
  for (int f = 0; f < PNMEM_KV_FORMATS; ++f) em.full_kv_bytes_per_token[f] = 131072;
  em.n_anchors = 0;  // no activation: need = tokens x 128 KiB
  em.activation_fixed_bytes = 0;
  pnmem_request eq;
  CHECK(pnmem_request_init(&eq) == 0);
  const int running[] = {2000000, 2000000, 2000000, 1000};
  bool eviction_checked = false;
  for (int attempt = 0; attempt < 100 && !eviction_checked; ++attempt) {
    pnmem_state before{};
    CHECK(pnmem_read(&before) == 0);
    const pnmem::mem_state s = from_c(before);
    // A prompt 1.5x what is available above the 1-byte reserve, so it is capped by the host.
    eq.n_tokens = static_cast<int>(std::min<std::uint64_t>(s.host_avail_bytes / 131072 * 3 / 2, 100000000));
    pnmem_admit_answer a{};
    pnmem_eviction e{};
    pnmem_keep_answer keep[4]{};
    CHECK(pnmem_admit_after_eviction(&em, &eq, running, 4, nullptr, &a, &e, keep) == 0);
    pnmem_state after{};
    CHECK(pnmem_read(&after) == 0);
    if (before.seq != after.seq) continue;
    eviction_checked = true;
    CHECK(s.level >= pnmem::mem_level::tight);
    pnmem::model_desc md;
    md.kv = pnmem::kv_format::f16;
    md.die = 1;
    md.cost.full_kv_bytes_per_token.fill(131072);
    md.cost.normal_kv = pnmem::kv_format::f16;
    md.cost.activation = pnmem::activation_model{};
    pnmem::keep_budget_answer want_keep[4];
    const pnmem::admit_eviction_answer want = pnmem::admit_after_eviction(
        pnmem::c_abi_test_view{s}, md, eq.n_tokens, 0, running, 4, pnmem::admit_options{p}, want_keep);
    CHECK(a.status == PNMEM_CAPPED && std::strcmp(a.reason, "host_budget") == 0);
    CHECK(a.fit_tokens == want.answer.fit_tokens && a.need_bytes == want.answer.detail.need_bytes);
    CHECK(e.considered == 1 && e.after_eviction == 1 && e.enough == 1);
    CHECK(want.eviction.considered && want.eviction.after_eviction);
    CHECK(e.evict_bytes == want.eviction.evict_bytes);
    CHECK(e.evict_bytes == a.need_bytes + 1 - s.host_avail_bytes);  // need + reserve - available
    CHECK(e.freed_bytes == want.eviction.plan.freed_bytes && e.freed_bytes >= e.evict_bytes);
    CHECK(e.cut_to_tokens == want.eviction.plan.cut_to && e.slots_cut == 3);
    for (int i = 0; i < 4; ++i) {
      CHECK(keep[i].tokens == running[i]);
      CHECK(keep[i].keep_tokens == want_keep[i].keep_tokens && keep[i].freed_bytes == want_keep[i].freed_bytes);
    }
  }
  CHECK(eviction_checked);
  // A plan alone: 1 GiB from the same slots in f16, every slot longer than L cut to L.
  pnmem_eviction plan{};
  pnmem_keep_answer each[4]{};
  CHECK(pnmem_plan_eviction(&em, running, 4, gib, nullptr, each, &plan) == 0);
  // 8192 tokens over three slots: each gives 2731 (the 1000-token slot nothing), 8193 tokens in all.
  CHECK(plan.enough == 1 && plan.cut_to_tokens == 2000000 - 2731 && plan.slots_cut == 3);
  CHECK(plan.freed_bytes == 3ULL * 2731 * 131072 && plan.evict_bytes == gib);
  CHECK(each[3].keep_tokens == 1000 && each[3].freed_bytes == 0);

  pnmem_watcher_stop();
  if (failures == 0) std::printf("c api exact: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
