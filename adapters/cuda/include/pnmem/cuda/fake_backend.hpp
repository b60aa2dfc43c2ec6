// pnmem/cuda/fake_backend.hpp - a device in host memory, on a simulated timeline.
//
// The CUDA adapter's protocol (retire lists, stream-ordered frees, a staging arena
// that copies land in) is about *when* memory may be reused. This fake makes
// "when" explicit and checkable without a GPU:
//
//   - Work is queued on streams and runs only when the test moves time on
//     (advance / run_until_idle). Each stream runs its ops in FIFO order; an op
//     starts when the previous op on its stream has ended and any event it waits
//     for (stream_wait_event) has completed, and occupies [start, start+duration).
//   - Every buffer an op touches (submit's buffer_use list, copy_async's src and
//     dst) must lie inside a live allocation - device memory, pinned memory, or
//     host memory the test registered - when the op is queued, when it starts and
//     when it completes. Anything else is recorded as a violation.
//   - free_async frees in stream order: the bytes are "retiring" (not free, not
//     usable by new work) until the work queued on that stream before the free has
//     finished. free_pinned and free_plain free at once; an op that has not
//     completed and still uses the memory is a violation ("freed while in use").
//     (A real cudaFree waits for the device first; the fake does not, so a caller
//     that frees plain memory under queued work - relying on that wait - is caught.)
//   - Memory pools: with fake_options::memory_pools false the fake is a device
//     without them (cudaDevAttrMemoryPoolsSupported 0): device_alloc_mode answers
//     plain and alloc_async not_supported; alloc_plain / free_plain work in both
//     modes. A block is freed by the call matching its allocation (free_async for
//     alloc_async, free_plain for alloc_plain), anything else is a violation.
//   - Freed memory is poisoned (0xDD) and quarantined: it is not handed out again,
//     so a late access lands in memory the fake still owns and is reported, and a
//     late write is visible (an op fills the bytes it writes with its tag byte at
//     completion; copies copy real bytes at completion).
//
//   pnmem::cuda::fake_backend dev{{.devices = 1, .total_bytes_per_device = 64 * pnmem::MiB}};
//   pnmem::cuda::stream_handle s;  dev.stream_create(0, s);
//   void* p = nullptr;             dev.alloc_async(0, 4096, s, p);
//   dev.submit(s, {{p, 4096, true}}, 5);   // a 5-tick kernel writing p
//   dev.free_async(p, s);                  // 4096 bytes retiring
//   dev.advance(5);                        // kernel done, then the free: p poisoned
//   REQUIRE(dev.violations().empty());
//
// Cross-stream ordering is checked too (`report_races`, on by default). Work on
// two streams is ordered only by stream_wait_event on an event recorded after
// the first piece of work (CUDA's rule), or by the first having finished before
// the second is queued. When an op is queued while an op on another stream that
// touches overlapping memory is still pending, at least one of them writes it,
// and no chain of event waits orders the pending op before the new one, the pair
// is a race and is reported at once ("races with"), whatever the timeline would
// later do: a real GPU may run them in either order. alloc_async and free_async
// count as writes of their whole block on their stream, so using stream-ordered
// memory on another stream before its allocation is ordered, or freeing it while
// another stream may still use it, is a race too. (Ordering is tracked with a
// vector clock per stream: each stream knows, for every other stream, the last
// op it has been made to wait for.)
//
// One violation is recorded per (op, buffer) at the earliest point it is seen
// (when queued, at a free_pinned, at start, at completion), plus one per bad
// free (double free, a pointer that is not an allocation's start, wrong kind).
// Deterministic: same calls, same timeline, same addresses' contents, same text
// (pointer values aside). Every member takes one mutex, so the fake may be used
// from several threads.
//
// Handles are never reused; a destroyed or unknown handle is invalid_value.
// alloc_async's memory is live at once for the lifetime checks, and its
// allocation is an op on the stream for the race check (see above); it must be on
// the stream's device (cudaMallocAsync's pool is the stream's device's); a bad
// free returns invalid_value and is also recorded as a violation.
// Stream destruction, as in CUDA, lets already-queued work finish.
// Event records on an idle stream complete at the next advance (advance(0) is
// enough): nothing completes between two calls the test makes.
//
// Host memory backs every allocation: keep test sizes small. Quarantine holds
// freed blocks up to `quarantine_limit_bytes`; beyond it the oldest freed blocks
// that no pending op references are released (their addresses may then be
// reused by the host allocator, so a stale pointer to them could pass as live).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/cuda/eviction_ops.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/units.hpp"

namespace pnmem::cuda {

struct fake_options {
  int devices = 1;  // 0: device_count reports no_device, as cudart does without a GPU
  std::uint64_t total_bytes_per_device = 16 * GiB;
  std::uint64_t used_by_others_bytes = 0;  // per device: other processes' memory
  std::uint64_t copy_ticks = 1;            // duration of one copy_async
  std::uint64_t quarantine_limit_bytes = 256 * MiB;  // freed blocks kept poisoned
  // Report unordered conflicting work on different streams when it is queued
  // (see the header comment). Off only for tests of the timeline detector alone.
  bool report_races = true;
  // false: a device without stream-ordered memory pools (see the header comment).
  bool memory_pools = true;
  // Device i's UUID: uuids[i], or (none given) GPU-fa000000-0000-0000-0000-0000000000NN with NN = i + 1,
  // so two fakes with the defaults are the same GPUs, as two processes on one box are. Give two fakes
  // the same UUIDs in another order for processes with different CUDA_VISIBLE_DEVICES.
  std::vector<die_uuid> uuids{};
};

class fake_backend final : public device_backend {
 public:
  // The byte freed memory is filled with.
  static constexpr std::uint8_t poison_byte = 0xDD;

  explicit fake_backend(fake_options options = {});
  ~fake_backend() override;

  // --- device_backend ---
  std::string_view name() const noexcept override { return "fake"; }
  device_status device_count(int& out) noexcept override;
  device_status mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override;
  device_status device_uuid(int device, die_uuid& out) noexcept override;
  device_status device_alloc_mode(int device, alloc_mode& out) noexcept override;
  device_status alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept override;
  device_status free_async(void* p, stream_handle s) noexcept override;
  device_status alloc_plain(int device, std::size_t bytes, void*& out) noexcept override;
  device_status free_plain(void* p) noexcept override;
  device_status alloc_pinned(std::size_t bytes, void*& out) noexcept override;
  device_status free_pinned(void* p) noexcept override;
  device_status stream_create(int device, stream_handle& out) noexcept override;
  device_status stream_destroy(stream_handle s) noexcept override;
  device_status event_create(int device, event_handle& out) noexcept override;
  device_status event_destroy(event_handle e) noexcept override;
  device_status event_record(event_handle e, stream_handle s) noexcept override;
  device_status event_query(event_handle e) noexcept override;
  device_status stream_wait_event(stream_handle s, event_handle e) noexcept override;
  device_status stream_id(stream_handle s, std::uint64_t& out) noexcept override;
  device_status copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept override;
  // Rung 4b: ops of one tick that run eviction_ops.hpp's host reference at completion, on the bytes
  // the fake holds (so a test reads what a kernel would have written). Their buffers are checked like
  // a kernel's; a compaction whose keep list is not increasing and below n_rows when it completes
  // moves nothing and is recorded as a violation (the real kernel would scramble the stripe).
  device_status observation_scores_async(const observation_pooling& a, stream_handle s) noexcept override;
  device_status select_keep_async(const keep_selection& a, stream_handle s) noexcept override;
  device_status compact_rows_async(const row_compaction& a, stream_handle s) noexcept override;

  // --- the test's side ---

  // Queues a "kernel" on `s` that reads/writes `uses` and runs for `duration_ticks`.
  // Returns its op id (0 if `s` is not a live stream: that is recorded as a
  // violation); write_tag(id) is the byte it writes at completion.
  std::uint64_t submit(stream_handle s, std::vector<buffer_use> uses, std::uint64_t duration_ticks = 1);

  // Moves simulated time on by `ticks`, starting and completing ops on the way.
  void advance(std::uint64_t ticks);
  // Runs until no op is queued or running.
  void run_until_idle();
  std::uint64_t now() const;
  // Ops queued or running (kernels, copies, frees, event records and waits).
  std::size_t pending_ops() const;

  // Plain host memory ops may use (for copies into a test's own buffers).
  void register_host(const void* p, std::size_t bytes);
  void unregister_host(const void* p);

  // Another process's memory on a die (mem_get_info's free moves with it).
  void set_used_by_others(int device, std::uint64_t bytes);

  // The byte an op writes into its `writes` buffers at completion: never 0 or poison_byte.
  static constexpr std::uint8_t write_tag(std::uint64_t op_id) noexcept {
    const auto t = static_cast<std::uint8_t>(1 + op_id % 253);
    return t >= poison_byte ? static_cast<std::uint8_t>(t + 1) : t;
  }

  // --- what the detector saw ---
  const std::vector<std::string>& violations() const;  // see the note on references below
  void clear_violations();

  // Device and pinned allocations neither freed nor waiting on a stream-ordered free.
  std::size_t live_allocations() const;
  std::uint64_t live_bytes() const;
  std::uint64_t live_device_bytes(int device) const;
  std::uint64_t live_pinned_bytes() const;
  // Bytes whose free_async has been queued but has not happened yet.
  std::uint64_t retiring_bytes(int device) const;
  // Live allocations, streams and events, one line each: empty when nothing leaked.
  // (An allocation whose stream-ordered free is still pending is not a leak.)
  std::vector<std::string> leaks() const;

  std::uint64_t events_created() const;
  std::uint64_t streams_created() const;
  std::size_t live_events() const;
  std::size_t live_streams() const;

  // Note: violations() returns a reference into the fake; read it from the
  // thread that drives the timeline (or copy it) - it changes as ops run.

 private:
  enum class block_kind : std::uint8_t { device, pinned };
  enum class block_state : std::uint8_t { live, retiring, freed };

  // Blocks are 256-byte aligned like CUDA's; this frees that aligned storage.
  struct storage_delete {
    void operator()(std::byte* p) const noexcept;
  };

  struct block {
    std::uint64_t id = 0;
    block_kind kind = block_kind::device;
    block_state state = block_state::live;
    int device = 0;  // device blocks only
    bool plain = false;  // device blocks: from alloc_plain (freed by free_plain), not alloc_async
    std::size_t bytes = 0;
    std::unique_ptr<std::byte[], storage_delete> storage;
    std::uint64_t freed_at = 0;
    std::string_view freed_by;  // "free_async" / "free_pinned" / "free_plain"
  };

  enum class op_kind : std::uint8_t { kernel, copy, free, record, wait, alloc, observe, select, compact };

  // Per stream: the highest op sequence number of each stream (by handle) that
  // the next op queued here is ordered after. Tiny: a handful of streams.
  using stream_clock = std::map<std::uint64_t, std::uint64_t>;

  struct op_use {
    buffer_use use;
    bool reported = false;  // one violation per (op, buffer)
  };

  struct op {
    std::uint64_t id = 0;
    op_kind kind = op_kind::kernel;
    std::uint64_t duration = 0;
    std::vector<op_use> uses;          // copy: [0] = src (read), [1] = dst (write)
    std::uintptr_t free_base = 0;      // free: the block to release
    std::uint64_t waits_for = 0;       // wait: op id of the event's record (0: none)
    std::uint64_t seq = 0;             // position on its stream (1, 2, ...)
    buffer_use footprint;              // alloc/free: the whole block, for the race check only
    // observe / select / compact: the call's arguments, run by the reference at completion
    observation_pooling observe_args;
    keep_selection select_args;
    row_compaction compact_args;
    bool started = false;
    std::uint64_t end = 0;
  };

  struct stream {
    std::uint64_t handle = 0;
    std::uint64_t id = 0;  // stream_id
    int device = 0;
    bool destroyed = false;
    std::deque<op> queue;  // front may be running
    stream_clock clock;    // clock[handle]: the seq of the last op queued here
  };

  struct event {
    int device = 0;
    std::uint64_t last_record = 0;  // op id of the latest record; 0 = never recorded
    stream_clock clock;             // the recording stream's clock at that record
  };

  enum class use_check : std::uint8_t { ok, retiring, freed, unknown, out_of_bounds };

  // All private helpers run with mu_ held (checked by clang's thread-safety analysis).
  bool valid_device(int device) const noexcept PNMEM_REQUIRES(mu_);
  stream* find_stream(stream_handle s) noexcept PNMEM_REQUIRES(mu_);
  event* find_event(event_handle e) noexcept PNMEM_REQUIRES(mu_);
  std::uint64_t enqueue(stream& st, op o) PNMEM_REQUIRES(mu_);
  bool op_complete(std::uint64_t op_id) const noexcept PNMEM_REQUIRES(mu_);
  const block* find_block(const void* p, std::size_t bytes, use_check& result) const noexcept PNMEM_REQUIRES(mu_);
  bool registered_host(const void* p, std::size_t bytes) const noexcept PNMEM_REQUIRES(mu_);
  void check_use(const stream& st, const op& o, op_use& u, std::string_view when, bool retiring_ok) PNMEM_REQUIRES(mu_);
  void check_races(const stream& st, const op& o) PNMEM_REQUIRES(mu_);
  void release_block(block& b, std::string_view by) PNMEM_REQUIRES(mu_);
  // The three frees' shared checks: the live block at `p` if `call` is the one that frees it, else nullptr
  // after reporting why (not an allocation, the wrong free for its kind, a double free). `at` prefixes it.
  enum class free_call : std::uint8_t { async, plain, pinned };
  block* block_to_free(void* p, free_call call, const std::string& at) PNMEM_REQUIRES(mu_);
  // free_plain and free_pinned after the lock: block_to_free, then release_block by `by` (a literal: the block keeps it).
  device_status free_at_once(void* p, free_call call, std::string_view by) PNMEM_REQUIRES(mu_);
  // A new live block of `bytes` (pinned: device 0) and its storage; nullptr when device memory would not fit
  // the device (others' use, live and retiring bytes counted) or the host has no storage for it.
  std::byte* add_block(block_kind kind, int device, bool plain, std::size_t bytes) PNMEM_REQUIRES(mu_);
  void report_in_flight_users(const block& b, std::string_view by) PNMEM_REQUIRES(mu_);
  void quarantine(std::uintptr_t base) PNMEM_REQUIRES(mu_);
  void run_to(std::uint64_t target, bool until_idle) PNMEM_REQUIRES(mu_);
  bool start_ready_ops() PNMEM_REQUIRES(mu_);
  bool can_start(const stream& st) const noexcept PNMEM_REQUIRES(mu_);
  void start_op(stream& st) PNMEM_REQUIRES(mu_);
  void complete_op(stream& st) PNMEM_REQUIRES(mu_);
  void apply_effects(const op& o) PNMEM_REQUIRES(mu_);
  void run_eviction_reference(const op& o) PNMEM_REQUIRES(mu_);
  device_status enqueue_eviction(stream_handle s, op o) PNMEM_REQUIRES(mu_);
  void collect_finished_streams() PNMEM_REQUIRES(mu_);
  std::string describe(const stream& st, const op& o) const PNMEM_REQUIRES(mu_);
  std::string describe(const block& b) const PNMEM_REQUIRES(mu_);
  void violation(std::string text) PNMEM_REQUIRES(mu_);

  mutable pnmem::detail::mutex mu_;
  fake_options options_ PNMEM_GUARDED_BY(mu_);
  std::uint64_t now_ PNMEM_GUARDED_BY(mu_) = 0;
  std::uint64_t next_handle_ PNMEM_GUARDED_BY(mu_) = 1;  // streams and events share one counter: values never collide
  std::uint64_t next_stream_id_ PNMEM_GUARDED_BY(mu_) = 1;
  std::uint64_t next_op_id_ PNMEM_GUARDED_BY(mu_) = 1;
  std::uint64_t next_block_id_ PNMEM_GUARDED_BY(mu_) = 1;
  std::uint64_t events_created_ PNMEM_GUARDED_BY(mu_) = 0;
  std::uint64_t streams_created_ PNMEM_GUARDED_BY(mu_) = 0;
  std::vector<std::uint64_t> used_by_others_ PNMEM_GUARDED_BY(mu_);  // per device
  std::vector<std::uint64_t> live_device_ PNMEM_GUARDED_BY(mu_);  // per device
  std::vector<std::uint64_t> retiring_ PNMEM_GUARDED_BY(mu_);  // per device
  std::map<std::uintptr_t, block> blocks_ PNMEM_GUARDED_BY(mu_);  // by base address: live, retiring and quarantined
  std::deque<std::uintptr_t> quarantine_ PNMEM_GUARDED_BY(mu_);  // freed blocks, oldest first
  std::uint64_t quarantined_bytes_ PNMEM_GUARDED_BY(mu_) = 0;
  std::map<std::uintptr_t, std::size_t> host_ PNMEM_GUARDED_BY(mu_);  // registered host ranges
  // by handle; destroyed ones until their queue drains
  std::map<std::uint64_t, stream> streams_ PNMEM_GUARDED_BY(mu_);
  std::map<std::uint64_t, event> events_ PNMEM_GUARDED_BY(mu_);  // by handle
  std::unordered_set<std::uint64_t> pending_ PNMEM_GUARDED_BY(mu_);  // op ids queued or running
  std::vector<std::string> violations_ PNMEM_GUARDED_BY(mu_);
};

}  // namespace pnmem::cuda
