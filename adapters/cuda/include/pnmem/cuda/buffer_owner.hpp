// pnmem/cuda/buffer_owner.hpp - one model's decode state on one die, moved safely.
//
// Owns the KV ring (per attention layer: k and v slot buffers, and in Q4 the
// fp32 sink and window buffers), per SSM layer the conv and ssm slot-state
// buffers, the batch scratch, and a pinned host staging arena that deferred
// device-to-host copies land in. The design rule: a buffer is never freed while a
// queued or captured launch may still touch it; each rule below answers one of
// the seed's four hazards (docs/cuda.md, "The CUDA adapter: die feed and buffers that move safely").
//
// The protocol
//   * One GPU turn per model (gpu_turn.hpp). bind/resize/release_all hold it
//     for their duration; a step holds it from step_begin until poll() reports
//     the step's completion event done. The turn is carried by the move-only
//     `step_token`, so while a step is in flight there is no turn to give a
//     resize: a resize overlapping a step cannot be expressed (hazards 1, 2).
//     Bind while a step is in flight: try_bind() answers `busy` at once;
//     bind(..., deadline) waits for the step's poll() to release the turn (on
//     another thread) and answers `timed_out` if the deadline passes first.
//     Neither frees anything under the step.
//   * Retire, don't free (retire_list.hpp). A moved buffer is fenced by an event
//     recorded after its last use on every stream a step of this model ran on
//     (streams are keyed by stream_id, not handle: handles may be reused).
//     So every stream a step ran on (step_begin's, add_stream's) must outlive
//     the owner's moves: keep it until release_all() and a reap() that empties
//     the retire list, or until the owner is destroyed. Device memory is freed
//     stream-ordered behind that fence, pinned memory when the fence
//     completes. The list is reaped at safe points: step_begin, poll,
//     bind/resize, reap(). Retiring bytes are reported apart from used bytes
//     (tally()).
//   * Generations. Every move (a bind/resize that reallocates, a staging
//     growth, release_all) bumps the generation. A captured graph is
//     represented by a graph_token carrying the generation it was captured at;
//     graph_for_launch() answers `recapture` for an older one, so a graph's raw
//     pointers are never launched after their buffers moved.
//   * Staging arena (hazard 3). Sized at step_begin to bound slots x
//     dtoh_bytes_per_slot, and grown only there: step_begin holds the turn, and
//     the turn is only free once the previous step's completion event completed,
//     so no earlier copy can still land in the old arena; the old arena is
//     retired anyway, not freed, in case the engine queued copies outside a step.
//   * Ladder ceiling (hazard 4). bind/resize take the ladder plan *at the time
//     of the call*. A request above plan.max_slots is not failed: the owner binds
//     min(requested, ceiling) slots and says so (bind_result::bound_slots); the
//     scheduler keeps the rest queued and asks again later. A request is only
//     refused for bad arguments or a device error.
//   * Rung 4a. A KV cache *allocated* while plan.force_kv_q4 (WATCH or worse)
//     is Q4. A live cache keeps its format through every bind and resize (a
//     fp32 cache is never converted: that would move every live token); the
//     format is chosen again only after release_all().
//
//   * Rung 4b (try_evict). Eviction moves rows *inside* the live K and V
//     buffers, so it needs the turn like a move (a step reading a slot while its
//     rows shift would read garbage), and it must also wait for what the engine
//     queued between steps on other streams (reading a finished sequence's KV
//     out): the home stream waits on an event recorded on every stream a step
//     ran on before the first compaction. Then, per slot and attention layer,
//     the kept rows of K and V move to the front of the slot's stripe
//     (compact_rows_async, stream-ordered on home), the generation is bumped
//     (rows moved: graphs recapture, other streams wait for home), and an
//     optional shrink reshapes exactly like try_resize - after the compaction
//     in stream order, so the copy into the smaller buffers carries the kept
//     rows, and the old buffers retire behind the fence: memory comes back
//     without anything freed under a reader.
//
// Memory pools are optional. The first bind asks the backend how `device`
// allocates (device_backend::device_alloc_mode) and keeps the answer for the
// owner's life (memory_mode(), tally().mode; "unknown" before the first bind):
//   stream_ordered  buffers come from alloc_async on the home stream and go back
//                   with free_async behind the retire fence;
//   plain           (no pools: some drivers, MIG/vGPU setups, or turned off)
//                   buffers come from alloc_plain (cudaMalloc) and are freed with
//                   free_plain (cudaFree) only once the retire fence's event has
//                   completed, and only off the step path, because cudaFree waits
//                   for the whole device (retire_list.hpp). The owner never relies
//                   on that wait. In this mode retired device memory stays
//                   "retiring" until the next bind/resize/release_all or reap():
//                   an engine that rarely binds calls reap() between steps.
//
// Moves keep live slots: a resize copies, stream-ordered on the home stream,
// each slot's stripe that exists in both layouts (slots beyond a smaller
// capacity, and tokens beyond a smaller max_seq, are dropped: the engine
// releases those first). The copy reads the old buffer, which is one more
// reason the old buffer is retired and not freed.
//
// Threads: every call may come from any thread. The turn serialises all
// mutation; tally() and generation() are lock-free reads. A step_token may be
// polled from a thread other than the one that began it.
//
// Destruction: call release_all() and let reap() empty the retire list first
// (fake: run the timeline). The destructor retires what is still live and
// never blocks; pinned memory whose fence has not completed is then leaked on
// purpose (see retire_list.hpp). Destroying the owner while a step_token is
// alive is undefined.
//
//   pnmem::cuda::buffer_owner owner{backend, {.device = 0, .home_stream = s, .shape = shape}};
//   auto b = owner.try_bind({.slots = 8, .max_seq_tokens = 4096}, plan);  // b.bound_slots <= 8
//   auto step = owner.try_step_begin(s);
//   if (step.status.ok()) {
//     auto& t = *step.token;
//     // enqueue kernels on s using t.buffers(); launch a graph only if
//     // owner.graph_for_launch(t, g) == graph_status::launch
//     while (owner.poll(t) == step_state::running) { /* do other work */ }
//   }
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "pnmem/cost_model.hpp"
#include "pnmem/cuda/decode_shape.hpp"
#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/cuda/die_tally.hpp"
#include "pnmem/cuda/event_pool.hpp"
#include "pnmem/cuda/gpu_turn.hpp"
#include "pnmem/cuda/retire_list.hpp"
#include "pnmem/engine/fleet_load.hpp"
#include "pnmem/ladder.hpp"

namespace pnmem::cuda {


struct owner_options {
  int device = 0;
  stream_handle home_stream;  // the model's decode stream: allocations, copies and frees go here
  model_shape shape;
  kv_format configured_kv = kv_format::fp32;  // the operator's choice; rung 4a may force Q4
  // The die feed's tally for `device` (die_feed::tally(device)), or null. The
  // owner adds device bytes on allocation and moves them to retiring on retire.
  die_tally* tally = nullptr;
};

struct slot_request {
  int slots = 1;
  int max_seq_tokens = 1;
};

enum class owner_errc : std::uint8_t {
  ok,
  busy,              // try_*: the turn is held (a step in flight, or a bind/resize) or others queue for it
  timed_out,         // the deadline passed while waiting for the turn
  invalid_argument,  // slots < 1, max_seq_tokens < 1, no home stream
  not_bound,         // step_begin before any successful bind
  device_error,      // see owner_status::device; the owner's previous state is intact
};

struct owner_status {
  owner_errc code = owner_errc::ok;
  device_status device;  // set when code == device_error
  constexpr bool ok() const noexcept { return code == owner_errc::ok; }
};

struct bind_result {
  owner_status status;
  int requested_slots = 0;
  int bound_slots = 0;  // min(requested, ladder ceiling) on success; the scheduler queues the rest
  int slot_capacity = 0;
  int max_seq_tokens = 0;
  kv_format kv = kv_format::fp32;
  bool moved = false;  // buffers were reallocated (generation bumped)
  std::uint64_t generation = 0;
};

// Where the buffers are now. Valid while the caller holds the turn (inside a
// step, via step_token::buffers()); the next move invalidates every pointer.
struct decode_buffers {
  std::uint64_t generation = 0;
  int bound_slots = 0;
  int slot_capacity = 0;
  int max_seq_tokens = 0;
  kv_format kv = kv_format::fp32;
  std::span<void* const> k, v;           // per attention layer, kv_layer_bytes each
  std::span<void* const> sink, window;   // per attention layer, Q4 only (empty in fp32)
  std::span<void* const> conv, ssm;      // per SSM layer
  void* scratch = nullptr;
  std::uint64_t scratch_bytes = 0;
  void* staging = nullptr;  // pinned host
  std::uint64_t staging_bytes = 0;
};

struct owner_tally {
  std::uint64_t device_used_bytes = 0;  // live device buffers
  std::uint64_t pinned_used_bytes = 0;  // live staging arena
  std::uint64_t retiring_bytes = 0;     // moved, waiting for their fence: neither used nor free
  std::uint64_t kv_bytes = 0;           // of device_used_bytes, the KV cache (K, V, Q4 sink and window)
  std::uint64_t kv_bound_bytes = 0;     // of kv_bytes, the bound slots' share
  std::uint64_t generation = 0;
  alloc_mode mode = alloc_mode::unknown;  // how device buffers are allocated (unknown before the first bind)
};

// The owner's KV cache in a fleet_load (engine/fleet_load.hpp), for the model-server protocol's
// KVCacheUtilization: the bound slots' KV bytes over the ring's. Call once per owner (per model):
// their bytes add up.
inline void add_kv(fleet_load& load, const owner_tally& t) noexcept {
  load.kv_used_bytes += t.kv_bound_bytes;
  load.kv_capacity_bytes += t.kv_bytes;
}

// One slot's eviction (rung 4b): which rows of its K and V every attention layer keeps.
// The positions come from select_keep_async (pnmem/cuda/eviction_ops.hpp) or the engine.
struct slot_keep {
  int slot = 0;    // below the ring's slot capacity
  int tokens = 0;  // rows the slot holds now (1 .. max_seq_tokens); every keep position is below it
  int kept = 0;    // rows every layer keeps (0 .. tokens): the slot's length afterwards
  // Device arrays of `kept` increasing positions: one per attention layer (PyramidKV picks per layer),
  // or a single one that every layer uses. Read by the device in stream order: they must stay
  // allocated until the eviction's work has run (an event on the home stream, or the next step's end).
  std::span<const std::int32_t* const> keep;
};

struct evict_result {
  owner_status status;
  int slots_compacted = 0;  // slots whose every layer's compaction was queued
  // On a device error part-way, the slot whose layers were compacted only in part (-1: none). Its rows
  // are no longer one sequence's: the engine must release it. Slots before it are compacted.
  int broken_slot = -1;
  bind_result shrink;  // the reshape after the compaction (status ok and moved false when none was asked)
  // How many device bytes smaller the decode state is after the shrink. The old buffers are retiring
  // until the fence behind them passes (tally().retiring_bytes), then free.
  std::uint64_t freed_bytes = 0;
};

// A captured graph: the engine's handle and the generation it was captured at.
struct graph_token {
  std::uint64_t generation = 0;
  std::uint64_t engine_graph = 0;  // opaque to the owner
};

enum class graph_status : std::uint8_t { launch, recapture };
enum class step_state : std::uint8_t { running, complete, device_error };

class buffer_owner;

// What marks a step finished: an event on its stream, after the stream waited
// for events on the step's other streams.
struct step_fence {
  stream_handle stream;
  std::vector<stream_handle> extra_streams;
  std::vector<event_handle> extra_events;  // one per extra stream once fenced
  event_handle done;                       // none until the first poll()
};

// One step in flight: holds the GPU turn until poll() reports completion.
// Move-only. Destroying an unfinished token (an abandoned step) fences the
// work queued so far and releases the turn; the next bind/resize/step then
// waits for that fence, exactly as if the step were still running.
class step_token {
 public:
  step_token(step_token&& o) noexcept
      : owner_(o.owner_), hold_(std::move(o.hold_)), buffers_(o.buffers_), fence_(std::move(o.fence_)) {}
  step_token& operator=(step_token&&) = delete;
  step_token(const step_token&) = delete;
  step_token& operator=(const step_token&) = delete;
  ~step_token();

  const decode_buffers& buffers() const noexcept { return buffers_; }
  stream_handle stream() const noexcept { return fence_.stream; }
  bool complete() const noexcept { return !hold_; }
  // Another stream this step queues work on (e.g. a copy stream for the DtoH
  // copies): its work becomes part of the step's completion, and it is fenced
  // when buffers retire. Call before the first poll().
  owner_status add_stream(stream_handle s);

 private:
  friend class buffer_owner;
  step_token(buffer_owner& owner, turn_hold hold, stream_handle s, const decode_buffers& b) noexcept
      : owner_(&owner), hold_(std::move(hold)), buffers_(b) {
    fence_.stream = s;
  }

  buffer_owner* owner_;
  turn_hold hold_;
  decode_buffers buffers_;
  step_fence fence_;
};

struct step_begin_result {
  owner_status status;
  std::optional<step_token> token;  // engaged iff status.ok()
};

class buffer_owner {
 public:
  using clock = gpu_turn::clock;

  buffer_owner(device_backend& backend, owner_options options);
  buffer_owner(const buffer_owner&) = delete;
  buffer_owner& operator=(const buffer_owner&) = delete;
  ~buffer_owner();

  // Ensures capacity for min(request.slots, plan.max_slots) slots of
  // request.max_seq_tokens: grows (slots or max_seq) when needed, never shrinks.
  bind_result try_bind(slot_request request, const ladder_plan& plan);
  bind_result bind(slot_request request, const ladder_plan& plan, clock::time_point deadline);

  // Reshapes to exactly min(request.slots, plan.max_slots) x max_seq_tokens,
  // shrinking too (rung 2 wants memory back). Keeps the live KV format.
  bind_result try_resize(slot_request request, const ladder_plan& plan);
  bind_result resize(slot_request request, const ladder_plan& plan, clock::time_point deadline);

  // Rung 4b: compacts each listed slot to its kept rows (every attention layer,
  // K and V), then, when `shrink_to` is given, reshapes exactly as try_resize
  // would (each kept count must fit its max_seq_tokens). The Q4 sink and window
  // buffers are not touched: a selection keeps the first and the most recent
  // tokens (keep_window at least as wide as the shape's q4 sink and window).
  // invalid_argument (nothing queued) for a slot out of range or listed twice,
  // tokens above max_seq_tokens, kept outside 0..tokens, a keep span that is
  // neither one array nor one per attention layer, or a null array. Whether to
  // evict, and how many rows, is the policy's (eviction_budget.hpp); the plan
  // here is the ceiling for the shrink, as for a resize.
  evict_result try_evict(std::span<const slot_keep> slots, std::optional<slot_request> shrink_to,
                         const ladder_plan& plan);
  evict_result evict(std::span<const slot_keep> slots, std::optional<slot_request> shrink_to,
                     const ladder_plan& plan, clock::time_point deadline);

  // Retires every buffer (the next bind allocates afresh, in the format the
  // ladder then asks for).
  owner_status try_release_all();
  owner_status release_all(clock::time_point deadline);

  // Starts a step on `stream`: reaps, sizes the staging arena, and hands out
  // the turn in a token.
  step_begin_result try_step_begin(stream_handle stream);
  step_begin_result step_begin(stream_handle stream, clock::time_point deadline);

  // Never blocks. The first call fences everything the step queued (so queue it
  // all before); once that fence completes the turn is released and the token
  // is complete. A complete token polls complete.
  step_state poll(step_token& step);

  // Graphs: only inside a step, where nothing can move.
  graph_token graph_captured(const step_token& step, std::uint64_t engine_graph) const noexcept;
  graph_status graph_for_launch(const step_token& step, const graph_token& graph) const noexcept;

  // Reaps the retire list if the turn is free (never waits). Returns batches released.
  std::size_t reap();

  owner_tally tally() const noexcept;
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  // stream_ordered or plain once the first bind asked the device; unknown before.
  alloc_mode memory_mode() const noexcept { return mode_.load(std::memory_order_acquire); }
  std::uint64_t events_created() const noexcept { return events_.created(); }

 private:
  friend class step_token;
  enum class reshape : std::uint8_t { grow, exact };
  using wait_for = std::optional<clock::time_point>;  // nullopt: try once

  struct buffer_set {
    std::vector<void*> k, v, sink, window, conv, ssm;
    void* scratch = nullptr;
    int slots = 0;
    int max_seq_tokens = 0;
    kv_format kv = kv_format::fp32;
    bool empty() const noexcept { return slots == 0; }
  };

  owner_status acquire(turn_hold& hold, wait_for deadline);
  bool pending_step_done() noexcept;
  bind_result bind_with_turn(slot_request request, const ladder_plan& plan, reshape how, wait_for deadline);
  bind_result bind_locked(slot_request request, const ladder_plan& plan, reshape how);
  owner_status allocate(buffer_set& out, int slots, int max_seq_tokens, kv_format kv);
  device_status copy_live(const buffer_set& from, const buffer_set& to);
  void retire_set(buffer_set& set);
  void retire_ptrs(std::span<const retired_buffer> buffers);
  void moved() noexcept;
  owner_status ensure_staging();
  owner_status note_stream(stream_handle s);
  step_begin_result step_begin_with(stream_handle stream, wait_for deadline);
  owner_status release_all_with(wait_for deadline);
  evict_result evict_with(std::span<const slot_keep> slots, const std::optional<slot_request>& shrink_to,
                          const ladder_plan& plan, wait_for deadline);
  bool evict_args_ok(std::span<const slot_keep> slots, const std::optional<slot_request>& shrink_to) const noexcept;
  device_status order_home_after_users() noexcept;
  device_status record_fence(step_fence& f) noexcept;
  void release_fence(step_fence& f) noexcept;
  void abandon(step_token& step) noexcept;
  decode_buffers view() const noexcept;
  void publish_tally() noexcept;

  device_backend* backend_;
  owner_options options_;
  gpu_turn turn_;
  // Everything below is touched only while holding turn_ (tally atomics aside).
  event_pool events_;
  retire_list retired_;
  buffer_set live_;
  int bound_slots_ = 0;
  void* staging_ = nullptr;
  std::uint64_t staging_bytes_ = 0;
  struct user_stream {
    std::uint64_t id = 0;
    stream_handle handle;
    std::uint64_t ready_generation = 0;  // has waited for the moves up to this generation
  };
  std::vector<user_stream> users_;  // streams steps ran on, keyed by stream_id
  std::uint64_t home_id_ = 0;
  event_handle ready_;  // recorded on home after each move; other streams wait on it
  // An abandoned step's fence: the turn is not really free until it completes.
  std::optional<step_fence> pending_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<alloc_mode> mode_{alloc_mode::unknown};  // set once, by the first bind (under the turn)
  std::atomic<std::uint64_t> device_used_bytes_{0};
  std::atomic<std::uint64_t> pinned_used_bytes_{0};
  std::atomic<std::uint64_t> kv_bytes_{0};
  std::atomic<std::uint64_t> kv_bound_bytes_{0};
};

}  // namespace pnmem::cuda
