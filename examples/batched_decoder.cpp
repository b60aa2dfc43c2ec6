// examples/batched_decoder.cpp - a CPU "batched decoder" that uses pnmem end to end.
//
// A producer thread feeds a request queue (prompts of varied lengths, some longer
// than the model's window); N decode-slot workers take requests and, for each:
//   1. pnmem::admit against the live watcher (the ladder's rung 3 clamps the
//      window, logged as "[ladder] ... (rung 3)"); a denial calls
//      gate.notify_pressure(level) and drops the request;
//   2. backpressure_gate::acquire (connected to the watcher) for a decode slot;
//      "overloaded" (CRITICAL) sheds the request;
//   3. prefill: really allocates and touches the activation peak (transient) and
//      the KV in host RAM, in the format the ladder's rung 4a gives a cache allocated
//      now (pnmem::kv_allocation_for): the seed model's fp32 (40 KiB/token) at OK,
//      its Q4 (5898 B/token) from WATCH up; admission prices the cache in that format;
//   4. decode: one token per ~3 ms, KV grown every 16 tokens (in the cache's own
//      format: a live cache is never converted); then frees all.
// Level changes arrive through watcher.subscribe; each applies the ladder's rung 2
// with gate.set_capacity. A summary (and --metrics: the Prometheus text) ends the run.
//
// Show admissions, caps, denials and ladder changes on an idle box: give the
// engine 1 GiB of headroom above the reserve (the reserve becomes MemAvailable - 1 GiB),
// so its own KV allocations push the box from TIGHT to CRITICAL and back:
//
//   build/examples/batched_decoder --headroom 1G --requests 40 --metrics
//
// (or PN_HOST_RESERVE_BYTES=<MemAvailable - 1 GiB> build/examples/batched_decoder).
// Memory stays bounded: the KV the example holds never exceeds --max-kv (default
// 2 GiB), nor the headroom + 1 GiB when --headroom is given: a request that
// would pass it stops decoding early ("kv-bound").
#include <pnmem/config.hpp>
#include <pnmem/engine/admit.hpp>
#include <pnmem/engine/backpressure_gate.hpp>
#include <pnmem/engine/counters.hpp>
#include <pnmem/engine/fleet_load.hpp>
#include <pnmem/engine/metrics.hpp>
#include <pnmem/ladder.hpp>
#include <pnmem/linux/linux_sampler.hpp>
#include <pnmem/watcher.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t MiB = 1024ULL * 1024ULL;
constexpr int kv_chunk_tokens = 16;

struct options {
  int requests = 40;
  int slots = 8;
  double duration_s = 10.0;
  std::uint64_t headroom = 0;  // 0 = policy from the environment as is
  std::uint64_t max_kv = 2048 * MiB;
  bool metrics = false;
};

struct request {
  int id = 0;
  int prompt = 0;
  int decode = 0;
};

std::mutex log_mu;
clock_type::time_point t0;

void logf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void logf(const char* fmt, ...) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count();
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(log_mu);
  std::printf("%6lldms %s\n", static_cast<long long>(ms), line);
  std::fflush(stdout);
}

unsigned long long mib(std::uint64_t b) { return static_cast<unsigned long long>(b / MiB); }

bool parse_bytes(const char* s, std::uint64_t& out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s) return false;
  std::uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1024, ++end;
  else if (*end == 'M' || *end == 'm') mul = MiB, ++end;
  else if (*end == 'G' || *end == 'g') mul = 1024 * MiB, ++end;
  if (*end != '\0') return false;
  out = static_cast<std::uint64_t>(v) * mul;
  return true;
}

bool parse_args(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--metrics") {
      o.metrics = true;
    } else if (a == "--requests" && has_value) {
      o.requests = std::atoi(argv[++i]);
    } else if (a == "--slots" && has_value) {
      o.slots = std::atoi(argv[++i]);
    } else if (a == "--duration-s" && has_value) {
      o.duration_s = std::atof(argv[++i]);
    } else if (a == "--headroom" && has_value) {
      if (!parse_bytes(argv[++i], o.headroom)) return false;
    } else if (a == "--max-kv" && has_value) {
      if (!parse_bytes(argv[++i], o.max_kv)) return false;
    } else {
      return false;
    }
  }
  return o.requests > 0 && o.slots > 0 && o.duration_s > 0.0;
}

// KV memory the example holds, bounded.
class kv_pool {
 public:
  explicit kv_pool(std::uint64_t limit) : limit_(limit) {}
  bool take(std::uint64_t b) {
    std::uint64_t cur = used_.load();
    do {
      if (cur + b > limit_) return false;
    } while (!used_.compare_exchange_weak(cur, cur + b));
    std::uint64_t pk = peak_.load();
    while (cur + b > pk && !peak_.compare_exchange_weak(pk, cur + b)) {
    }
    return true;
  }
  void give(std::uint64_t b) { used_.fetch_sub(b); }
  std::uint64_t used() const { return used_.load(); }
  std::uint64_t peak() const { return peak_.load(); }
  std::uint64_t limit() const { return limit_; }

 private:
  std::uint64_t limit_;
  std::atomic<std::uint64_t> used_{0};
  std::atomic<std::uint64_t> peak_{0};
};

// One request's KV cache: chunks of real, touched host memory, as many bytes as its format
// takes (the example computes nothing on the values: the bytes are what it simulates). Also
// the transient activation buffer (grow_bytes only).
class kv_cache {
 public:
  explicit kv_cache(kv_pool& pool, const pnmem::model_cost& cost = pnmem::seed_model_cost,
                    pnmem::kv_format format = pnmem::kv_format::fp32)
      : pool_(pool), cost_(cost), format_(format) {}
  ~kv_cache() { pool_.give(bytes_); }
  kv_cache(const kv_cache&) = delete;
  kv_cache& operator=(const kv_cache&) = delete;

  // `tokens` more tokens, in the format the cache was allocated in.
  bool grow(int tokens) {
    const std::uint64_t n = tokens_ + static_cast<std::uint64_t>(tokens);
    if (!grow_bytes(pnmem::kv_bytes(cost_, format_, n) - pnmem::kv_bytes(cost_, format_, tokens_))) return false;
    tokens_ = n;
    return true;
  }
  bool grow_bytes(std::uint64_t b) {
    if (!pool_.take(b)) return false;
    auto block = std::make_unique_for_overwrite<unsigned char[]>(static_cast<std::size_t>(b));
    for (std::size_t off = 0; off < b; off += 4096) block[off] = static_cast<unsigned char>(off >> 12);
    blocks_.push_back(std::move(block));
    bytes_ += b;
    return true;
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  kv_pool& pool_;
  const pnmem::model_cost& cost_;
  pnmem::kv_format format_;
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
  std::uint64_t bytes_ = 0;
  std::uint64_t tokens_ = 0;
};

struct tallies {
  std::atomic<int> admitted{0}, capped{0}, denied{0}, fail_open{0}, shed{0}, timed_out{0}, done{0}, kv_bound{0},
      unserved{0}, level_changes{0};
};

}  // namespace

int main(int argc, char** argv) {
  options opt;
  if (!parse_args(argc, argv, opt)) {
    std::fprintf(stderr,
                 "usage: %s [--requests N] [--slots N] [--duration-s S] [--headroom BYTES[K|M|G]]\n"
                 "          [--max-kv BYTES[K|M|G]] [--metrics]\n",
                 argv[0]);
    return 2;
  }
  t0 = clock_type::now();

  auto env = pnmem::policy_from_env();
  for (const auto& e : env.errors) logf("[config] %s", e.to_string().c_str());
  pnmem::policy policy = env.value;

  std::uint64_t kv_limit = opt.max_kv;
  if (opt.headroom > 0) {
    pnmem::linux_sampler probe;
    const pnmem::host_sample h = probe.sample();
    if (h.avail_bytes > opt.headroom) {
      policy.host_reserve_min_bytes = h.avail_bytes - opt.headroom;
      policy.host_reserve_bp = 0;
      kv_limit = std::min(kv_limit, opt.headroom + 1024 * MiB);
      logf("[setup] headroom %llu MiB: host reserve = MemAvailable %llu MiB - headroom = %llu MiB", mib(opt.headroom),
           mib(h.avail_bytes), mib(policy.host_reserve_min_bytes));
    } else {
      logf("[setup] headroom %llu MiB >= MemAvailable %llu MiB: policy unchanged", mib(opt.headroom),
           mib(h.avail_bytes));
    }
  }

  pnmem::engine_counters counters;
  pnmem::watcher_options wopt;
  wopt.policy = policy;
  pnmem::watcher<pnmem::linux_sampler> watcher{pnmem::linux_sampler{}, wopt};
  if (!watcher.start()) logf("[setup] watcher did not start: admission fails open");

  const pnmem::model_desc model{
      .kv = pnmem::kv_format::fp32, .gpu_resident = false, .max_window = 8192, .die = pnmem::no_die,
      .max_slots = opt.slots};
  const pnmem::ladder_config ladder_cfg{opt.slots, model.max_window, false};
  // Rung 4a at KV init: the format a cache allocated now must be in (the model's normal fp32,
  // or its compact Q4 once the ladder forces it); `compact` says the cache is already priced so.
  const auto kv_format_now = [&](bool compact) {
    pnmem::ladder_config cfg = ladder_cfg;
    cfg.kv_q4 = compact;
    return pnmem::kv_allocation_for(pnmem::ladder_plan_for(watcher.read().level, cfg, policy), model.cost, 0).format;
  };

  // Rung 2 is the gate's own: connected below, its slots follow the ladder at every sample.
  pnmem::backpressure_gate gate{{.max_slots = opt.slots,
                                 .max_waiters = static_cast<std::size_t>(opt.slots) * 4,
                                 .counters = &counters,
                                 .model = model.cost,
                                 .policy = policy}};
  tallies t;

  const auto apply_ladder = [&](pnmem::mem_level l) { return pnmem::ladder_plan_for(l, ladder_cfg, policy); };
  {
    const pnmem::mem_state s = watcher.read();
    const auto plan = apply_ladder(s.level);
    logf("[start] level %s avail %llu MiB reserve %llu MiB; slots %d, window %d, kv bound %llu MiB",
         std::string(pnmem::log_name(s.level)).c_str(), mib(s.host_avail_bytes),
         mib(pnmem::host_reserve_bytes(s, policy)), plan.max_slots, plan.prefill_window,
         mib(kv_limit));
  }

  const auto sub = watcher.subscribe([&](const pnmem::level_change& c) {
    counters.count_transition(c.from, c.to);
    t.level_changes.fetch_add(1);
    const auto plan = apply_ladder(c.to);
    logf("[level] %s -> %s (avail %llu MiB) ladder: slots %d window %d: %s",
         std::string(pnmem::log_name(c.from)).c_str(), std::string(pnmem::log_name(c.to)).c_str(),
         mib(c.state.host_avail_bytes), plan.max_slots, plan.prefill_window, plan.note);
  });
  auto conn = gate.connect(watcher);

  kv_pool pool{kv_limit};
  std::mutex q_mu;
  std::condition_variable_any q_cv;
  std::deque<request> queue;
  bool producer_done = false;

  std::stop_source stop;
  const auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                                 std::chrono::duration<double>(opt.duration_s));

  const pnmem::admit_options aopt{
      .policy = policy,
      .log =
          [](std::string_view line) {
            // The clamp line once per change, not once per request.
            static std::mutex mu;
            static std::string last;
            std::lock_guard<std::mutex> lk(mu);
            if (line == last) return;
            last = line;
            logf("%.*s", static_cast<int>(line.size()), line.data());
          },
      .counters = &counters};

  std::jthread producer([&](std::stop_token st) {
    std::mt19937 rng{42};
    std::uniform_int_distribution<int> short_len{64, 2500};
    std::uniform_int_distribution<int> long_len{5000, 14000};
    std::uniform_int_distribution<int> dec_len{64, 256};
    std::uniform_int_distribution<int> gap_ms{10, 60};
    for (int i = 0; i < opt.requests && !st.stop_requested(); ++i) {
      request r{i, i % 4 == 3 ? long_len(rng) : short_len(rng), dec_len(rng)};
      {
        std::lock_guard<std::mutex> lk(q_mu);
        queue.push_back(r);
      }
      q_cv.notify_one();
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms(rng)));
    }
    {
      std::lock_guard<std::mutex> lk(q_mu);
      producer_done = true;
    }
    q_cv.notify_all();
  });

  const auto worker = [&](std::stop_token st) {
    for (;;) {
      request r;
      {
        std::unique_lock<std::mutex> lk(q_mu);
        if (!q_cv.wait(lk, st, [&] { return !queue.empty() || producer_done; })) return;
        if (queue.empty()) return;
        r = queue.front();
        queue.pop_front();
      }
      // 1. Admission before prefill, of a cache in the format rung 4a gives one allocated now.
      pnmem::model_desc m = model;
      m.kv = kv_format_now(false);
      const pnmem::admit_answer a = pnmem::admit(watcher, m, r.prompt, aopt);
      switch (a.status) {
        case pnmem::admit_status::denied:
          t.denied.fetch_add(1);
          logf("[deny ] req %2d prompt %5d: %s at %s (need %llu MiB, limit %llu MiB)", r.id, r.prompt,
               std::string(pnmem::to_string(a.reason)).c_str(), std::string(pnmem::log_name(a.level)).c_str(),
               mib(a.detail.need_bytes), mib(a.detail.limit_bytes));
          gate.notify_denied(a);  // the hold re-checks it each sample
          continue;
        case pnmem::admit_status::capped:
          t.capped.fetch_add(1);
          logf("[cap  ] req %2d prompt %5d -> %5d: %s at %s", r.id, r.prompt, a.fit_tokens,
               std::string(pnmem::to_string(a.reason)).c_str(), std::string(pnmem::log_name(a.level)).c_str());
          break;
        case pnmem::admit_status::admitted:
          t.admitted.fetch_add(1);
          logf("[admit] req %2d prompt %5d at %s", r.id, r.prompt, std::string(pnmem::log_name(a.level)).c_str());
          break;
        case pnmem::admit_status::fail_open:
          t.fail_open.fetch_add(1);
          break;
      }
      // 2. A decode slot from the back-pressure gate.
      auto g = gate.acquire(std::min(deadline, clock_type::now() + 2s), st);
      if (!g) {
        if (g.status == pnmem::gate_status::overloaded) {
          t.shed.fetch_add(1);
          logf("[gate ] req %2d: overloaded, retry (shed)", r.id);
        } else {
          t.timed_out.fetch_add(1);
          logf("[gate ] req %2d: %s", r.id, std::string(pnmem::to_string(g.status)).c_str());
        }
        continue;
      }
      // 3. Prefill: a transient activation buffer (the cost model's peak) and the
      //    KV for the admitted prompt, in chunks; the activations go when prefill ends.
      //    The cache is allocated now: rung 4a is asked again (the gate may have held the
      //    request while the level moved); admitted compact, it stays compact, so it never
      //    takes more than admission priced.
      kv_cache kv{pool, model.cost, kv_format_now(pnmem::request_kv_format(m) == model.cost.compact_kv)};
      bool bounded = false;
      {
        kv_cache act{pool};
        bounded = !act.grow_bytes(pnmem::activation_peak_bytes(a.fit_tokens));
        std::this_thread::sleep_for(20ms);
      for (int done = 0; done < a.fit_tokens && !bounded; done += 512) {
        bounded = !kv.grow(std::min(512, a.fit_tokens - done));
      }
      }
      // 4. Decode: one token per ~2 ms, KV grown per chunk of tokens.
      int produced = 0;
      for (; produced < r.decode && !bounded && !st.stop_requested(); ++produced) {
        if (produced % kv_chunk_tokens == 0) bounded = !kv.grow(kv_chunk_tokens);
        std::this_thread::sleep_for(3ms);
      }
      if (bounded) {
        t.kv_bound.fetch_add(1);
        logf("[kv   ] req %2d: memory bound %llu MiB reached, stopped after %d tokens", r.id, mib(pool.limit()), produced);
      }
      t.done.fetch_add(1);
    }
  };

  std::vector<std::jthread> workers;
  workers.reserve(static_cast<std::size_t>(opt.slots));
  for (int i = 0; i < opt.slots; ++i) workers.emplace_back([&](std::stop_token) { worker(stop.get_token()); });

  // Bound the run: wait for the workers or the deadline.
  for (;;) {
    bool all_idle = false;
    {
      std::lock_guard<std::mutex> lk(q_mu);
      all_idle = producer_done && queue.empty();
    }
    if (all_idle || clock_type::now() >= deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  if (clock_type::now() >= deadline) {
    logf("[stop ] duration reached");
    producer.request_stop();
    stop.request_stop();
  }
  producer.join();
  for (auto& w : workers) w.join();
  {
    std::lock_guard<std::mutex> lk(q_mu);
    t.unserved.store(static_cast<int>(queue.size()));
  }

  conn = {};
  watcher.unsubscribe(sub);
  const pnmem::mem_state s = watcher.read();
  watcher.stop();

  const auto n = [](const std::atomic<std::uint64_t>& c) { return static_cast<unsigned long long>(c.load()); };
  std::printf("\n== summary (%.1f s) ==\n",
              std::chrono::duration<double>(clock_type::now() - t0).count());
  std::printf("requests %d: admitted %d, capped %d (window %llu, host_budget %llu), denied %d", opt.requests,
              t.admitted.load(), t.capped.load(), n(counters.capped[static_cast<std::size_t>(pnmem::admit_reason::window)]),
              n(counters.capped[static_cast<std::size_t>(pnmem::admit_reason::host_budget)]), t.denied.load());
  std::printf(" (host_reserve %llu, host_budget %llu, psi_stall %llu), fail_open %d\n",
              n(counters.denied[static_cast<std::size_t>(pnmem::admit_reason::host_reserve)]),
              n(counters.denied[static_cast<std::size_t>(pnmem::admit_reason::host_budget)]),
              n(counters.denied[static_cast<std::size_t>(pnmem::admit_reason::psi_stall)]), t.fail_open.load());
  std::printf("decoded %d (kv-bound %d), gate: acquired %llu, waits %llu, overloaded %llu, timed out %llu; unserved %d\n",
              t.done.load(), t.kv_bound.load(), n(counters.gate_acquired), n(counters.gate_waits),
              n(counters.gate_overloaded), n(counters.gate_timed_out), t.unserved.load());
  std::printf("level changes seen %d; ladder clamps %llu; final level %s; kv peak %llu MiB (bound %llu MiB)\n",
              t.level_changes.load(),
              n(counters.ladder_degradations[1]) + n(counters.ladder_degradations[2]) +
                  n(counters.ladder_degradations[3]),
              std::string(pnmem::log_name(s.level)).c_str(), mib(pool.peak()), mib(pool.limit()));
  if (opt.metrics) {
    // With the model-server protocol's gauges (engine/fleet_load.hpp): the gate's queue and slots,
    // the requests still in the engine's own queue ahead of it, and the KV pool's bytes.
    pnmem::fleet_load load = pnmem::gate_load(gate);
    load.queued_requests += static_cast<std::uint64_t>(t.unserved.load());
    load.kv_used_bytes = pool.used();
    load.kv_capacity_bytes = pool.limit();
    std::printf("\n%s", pnmem::prometheus_text(s, &counters, policy, &load).c_str());
  }
  return 0;
}
