// examples/prealloc_server/main.cpp - pnmem in a server that preallocates, through the C ABI only.
//
// A C++17 inference server shaped like llama.cpp's: the weights, the KV cache and the compute
// buffers are sized and allocated once, at load; a request then costs the host no more bytes, and
// what grows is a host prompt cache (one entry per finished request, its prompt's KV state). No
// model runs: 20 simulated requests go through the calls such a server makes, one pnmem call where
// one suffices:
//   a. pnmem_watcher_start                   the live snapshot, on its own thread;
//   b. pnmem_model_init_preallocated         requests cost nothing: admission answers on pressure
//                                            and the host reserve only;
//   c. pnmem_check_bytes + pnmem_explain     before the load: one that can never fit is refused, with
//                                            pnmem's reason; pnmem_admit_host_load gives the context
//                                            that fits (the load started smaller when capped), reserved;
//   d. pnmem_admit_wait                      before queueing a request: at the reserve it is held (it costs
//                                            nothing) up to a patience; PNMEM_DENIED is the HTTP 503;
//   e. pnmem_make_room                       before a prompt-cache entry is allocated: reserved, the
//      + pnmem_reservation_settle / _cancel  cache's oldest entries dropped first when the insert would
//                                            take the host below WATCH (the cache keeps its newest), then
//                                            settled (or cancelled if the allocation fails); and
//      pnmem_set_shed_hook                   under pressure the oldest entries are shed on pnmem's poll
//                                            thread, also while the engine's loop is busy;
//   f. pnmem_set_fleet_load                  the gateway's gauges (queued, running, slots);
//      pnmem_metrics_text                    pnmem's /metrics lines, with PNMEM_METRICS_CONTENT_TYPE.
// docs/engine-integration.md ("pnmem in a server that preallocates") walks through it.
//
// Build it against an installed pnmem (PKG_CONFIG_PATH at its lib/.../pkgconfig; add
// -Wl,-rpath,$(pkg-config --variable=libdir pnmem-c) unless libpnmem_c is on the loader's path):
//
//   g++ -std=c++17 main.cpp $(pkg-config --cflags --libs pnmem-c) -o prealloc_server
//
// In this tree, Meson builds it as build/examples/prealloc_server (test `prealloc_server`, suite
// examples). To see the 503 and the cache making room on an idle box, leave it little room above the
// host reserve: PN_HOST_RESERVE_BYTES=<MemAvailable - 96 MiB> ./prealloc_server. With --root DIR it reads
// the box from DIR/proc/meminfo (and pressure/memory) instead: the test `prealloc_server_box` moves that
// box by hand (examples/prealloc_server/test_box.py: a load started smaller, a co-tenant holding the box at
// its reserve while a request waits, then leaving; with --long-prefill-ms, a co-tenant ramping while the
// loop is inside a 10 s prefill, and the cache shed meanwhile on pnmem's thread).
//
// Exit status: 0 when every answer was one pnmem documents for its call (whatever the box's level),
// 1 with a "FAIL: " line naming the call and what was wrong.
#include <pnmem/pnmem_c.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::uint64_t MiB = 1024 * 1024;

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAIL: %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(MiB); }

std::string reason_of(const pnmem_admit_answer& a) { return a.reason != nullptr ? a.reason : "(null)"; }

// pnmem_explain's line for an answer, whatever its length.
std::string explain(const pnmem_admit_answer& a) {
  char line[256];
  const int n = pnmem_explain(&a, line, sizeof line);
  if (n < 0) fail("pnmem_explain returned -1");
  if (static_cast<std::size_t>(n) < sizeof line) return line;
  std::string longer(static_cast<std::size_t>(n) + 1, '\0');
  pnmem_explain(&a, &longer[0], longer.size());
  longer.resize(static_cast<std::size_t>(n));
  return longer;
}

// The status a host-bytes answer (pnmem_check_bytes, pnmem_make_room) must have for its reason.
void check_bytes_answer(const char* call, const pnmem_admit_answer& a, std::uint64_t bytes) {
  const std::string r = reason_of(a);
  const bool ok = (a.status == PNMEM_ADMITTED && r == "fits") || (a.status == PNMEM_CAPPED && r == "host_budget") ||
                  (a.status == PNMEM_DENIED && r == "host_reserve");
  if (!ok) fail(std::string(call) + " answered " + explain(a) + " (documented: fits, host_budget or host_reserve)");
  if (a.need_bytes != bytes) fail(std::string(call) + ": need_bytes is not the bytes asked for: " + explain(a));
}

// A prompt-cache entry: the KV state of a finished request's prompt, really allocated and touched.
struct cache_entry {
  int request;
  std::vector<char> bytes;
};

// The host prompt cache, oldest entry first. Its lock: pnmem's shed hook drops entries on pnmem's
// poll thread while the request loop inserts.
struct prompt_cache {
  std::mutex mu;
  std::deque<cache_entry> entries;
  std::uint64_t total = 0;
  int dropped = 0;  // to make room for an insert
  int shed = 0;     // by the shed hook

  // Drops the oldest entries until `want` bytes are freed (or none is left); the bytes freed.
  std::uint64_t drop_locked(std::uint64_t want, const char* why, int& count) {
    std::uint64_t freed = 0;
    while (freed < want && !entries.empty()) {
      const std::uint64_t b = entries.front().bytes.size();
      std::printf("  cache: %s: dropped req %d's entry (%.2f MiB)\n", why, entries.front().request, mib(b));
      entries.pop_front();  // entries of a few MiB are mmap'd by malloc: freed to the kernel
      freed += b;
      total -= b;
      ++count;
    }
    return freed;
  }
};

// pnmem_make_room's callback: the oldest entries holding `want` bytes, or nothing when the whole cache
// holds less (emptying it would not make the insert fit).
std::uint64_t drop_for_insert(std::uint64_t want, void* user) {
  auto& c = *static_cast<prompt_cache*>(user);
  std::lock_guard<std::mutex> lk(c.mu);
  return c.total < want ? 0 : c.drop_locked(want, "making room for the newest", c.dropped);
}

// The shed hook, on pnmem's poll thread when the host is below WATCH: as much as pnmem asks, or all.
std::uint64_t shed_oldest(std::uint64_t want, void* user) {
  auto& c = *static_cast<prompt_cache*>(user);
  std::lock_guard<std::mutex> lk(c.mu);
  return c.drop_locked(want, "shed (the host is below WATCH)", c.shed);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("prealloc_server: pnmem through its C ABI, in a server that preallocates\n");
  // --root DIR: read the box from DIR/proc/... instead of /proc (a test moves that box by hand).
  // --long-prefill-ms MS: request 10's prefill holds the loop that long (a long prompt on a slow box).
  const char* root = nullptr;
  long long long_prefill_ms = 0;
  for (int i = 1; i < argc; i += 2) {
    char* end = nullptr;
    if (i + 1 < argc && std::strcmp(argv[i], "--root") == 0) {
      root = argv[i + 1];
    } else if (i + 1 < argc && std::strcmp(argv[i], "--long-prefill-ms") == 0 &&
               (long_prefill_ms = std::strtoll(argv[i + 1], &end, 10)) >= 0 && end != argv[i + 1] && *end == '\0' &&
               long_prefill_ms <= 600000) {
    } else {
      std::fprintf(stderr, "usage: prealloc_server [--root DIR] [--long-prefill-ms 0..600000]\n");
      return 2;
    }
  }

  // a. The watcher: one synchronous sample, then its own thread.
  pnmem_watcher_options options;
  if (pnmem_watcher_options_init(&options) != 0) fail("pnmem_watcher_options_init returned -1");
  options.root = root;  // NULL: this box
  if (pnmem_watcher_start_with(&options) != 0)
    fail("pnmem_watcher_start_with returned -1: no watcher, every answer would fail open");
  pnmem_state state;
  if (pnmem_read(&state) != 0) fail("pnmem_read returned -1");
  if (state.host_total_bytes == 0) fail("pnmem_read: host_total_bytes is 0 after the watcher started");
  std::printf("watcher: level %s, avail %.0f MiB of %.0f MiB\n", pnmem_level_name(state.level),
              mib(state.host_avail_bytes), mib(state.host_total_bytes));

  // b. The engine: KV and compute buffers allocated at load, so a request costs the host nothing.
  pnmem_model model;
  if (pnmem_model_init_preallocated(&model) != 0) fail("pnmem_model_init_preallocated returned -1");
  model.max_window = 4096;  // the context each slot was allocated for (llama.cpp's -c / -np)
  model.max_slots = 4;      // the slots allocated (-np)

  // c. Before the load. One far above MemTotal is refused as one that can never fit (a 507, not a 503).
  const std::uint64_t too_big = 4 * state.host_total_bytes;
  pnmem_admit_answer a;
  if (pnmem_check_bytes(too_big, -1, &a) != 0) fail("pnmem_check_bytes returned -1");
  check_bytes_answer("pnmem_check_bytes", a, too_big);
  if (a.status == PNMEM_ADMITTED) fail("pnmem_check_bytes admitted 4 x MemTotal: " + explain(a));
  std::printf("load 4 x MemTotal refused: %s\n", explain(a).c_str());
  const char* load_basis = nullptr;
  if (pnmem_retry_after_ms(&a, &load_basis) != 0 || std::strcmp(load_basis, "never_fits") != 0)
    fail("pnmem_retry_after_ms: a load of 4 x MemTotal should never fit, not " + std::string(load_basis ? load_basis : "?"));
  std::printf("  retry: never (%s)\n", load_basis);
  //    The load itself: 32 MiB of weights and compute buffers, and 8 KiB of KV per token of context (4
  //    slots x 2 KiB), asked with 4096 tokens, 1024 the least worth serving. pnmem answers with the
  //    context that fits with the host at WATCH or better (capped: start with a smaller -c), reserved
  //    until the buffers are allocated.
  const std::uint64_t fixed_bytes = 32 * MiB;
  const std::uint64_t kv_per_token = 4 * 2048;
  pnmem_reservation load = 0;
  if (pnmem_admit_host_load(fixed_bytes, kv_per_token, model.max_window, 1024, 0, &a, &load) != 0)
    fail("pnmem_admit_host_load returned -1");
  if (a.status == PNMEM_DENIED) {
    std::printf("load refused: %s\n", explain(a).c_str());
    std::printf("OK: pnmem refused the load with its reason; this box has no room for the example\n");
    return 0;
  }
  if (a.status == PNMEM_FAIL_OPEN || load == 0 || a.fit_tokens < 1024 || a.fit_tokens > model.max_window)
    fail("pnmem_admit_host_load: not an answer it documents: " + explain(a));
  model.max_window = a.fit_tokens;  // capped: the slots are allocated for the context that fits
  const std::uint64_t load_bytes = fixed_bytes + kv_per_token * static_cast<std::uint64_t>(model.max_window);
  std::printf("load %.0f MiB, %d tokens of context: %s\n", mib(load_bytes), model.max_window, explain(a).c_str());
  std::vector<char> arena(load_bytes);  // the weights, the KV cache and the compute buffers
  std::memset(arena.data(), 1, arena.size());
  pnmem_reservation_settle(load);  // allocated: counted until a sample sees it

  // d., e. The requests: prompts of varied lengths, two longer than the context.
  const int prompts[] = {812, 1630, 240, 3900, 5210, 1200, 2750, 96,   3300, 1870,
                         640, 4500, 2100, 980,  3650, 1430, 310,  2900, 1750, 2600};
  const std::uint64_t cache_bytes_per_token = 1024;  // this (small) model's KV state per prompt token
  prompt_cache cache;
  // One hook per process: under pressure pnmem sheds the oldest entries on its own thread.
  if (pnmem_set_shed_hook(shed_oldest, &cache) != 0) fail("pnmem_set_shed_hook returned -1");
  int n_admit_calls = 0;
  int queued = 0;
  int truncated = 0;
  int chunked = 0;
  int refused = 0;
  int cached = 0;
  int not_cached = 0;
  int id = 0;
  for (const int n_tokens : prompts) {
    ++id;
    // d. Admit before queueing. A preallocated request costs nothing: only pressure refuses it, and at the
    //    reserve (a co-tenant holding the box) it is held, up to the patience, until the box lets it start
    //    (the zero-cost rule hold, pnmem's default): served late rather than failed with a 503.
    const auto asked = std::chrono::steady_clock::now();
    if (pnmem_admit_wait(&model, n_tokens, /*patience_ms=*/5000, &a) != 0) fail("pnmem_admit_wait returned -1");
    const auto waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - asked).count();
    if (waited_ms >= 100)
      std::printf("req %2d prompt %4d: held %lld ms (it costs the host nothing; the box was at its reserve)\n", id,
                  n_tokens, static_cast<long long>(waited_ms));
    ++n_admit_calls;
    const std::string r = reason_of(a);
    int kept_tokens = n_tokens;  // the prompt the request runs, and caches
    if (a.status == PNMEM_FAIL_OPEN) fail("pnmem_admit_wait failed open with the watcher running");
    if (a.need_bytes != 0 || r == "host_budget")
      fail("pnmem_admit_wait charged host bytes to a preallocated request: " + explain(a));
    if (a.status == PNMEM_DENIED) {
      if (r != "psi_stall" && r != "host_reserve") fail("pnmem_admit_wait denied for an undocumented reason: " + explain(a));
      std::printf("req %2d prompt %4d: HTTP/1.1 503 Service Unavailable\n", id, n_tokens);
      // When to come back: pnmem's hint from what it sees (the stall's decay, memory coming back, the
      // reservations' expiry), in whole seconds as Retry-After wants them. A hint, never negative.
      const char* basis = nullptr;
      const std::int64_t wait_ms = pnmem_retry_after_ms(&a, &basis);
      if (wait_ms < 1 || wait_ms > 60000) fail("pnmem_retry_after_ms gave " + std::to_string(wait_ms) + " ms for a denial");
      std::printf("  Retry-After: %lld  (pnmem: %lld ms, %s)\n", static_cast<long long>((wait_ms + 999) / 1000),
                  static_cast<long long>(wait_ms), basis);
      std::printf("  Content-Type: text/plain\n\n  %s\n", explain(a).c_str());
      ++refused;
      continue;
    }
    if (a.status == PNMEM_CAPPED) {
      if ((r != "window" && r != "prefill_window") || a.fit_tokens >= n_tokens)
        fail("pnmem_admit_wait capped a preallocated request for an undocumented reason: " + explain(a));
      // "window": longer than the context the slots were allocated for: truncated to it. "prefill_window": the
      // ladder's clamp (TIGHT or worse): the whole prompt, prefilled a.window tokens at a time. A prompt that is
      // both is answered "window" with the clamped fit_tokens: truncate to the context, not to fit_tokens.
      std::string how = "queued";
      if (r == "window") {
        kept_tokens = model.max_window;
        how += ", truncated to " + std::to_string(kept_tokens) + " tokens";
        ++truncated;
      }
      if (a.window > 0 && a.window < kept_tokens) {
        how += ", prefill in chunks of " + std::to_string(a.window) + " tokens";
        ++chunked;
      }
      std::printf("req %2d prompt %4d: %s: %s\n", id, n_tokens, how.c_str(), explain(a).c_str());
    } else {
      if (a.fit_tokens != n_tokens) fail("pnmem_admit_wait admitted fewer tokens than asked: " + explain(a));
      std::printf("req %2d prompt %4d: queued (%s, level %s)\n", id, n_tokens, r.c_str(), pnmem_level_name(a.level));
    }
    ++queued;
    // The gateway's gauges (docs/fleet.md): one request running in a slot of max_slots, no KV bytes counted
    // (the slots are preallocated whole: the ratio is running over the slots).
    pnmem_set_fleet_load(0, 1, static_cast<std::uint64_t>(model.max_slots), 0, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the request runs in a slot
    if (id == 10 && long_prefill_ms > 0) {
      // A long prefill: the loop calls nothing of pnmem's meanwhile; the shed hook still runs, on pnmem's thread.
      std::printf("req %2d: prefill of %lld ms: the loop is busy\n", id, long_prefill_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(long_prefill_ms));
      std::printf("req %2d: prefill done\n", id);
    }
    pnmem_set_fleet_load(0, 0, static_cast<std::uint64_t>(model.max_slots), 0, 0);

    // e. Its prompt goes into the host cache, which keeps its newest entries: pnmem_make_room reserves
    //    the entry's bytes, first asking the cache to drop its oldest entries when the insert would take
    //    the host below WATCH (pnmem credits what they freed). Allocate, then settle (or cancel).
    const std::uint64_t entry_bytes = static_cast<std::uint64_t>(kept_tokens) * cache_bytes_per_token;
    pnmem_reservation reservation = 0;
    if (pnmem_make_room(entry_bytes, 30000, drop_for_insert, &cache, &a, &reservation) != 0)
      fail("pnmem_make_room returned -1");
    check_bytes_answer("pnmem_make_room", a, entry_bytes);
    if ((a.status == PNMEM_ADMITTED) != (reservation != 0))
      fail("pnmem_make_room: a reservation handle with no admission, or none with one: " + explain(a));
    if (a.status != PNMEM_ADMITTED) {
      std::printf("  cache: not cached: %s\n", explain(a).c_str());
      ++not_cached;
      continue;
    }
    std::lock_guard<std::mutex> lk(cache.mu);
    try {
      cache.entries.push_back(cache_entry{id, std::vector<char>(entry_bytes)});
    } catch (const std::bad_alloc&) {
      pnmem_reservation_cancel(reservation);  // the bytes were never allocated: give them back
      std::printf("  cache: allocation of %.2f MiB failed: reservation cancelled\n", mib(entry_bytes));
      ++not_cached;
      continue;
    }
    std::memset(cache.entries.back().bytes.data(), 1, entry_bytes);
    pnmem_reservation_settle(reservation);  // allocated: counted until a sample sees it
    cache.total += entry_bytes;
    ++cached;
    std::printf("  cache: +%.2f MiB reserved, allocated, settled: %zu entries, %.2f MiB\n", mib(entry_bytes),
                cache.entries.size(), mib(cache.total));
  }
  if (pnmem_set_shed_hook(nullptr, nullptr) != 0) fail("pnmem_set_shed_hook(NULL) returned -1");  // before `cache` goes
  std::printf("requests %d: queued %d (truncated %d, prefill chunked %d), refused with 503 %d; cache: %d cached, "
              "%d not cached, %d dropped to make room, %d shed, %zu entries (%.2f MiB) kept\n",
              id, queued, truncated, chunked, refused, cached, not_cached, cache.dropped, cache.shed,
              cache.entries.size(), mib(cache.total));

  // f. pnmem's /metrics lines: the size first, then a buffer of that size (again if a newer snapshot is longer).
  const int size = pnmem_metrics_text(nullptr, 0, PNMEM_METRICS_ALL);
  if (size < 0) fail("pnmem_metrics_text(NULL, 0, PNMEM_METRICS_ALL) returned -1");
  std::string metrics(static_cast<std::size_t>(size) + 1, '\0');
  int n = pnmem_metrics_text(&metrics[0], metrics.size(), PNMEM_METRICS_ALL);
  while (n >= 0 && static_cast<std::size_t>(n) >= metrics.size()) {
    metrics.assign(static_cast<std::size_t>(n) + 1, '\0');
    n = pnmem_metrics_text(&metrics[0], metrics.size(), PNMEM_METRICS_ALL);
  }
  if (n < 0) fail("pnmem_metrics_text returned -1");
  metrics.resize(static_cast<std::size_t>(n));
  std::printf("\nContent-Type: %s\n\n%s", PNMEM_METRICS_CONTENT_TYPE, metrics.c_str());

  // The exposition holds the level, the fleet gauges, and counted every pnmem_admit above.
  if (metrics.find("\npnmem_level ") == std::string::npos) fail("pnmem_metrics_text: no pnmem_level sample");
  if (metrics.find("\npnmem_slot_capacity 4\n") == std::string::npos || metrics.find("\npnmem_running_requests 0\n") == std::string::npos)
    fail("pnmem_metrics_text: the fleet gauges are not what pnmem_set_fleet_load gave");
  std::uint64_t admissions = 0;
  for (std::size_t at = metrics.find("\npnmem_admissions_total{"); at != std::string::npos;
       at = metrics.find("\npnmem_admissions_total{", at + 1)) {
    const std::size_t end = metrics.find('\n', at + 1);
    const std::size_t space = metrics.rfind(' ', end);
    admissions += std::strtoull(metrics.c_str() + space + 1, nullptr, 10);
  }
  if (admissions != static_cast<std::uint64_t>(n_admit_calls))
    fail("pnmem_metrics_text: pnmem_admissions_total sums to " + std::to_string(admissions) + ", not the " +
         std::to_string(n_admit_calls) + " pnmem_admit calls");

  pnmem_watcher_stop();
  std::printf("OK: every pnmem answer was one its call documents\n");
  return 0;
}
