// examples/survival/workload.cpp - see workload.hpp.
#include "workload.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <pnmem/config.hpp>
#include <pnmem/cost_model.hpp>
#include <pnmem/engine/admit.hpp>
#include <pnmem/engine/backpressure_gate.hpp>
#include <pnmem/engine/host_ledger.hpp>
#include <pnmem/ladder.hpp>
#include <pnmem/linux/box_ledger.hpp>
#include <pnmem/linux/linux_sampler.hpp>
#include <pnmem/watcher.hpp>

#include "events.hpp"

namespace survival {

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr int kv_chunk_tokens = 16;

// Real host memory: mapped, every page touched, unmapped on destruction.
class host_block {
 public:
  host_block() = default;
  explicit host_block(std::uint64_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      bytes_ = 0;
      return;
    }
    ptr_ = static_cast<unsigned char*>(p);
    for (std::uint64_t off = 0; off < bytes; off += 4096) ptr_[off] = static_cast<unsigned char>(off >> 12);
  }
  host_block(host_block&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  host_block& operator=(host_block&& o) noexcept {
    if (this != &o) {
      unmap();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  host_block(const host_block&) = delete;
  host_block& operator=(const host_block&) = delete;
  ~host_block() { unmap(); }

  bool ok() const noexcept { return ptr_ != nullptr || bytes_ == 0; }

 private:
  void unmap() noexcept {
    if (ptr_ != nullptr) ::munmap(ptr_, bytes_);
    ptr_ = nullptr;
  }
  unsigned char* ptr_ = nullptr;
  std::uint64_t bytes_ = 0;
};

struct request {
  int id = 0;
  int prompt = 0;
  int decode = 0;
  double arrival_ms = 0;
  clock_type::time_point queued_at{};
};

// The fixed schedule: bursts of burst_size requests arriving together, and a
// trickle between them. Deterministic for a seed.
std::vector<request> make_schedule(const workload_options& o) {
  std::mt19937_64 rng{o.seed};
  std::uniform_int_distribution<int> prompt{o.min_prompt, o.max_prompt};
  std::uniform_int_distribution<int> decode{64, 192};
  std::vector<request> out;
  const double first_burst_ms = 300;
  const double end_ms = first_burst_ms + (o.bursts - 1) * o.burst_gap_ms;
  for (int b = 0; b < o.bursts; ++b) {
    for (int i = 0; i < o.burst_size; ++i) out.push_back({0, prompt(rng), decode(rng), first_burst_ms + b * o.burst_gap_ms});
  }
  if (o.trickle_ms > 0) {
    for (double t = first_burst_ms + o.trickle_ms / 2.0; t < end_ms; t += o.trickle_ms) {
      out.push_back({0, prompt(rng), decode(rng), t});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const request& a, const request& b) { return a.arrival_ms < b.arrival_ms; });
  for (std::size_t i = 0; i < out.size(); ++i) out[i].id = o.id_base + static_cast<int>(i);
  return out;
}

// Appends event lines with one write() each: a line written before a kill survives it.
class event_sink {
 public:
  explicit event_sink(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {}
  ~event_sink() {
    if (fd_ >= 0) ::close(fd_);
  }
  event_sink(const event_sink&) = delete;
  event_sink& operator=(const event_sink&) = delete;
  bool ok() const noexcept { return fd_ >= 0; }
  void put(const std::string& line) {
    std::lock_guard<std::mutex> lk(mu_);
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
  std::mutex mu_;
};

}  // namespace

int run_workload(const workload_options& o) {
  const auto t0 = o.t0_ns > 0 ? clock_type::time_point(std::chrono::nanoseconds(o.t0_ns)) : clock_type::now();
  const auto ms_since_start = [t0] { return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count(); };

  event_sink sink{o.events_path};
  if (!sink.ok()) {
    std::fprintf(stderr, "workload: cannot open the event file %s: %s\n", o.events_path.c_str(), std::strerror(errno));
    return 1;
  }
  auto env = pnmem::policy_from_env();
  for (const auto& e : env.errors) std::fprintf(stderr, "workload: %s\n", e.to_string().c_str());
  const pnmem::policy policy = env.value;

  pnmem::watcher_options wopt;
  wopt.policy = policy;
  wopt.poll_interval = 100ms;
  wopt.pressure_poll_interval = 50ms;
  pnmem::watcher<pnmem::linux_sampler> watcher{pnmem::linux_sampler{}, wopt};
  if (!watcher.start()) {
    std::fprintf(stderr, "workload: the watcher did not start\n");
    return 1;
  }

  // The level timeline: every snapshot the watcher publishes.
  std::jthread timeline([&](std::stop_token st) {
    std::uint64_t last_seq = 0;
    while (!st.stop_requested() && o.timeline) {
      const pnmem::mem_state s = watcher.read();
      if (s.seq != last_seq) {
        last_seq = s.seq;
        sink.put(format_level({ms_since_start(), s.level, s.host_avail_bytes, s.seq}));
      }
      std::this_thread::sleep_for(10ms);
    }
  });

  const pnmem::model_desc model{.kv = pnmem::kv_format::fp32, .gpu_resident = false, .max_window = o.max_window,
                                .die = pnmem::no_die, .max_slots = o.slots};
  const pnmem::ladder_config ladder_cfg{o.slots, o.max_window, false};
  // Rung 4a at KV init: the format a cache allocated now must be in (the model's fp32, or its
  // Q4 once the ladder forces it: WATCH or worse). Policy off allocates fp32 always.
  const auto kv_format_now = [&] {
    return pnmem::kv_allocation_for(pnmem::ladder_plan_for(watcher.read().level, ladder_cfg, policy), model.cost, 0)
        .format;
  };
  // Rung 2 is the gate's own: from connect() on, its slots follow the ladder at every sample.
  pnmem::backpressure_gate gate{{.max_slots = o.slots, .max_waiters = 1024, .model = model.cost, .policy = policy}};
  // The box ledger PN_LEDGER names (the supervisor gives each run a scope of its own; off: this process's).
  pnmem::linux_os::box_options box = pnmem::linux_os::box_options_from_env();
  box.limit_cgroup = std::string(watcher.read().provenance.limit_cgroup_path());
  pnmem::linux_os::box_join joined = pnmem::linux_os::join_box(box);
  if (!joined.problem.empty()) std::fprintf(stderr, "workload: %s\n", joined.problem.c_str());
  pnmem::host_ledger ledger{joined.link};
  const pnmem::admit_options aopt{.policy = policy, .log = {}, .counters = nullptr};

  std::optional<pnmem::gate_connection> conn;
  if (o.policy_on) conn.emplace(gate.connect(watcher));

  std::mutex q_mu;
  std::condition_variable q_cv;
  std::deque<request> queue;
  bool producer_done = false;

  const auto end = [&](const request& r, outcome what, std::string_view reason, int tokens) {
    sink.put(format_ended({ms_since_start(), r.id, what, std::string(reason), tokens}));
    if (o.verbose) {
      std::printf("%8.1f ms  req %3d prompt %5d: %s (%.*s) %d tokens\n", ms_since_start(), r.id, r.prompt,
                  std::string(to_string(what)).c_str(), static_cast<int>(reason.size()), reason.data(), tokens);
      std::fflush(stdout);
    }
  };

  // Prefill and decode for real. `settle` runs once the prefill memory is allocated. The KV
  // cache takes the bytes its format takes (`kv_format`, fixed at allocation: decode grows it in
  // the same format); nothing computes on the values, so the bytes are what is simulated.
  const auto serve = [&](int tokens, int decode, pnmem::kv_format kv_format, auto&& settle) {
    const auto kv_bytes = [&](int n) { return pnmem::kv_bytes(model.cost, kv_format, static_cast<std::uint64_t>(n)); };
    std::vector<host_block> kv;
    {
      host_block activations{pnmem::activation_peak_bytes(tokens)};
      kv.emplace_back(kv_bytes(tokens));
      settle();
      std::this_thread::sleep_for(30ms);
    }
    for (int produced = 0; produced < decode; ++produced) {
      if (produced % kv_chunk_tokens == 0) {
        kv.emplace_back(kv_bytes(tokens + produced + kv_chunk_tokens) - kv_bytes(tokens + produced));
      }
      std::this_thread::sleep_for(3ms);
    }
  };

  const auto worker = [&] {
    for (;;) {
      request r;
      {
        std::unique_lock<std::mutex> lk(q_mu);
        q_cv.wait(lk, [&] { return !queue.empty() || producer_done; });
        if (queue.empty()) return;
        r = queue.front();
        queue.pop_front();
      }
      if (!o.policy_on) {  // an engine without pnmem: start it, whole
        serve(r.prompt, r.decode, pnmem::kv_format::fp32, [] {});
        end(r, outcome::admitted, "no_policy", r.prompt);
        continue;
      }
      const auto deadline = r.queued_at + std::chrono::milliseconds(o.patience_ms);
      std::string held_for;  // the reason of the last denial while the request was held
      for (;;) {
        pnmem::gate_result g = gate.acquire(deadline);
        if (!g) {
          // CRITICAL sheds ("overloaded"); a request that waited out its patience
          // was held for the last denial's reason, or for a slot.
          std::string reason = g.status == pnmem::gate_status::overloaded ? "overloaded" : held_for;
          if (reason.empty()) {
            reason = g.status == pnmem::gate_status::timed_out && gate.pushed_level() == pnmem::mem_level::tight
                         ? "held_at_tight"
                         : std::string(to_string(g.status));
          }
          end(r, outcome::rejected, reason, 0);
          break;
        }
        // The cache is allocated right after admission, in the format rung 4a gives it now;
        // admission prices it in that format.
        pnmem::model_desc m = model;
        m.kv = kv_format_now();
        pnmem::host_ledger::admission a;
        if (o.use_ledger) {
          a = ledger.admit(watcher, m, r.prompt, aopt);
        } else {
          a.answer = pnmem::admit(watcher, m, r.prompt, aopt);
        }
        if (a.answer.status == pnmem::admit_status::denied) {
          held_for = std::string(pnmem::to_string(a.answer.reason));
          g.slot.release();
          gate.notify_denied(a.answer);  // the hold re-checks it each sample
          if (clock_type::now() + 25ms >= deadline) {
            end(r, outcome::rejected, held_for, 0);
            break;
          }
          std::this_thread::sleep_for(25ms);  // hold: memory frees as other requests finish
          continue;
        }
        const int tokens = a.answer.fit_tokens;
        serve(tokens, r.decode, pnmem::request_kv_format(m), [&] {
          a.held.settle();
          watcher.poll_now();  // a fresh sample: the ledger forgets the promise, others see the memory
        });
        const bool capped = a.answer.status == pnmem::admit_status::capped;
        end(r, capped ? outcome::capped : outcome::admitted, pnmem::to_string(a.answer.reason), tokens);
        break;
      }
    }
  };

  std::vector<std::jthread> workers;
  for (int i = 0; i < o.slots; ++i) workers.emplace_back(worker);

  const std::vector<request> schedule = make_schedule(o);
  for (request r : schedule) {
    const auto at = t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double, std::milli>(r.arrival_ms));
    std::this_thread::sleep_until(at);
    r.queued_at = clock_type::now();
    sink.put(format_queued({ms_since_start(), r.id, r.prompt, r.decode}));
    {
      std::lock_guard<std::mutex> lk(q_mu);
      queue.push_back(r);
    }
    q_cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lk(q_mu);
    producer_done = true;
  }
  q_cv.notify_all();
  for (auto& w : workers) w.join();

  conn.reset();
  std::this_thread::sleep_for(150ms);  // one more sample after the last free, for the timeline
  timeline.request_stop();
  timeline.join();
  watcher.stop();
  if (o.verbose) std::printf("workload: done in %.1f s, %zu requests\n", ms_since_start() / 1000.0, schedule.size());
  return 0;
}

}  // namespace survival
