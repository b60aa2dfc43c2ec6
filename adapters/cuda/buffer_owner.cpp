// buffer_owner.cpp - see pnmem/cuda/buffer_owner.hpp for the protocol and why.
#include "pnmem/cuda/buffer_owner.hpp"

#include <algorithm>
#include <cstddef>
#include <thread>

#include "pnmem/cuda/die_feed.hpp"

namespace pnmem::cuda {
namespace {

constexpr owner_status err(owner_errc c) noexcept { return owner_status{c, {}}; }
constexpr owner_status dev_err(device_status st) noexcept { return owner_status{owner_errc::device_error, st}; }

// How long a deadline-bound wait sleeps between queries of an abandoned step's
// fence: the GPU finishes it on its own, and event_query never blocks.
constexpr auto pending_fence_poll_interval = std::chrono::microseconds(50);

std::byte* at(void* p, std::uint64_t offset_bytes) noexcept {
  return static_cast<std::byte*>(p) + offset_bytes;
}

}  // namespace

// ---------------------------------------------------------------- step_token

step_token::~step_token() {
  if (hold_) owner_->abandon(*this);
}

owner_status step_token::add_stream(stream_handle s) {
  if (!hold_ || !s) return err(owner_errc::invalid_argument);
  if (fence_.done) return err(owner_errc::invalid_argument);  // already fenced by poll()
  if (s == fence_.stream || std::find(fence_.extra_streams.begin(), fence_.extra_streams.end(), s) !=
                                fence_.extra_streams.end())
    return {};
  if (const owner_status st = owner_->note_stream(s); !st.ok()) return st;
  fence_.extra_streams.push_back(s);
  // record_fence() is noexcept: make its push_back unable to throw.
  fence_.extra_events.reserve(fence_.extra_streams.size());
  return {};
}

// ---------------------------------------------------------------- buffer_owner

buffer_owner::buffer_owner(device_backend& backend, owner_options options)
    : backend_(&backend), options_(options), events_(backend, options.device), retired_(backend, events_, options.tally) {
  if (options_.home_stream) {
    // Unknown here means "no home stream": every bind then answers invalid_argument.
    if (!backend_->stream_id(options_.home_stream, home_id_)) options_.home_stream = {};
  }
}

buffer_owner::~buffer_owner() {
  // Precondition: no step_token alive. Retire what is left; never block.
  if (!live_.empty()) retire_set(live_);
  if (staging_ != nullptr) {
    const retired_buffer r{staging_, staging_bytes_, memory_kind::pinned};
    retire_ptrs({&r, 1});
  }
  retired_.reap();
  if (pending_) {
    for (const event_handle e : pending_->extra_events) (void)backend_->event_destroy(e);
    if (pending_->done) (void)backend_->event_destroy(pending_->done);
  }
  // ready_ may still be pending on the home stream: destroying it then is
  // allowed (CUDA releases it on completion), pooling it is not needed.
  if (ready_) (void)backend_->event_destroy(ready_);
}

owner_status buffer_owner::acquire(turn_hold& hold, wait_for deadline) {
  for (;;) {
    const bool got = deadline ? turn_.acquire_until(*deadline) : turn_.try_acquire();
    if (!got) return err(deadline ? owner_errc::timed_out : owner_errc::busy);
    hold = turn_hold(turn_);
    if (pending_step_done()) return {};
    // An abandoned step is still running on the device: the turn is not free.
    hold.reset();
    if (!deadline) return err(owner_errc::busy);
    if (clock::now() >= *deadline) return err(owner_errc::timed_out);
    std::this_thread::sleep_for(pending_fence_poll_interval);
  }
}

bool buffer_owner::pending_step_done() noexcept {
  if (!pending_) return true;
  if (!pending_->done && !record_fence(*pending_)) return false;
  if (!backend_->event_query(pending_->done)) return false;
  release_fence(*pending_);
  pending_.reset();
  return true;
}

device_status buffer_owner::record_fence(step_fence& f) noexcept {
  // Extra streams fenced so far are kept: a retry continues where it failed.
  for (std::size_t i = f.extra_events.size(); i < f.extra_streams.size(); ++i) {
    event_handle e;
    if (const device_status st = events_.acquire(e); !st) return st;
    if (const device_status st = backend_->event_record(e, f.extra_streams[i]); !st) {
      events_.release(e);
      return st;
    }
    f.extra_events.push_back(e);  // capacity reserved by add_stream
    if (const device_status st = backend_->stream_wait_event(f.stream, e); !st) return st;
  }
  event_handle done;
  if (const device_status st = events_.acquire(done); !st) return st;
  if (const device_status st = backend_->event_record(done, f.stream); !st) {
    events_.release(done);
    return st;
  }
  f.done = done;
  return {};
}

void buffer_owner::release_fence(step_fence& f) noexcept {
  for (const event_handle e : f.extra_events) events_.release(e);
  f.extra_events.clear();
  events_.release(std::exchange(f.done, event_handle{}));
}

void buffer_owner::abandon(step_token& step) noexcept {
  // Still holding the turn here. Fence what was queued (a failed record is
  // retried by the next acquire) and park it: the turn stays effectively taken
  // until the GPU has finished the step.
  if (!step.fence_.done) (void)record_fence(step.fence_);
  try {
    pending_ = std::move(step.fence_);
  } catch (...) {
    // Unreachable (moving vectors does not allocate); never release the turn
    // while the step may still run.
    return;
  }
  step.hold_.reset();
}

owner_status buffer_owner::note_stream(stream_handle s) {
  std::uint64_t id = 0;
  if (const device_status st = backend_->stream_id(s, id); !st) return dev_err(st);
  const std::uint64_t gen = generation();
  auto it = std::find_if(users_.begin(), users_.end(), [id](const user_stream& u) { return u.id == id; });
  if (it == users_.end()) {
    users_.push_back(user_stream{id, s, 0});
    it = users_.end() - 1;
  }
  it->handle = s;
  // Moves allocate and copy on the home stream; work on any other stream must
  // not start before that (a device-side wait, the host does not block).
  if (id != home_id_ && ready_ && it->ready_generation < gen) {
    if (const device_status st = backend_->stream_wait_event(s, ready_); !st) return dev_err(st);
  }
  it->ready_generation = gen;
  return {};
}

owner_status buffer_owner::allocate(buffer_set& out, int slots, int max_seq_tokens, kv_format kv) {
  const model_shape& m = options_.shape;
  out = buffer_set{};
  out.slots = slots;
  out.max_seq_tokens = max_seq_tokens;
  out.kv = kv;
  device_status failed;
  const bool plain = memory_mode() == alloc_mode::plain;
  auto one = [&](std::vector<void*>& into, std::uint64_t bytes) {
    void* p = nullptr;
    if (failed.ok() && bytes > 0) {
      failed = plain ? backend_->alloc_plain(options_.device, static_cast<std::size_t>(bytes), p)
                     : backend_->alloc_async(options_.device, static_cast<std::size_t>(bytes), options_.home_stream, p);
    }
    into.push_back(failed.ok() ? p : nullptr);
  };
  const auto attention = static_cast<std::size_t>(std::max(0, m.attention_layers));
  const auto ssm_layers = static_cast<std::size_t>(std::max(0, m.ssm_layers));
  const std::uint64_t n = static_cast<std::uint64_t>(slots);
  for (std::size_t l = 0; l < attention; ++l) {
    one(out.k, kv_layer_bytes(m, kv, slots, max_seq_tokens));
    one(out.v, kv_layer_bytes(m, kv, slots, max_seq_tokens));
    if (kv == kv_format::q4) {
      one(out.sink, q4_sink_layer_bytes(m, kv, slots));
      one(out.window, q4_window_layer_bytes(m, kv, slots));
    }
  }
  for (std::size_t l = 0; l < ssm_layers; ++l) {
    one(out.conv, n * m.conv_state_bytes_per_slot);
    one(out.ssm, n * m.ssm_state_bytes_per_slot);
  }
  std::vector<void*> scratch;
  one(scratch, n * m.scratch_bytes_per_slot);
  out.scratch = scratch.front();
  if (failed.ok()) {
    if (options_.tally != nullptr)
      options_.tally->add_used(decode_device_bytes(m, kv, slots, max_seq_tokens));
    return {};
  }
  // Nothing has used the new buffers: a stream-ordered free on home is safe, and
  // so is a plain free at once (its device-wide wait is a failed bind's cost).
  auto drop = [&](std::vector<void*>& v) {
    for (void* p : v) {
      if (p == nullptr) continue;
      if (plain) {
        (void)backend_->free_plain(p);
      } else {
        (void)backend_->free_async(p, options_.home_stream);
      }
    }
  };
  drop(out.k), drop(out.v), drop(out.sink), drop(out.window), drop(out.conv), drop(out.ssm), drop(scratch);
  out = buffer_set{};
  return dev_err(failed);
}

device_status buffer_owner::copy_live(const buffer_set& from, const buffer_set& to) {
  // Same format always (a live cache is never converted). Slot-major stripes:
  // slot s of a buffer sized per slot starts at s * (bytes per slot).
  const model_shape& m = options_.shape;
  const int slots = std::min(from.slots, to.slots);
  auto copy = [&](void* dst, const void* src, std::uint64_t bytes) -> device_status {
    if (dst == nullptr || src == nullptr || bytes == 0) return {};
    return backend_->copy_async(dst, src, static_cast<std::size_t>(bytes), options_.home_stream);
  };
  // Buffers whose per-slot size does not depend on max_seq: one prefix copy.
  auto prefix = [&](const std::vector<void*>& a, const std::vector<void*>& b, std::uint64_t per_slot) {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
      if (const device_status st = copy(b[i], a[i], per_slot * static_cast<std::uint64_t>(slots)); !st) return st;
    return device_status{};
  };
  const std::uint64_t row = kv_row_bytes(m, from.kv);
  const auto from_seq = static_cast<std::uint64_t>(from.max_seq_tokens);
  const auto to_seq = static_cast<std::uint64_t>(to.max_seq_tokens);
  const std::uint64_t keep_tokens = std::min(from_seq, to_seq);
  // K and V: slot s's stripe is max_seq rows; keep its first min(old, new) rows.
  auto kv_copy = [&](void* dst, void* src) -> device_status {
    if (from_seq == to_seq) return copy(dst, src, row * from_seq * static_cast<std::uint64_t>(slots));
    for (std::uint64_t s = 0; s < static_cast<std::uint64_t>(slots); ++s)
      if (const device_status st = copy(at(dst, s * to_seq * row), at(src, s * from_seq * row), keep_tokens * row); !st)
        return st;
    return {};
  };
  for (std::size_t l = 0; l < from.k.size() && l < to.k.size(); ++l) {
    if (const device_status st = kv_copy(to.k[l], from.k[l]); !st) return st;
    if (const device_status st = kv_copy(to.v[l], from.v[l]); !st) return st;
  }
  const std::uint64_t sink_per_slot = q4_sink_layer_bytes(m, from.kv, 1);
  const std::uint64_t window_per_slot = q4_window_layer_bytes(m, from.kv, 1);
  if (const device_status st = prefix(from.sink, to.sink, sink_per_slot); !st) return st;
  if (const device_status st = prefix(from.window, to.window, window_per_slot); !st) return st;
  if (const device_status st = prefix(from.conv, to.conv, m.conv_state_bytes_per_slot); !st) return st;
  if (const device_status st = prefix(from.ssm, to.ssm, m.ssm_state_bytes_per_slot); !st) return st;
  return {};  // scratch holds one step's activations: nothing to keep
}

void buffer_owner::retire_ptrs(std::span<const retired_buffer> buffers) {
  std::vector<stream_handle> others;
  others.reserve(users_.size());
  for (const user_stream& u : users_) others.push_back(u.handle);
  // A failed fence leaves the batch unfenced on the list (retried by reap):
  // nothing is freed early, which is all that matters here.
  (void)retired_.retire(options_.home_stream, others, buffers);
}

void buffer_owner::retire_set(buffer_set& set) {
  const model_shape& m = options_.shape;
  std::vector<retired_buffer> out;
  // Freed by the call matching their allocation (allocate()): the mode never changes once set.
  const memory_kind kind = memory_mode() == alloc_mode::plain ? memory_kind::device_plain : memory_kind::device;
  auto add = [&](const std::vector<void*>& v, std::uint64_t bytes) {
    for (void* p : v)
      if (p != nullptr) out.push_back({p, bytes, kind});
  };
  const std::uint64_t n = static_cast<std::uint64_t>(set.slots);
  add(set.k, kv_layer_bytes(m, set.kv, set.slots, set.max_seq_tokens));
  add(set.v, kv_layer_bytes(m, set.kv, set.slots, set.max_seq_tokens));
  add(set.sink, q4_sink_layer_bytes(m, set.kv, set.slots));
  add(set.window, q4_window_layer_bytes(m, set.kv, set.slots));
  add(set.conv, n * m.conv_state_bytes_per_slot);
  add(set.ssm, n * m.ssm_state_bytes_per_slot);
  if (set.scratch != nullptr) out.push_back({set.scratch, n * m.scratch_bytes_per_slot, kind});
  retire_ptrs(out);
  set = buffer_set{};
}

void buffer_owner::moved() noexcept {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Other streams' next step waits for this point of the home stream (note_stream).
  if (!ready_ && !events_.acquire(ready_)) ready_ = {};
  if (ready_ && !backend_->event_record(ready_, options_.home_stream)) {
    // Cannot order other streams after the move: stop using ready_, so that
    // note_stream fails loudly rather than skipping the wait. (Home-stream
    // steps stay correct; other streams get device_error from step_begin.)
    (void)backend_->event_destroy(std::exchange(ready_, event_handle{}));
  }
  publish_tally();
}

bind_result buffer_owner::bind_locked(slot_request request, const ladder_plan& plan, reshape how) {
  bind_result r;
  r.requested_slots = request.slots;
  if (request.slots < 1 || request.max_seq_tokens < 1 || !options_.home_stream) {
    r.status = err(owner_errc::invalid_argument);
    return r;
  }
  retired_.reap();
  // Memory pools are optional: ask the device once, at the first bind, and keep
  // the answer (buffers are freed by the call matching their allocation).
  if (memory_mode() == alloc_mode::unknown) {
    alloc_mode m = alloc_mode::unknown;
    device_status st = backend_->device_alloc_mode(options_.device, m);
    if (st && m == alloc_mode::unknown) st = device_status{device_errc::failure, 0};
    if (!st) {
      r.status = dev_err(st);
      r.generation = generation();
      return r;
    }
    mode_.store(m, std::memory_order_release);
  }
  // Hazard 4: the ceiling is the plan now, not the one at scheduler creation,
  // and going over it means "fewer slots now", never "fail".
  const int ceiling = std::max(1, plan.max_slots);
  const int bound = std::min(request.slots, ceiling);

  int slots = bound;
  int seq = request.max_seq_tokens;
  kv_format kv = plan.force_kv_q4 ? kv_format::q4 : options_.configured_kv;
  if (!live_.empty()) {
    kv = live_.kv;  // rung 4a acts at allocation only
    if (how == reshape::grow) {
      slots = std::max(slots, live_.slots);
      seq = std::max(seq, live_.max_seq_tokens);
    }
  }
  if (live_.empty() || slots != live_.slots || seq != live_.max_seq_tokens) {
    buffer_set fresh;
    if (const owner_status st = allocate(fresh, slots, seq, kv); !st.ok()) {
      r.status = st;
      r.slot_capacity = live_.slots;
      r.max_seq_tokens = live_.max_seq_tokens;
      r.kv = live_.kv;
      r.generation = generation();
      return r;
    }
    if (!live_.empty()) {
      if (const device_status st = copy_live(live_, fresh); !st) {
        // Copies may already be queued against both sets: retire the new one
        // too (never free it) and keep the old state.
        retire_set(fresh);
        r.status = dev_err(st);
        r.slot_capacity = live_.slots;
        r.max_seq_tokens = live_.max_seq_tokens;
        r.kv = live_.kv;
        r.generation = generation();
        return r;
      }
      retire_set(live_);
    }
    live_ = std::move(fresh);
    r.moved = true;
    moved();
  }
  bound_slots_ = bound;
  publish_tally();  // the bound slots' share of the KV
  r.bound_slots = bound;
  r.slot_capacity = live_.slots;
  r.max_seq_tokens = live_.max_seq_tokens;
  r.kv = live_.kv;
  r.generation = generation();
  return r;
}

bind_result buffer_owner::bind_with_turn(slot_request request, const ladder_plan& plan, reshape how,
                                         wait_for deadline) {
  turn_hold hold;
  if (const owner_status st = acquire(hold, deadline); !st.ok()) {
    bind_result r;
    r.status = st;
    r.requested_slots = request.slots;
    r.generation = generation();
    return r;
  }
  return bind_locked(request, plan, how);
}

bind_result buffer_owner::try_bind(slot_request request, const ladder_plan& plan) {
  return bind_with_turn(request, plan, reshape::grow, std::nullopt);
}
bind_result buffer_owner::bind(slot_request request, const ladder_plan& plan, clock::time_point deadline) {
  return bind_with_turn(request, plan, reshape::grow, deadline);
}
bind_result buffer_owner::try_resize(slot_request request, const ladder_plan& plan) {
  return bind_with_turn(request, plan, reshape::exact, std::nullopt);
}
bind_result buffer_owner::resize(slot_request request, const ladder_plan& plan, clock::time_point deadline) {
  return bind_with_turn(request, plan, reshape::exact, deadline);
}

owner_status buffer_owner::release_all_with(wait_for deadline) {
  turn_hold hold;
  if (const owner_status st = acquire(hold, deadline); !st.ok()) return st;
  retired_.reap();
  const bool any = !live_.empty() || staging_ != nullptr;
  if (!live_.empty()) retire_set(live_);
  if (staging_ != nullptr) {
    const retired_buffer r{staging_, staging_bytes_, memory_kind::pinned};
    retire_ptrs({&r, 1});
    staging_ = nullptr;
    staging_bytes_ = 0;
  }
  bound_slots_ = 0;
  if (any) moved();
  return {};
}

owner_status buffer_owner::try_release_all() { return release_all_with(std::nullopt); }
owner_status buffer_owner::release_all(clock::time_point deadline) { return release_all_with(deadline); }

// ---------------------------------------------------------------- rung 4b

bool buffer_owner::evict_args_ok(std::span<const slot_keep> slots,
                                 const std::optional<slot_request>& shrink_to) const noexcept {
  if (shrink_to && (shrink_to->slots < 1 || shrink_to->max_seq_tokens < 1)) return false;
  const auto layers = static_cast<std::size_t>(std::max(0, options_.shape.attention_layers));
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const slot_keep& k = slots[i];
    if (k.slot < 0 || k.slot >= live_.slots) return false;
    if (k.tokens < 1 || k.tokens > live_.max_seq_tokens || k.kept < 0 || k.kept > k.tokens) return false;
    if (shrink_to && k.kept > shrink_to->max_seq_tokens) return false;
    if (k.keep.size() != 1 && k.keep.size() != layers) return false;
    if (k.kept > 0 && std::find(k.keep.begin(), k.keep.end(), nullptr) != k.keep.end()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (slots[j].slot == k.slot) return false;
  }
  return true;
}

device_status buffer_owner::order_home_after_users() noexcept {
  // What the engine queued between steps on a stream a step ran on (a finished sequence's KV read
  // out) must be done before rows move under it. One pooled event per stream, released at once: a
  // wait already queued is not affected by the event's next record.
  for (const user_stream& u : users_) {
    if (u.id == home_id_) continue;
    event_handle e;
    if (const device_status st = events_.acquire(e); !st) return st;
    device_status st = backend_->event_record(e, u.handle);
    if (st) st = backend_->stream_wait_event(options_.home_stream, e);
    events_.release(e);
    if (!st) return st;
  }
  return {};
}

evict_result buffer_owner::evict_with(std::span<const slot_keep> slots, const std::optional<slot_request>& shrink_to,
                                      const ladder_plan& plan, wait_for deadline) {
  evict_result r;
  turn_hold hold;
  if (r.status = acquire(hold, deadline); !r.status.ok()) return r;
  if (live_.empty()) {
    r.status = err(owner_errc::not_bound);
    return r;
  }
  if (!evict_args_ok(slots, shrink_to)) {
    r.status = err(owner_errc::invalid_argument);
    return r;
  }
  retired_.reap();
  if (!slots.empty()) {
    if (const device_status st = order_home_after_users(); !st) {
      r.status = dev_err(st);  // nothing moved yet
      return r;
    }
    const std::uint64_t row = kv_row_bytes(options_.shape, live_.kv);
    const auto stripe = static_cast<std::uint64_t>(live_.max_seq_tokens) * row;
    bool queued = false;
    for (const slot_keep& k : slots) {
      // Keeping every row, or none (the slot's length becomes 0), moves nothing.
      if (k.kept == k.tokens || k.kept == 0) {
        ++r.slots_compacted;
        continue;
      }
      bool slot_started = false;
      for (std::size_t l = 0; l < live_.k.size(); ++l) {
        const std::int32_t* keep = k.keep.size() == 1 ? k.keep[0] : k.keep[l];
        for (void* buffer : {live_.k[l], live_.v[l]}) {
          const row_compaction c{at(buffer, static_cast<std::uint64_t>(k.slot) * stripe), static_cast<std::size_t>(row),
                                 k.tokens, keep, k.kept};
          if (const device_status st = backend_->compact_rows_async(c, options_.home_stream); !st) {
            r.status = dev_err(st);
            r.broken_slot = slot_started ? k.slot : -1;
            if (queued) moved();  // rows moved already: graphs and other streams must know
            return r;
          }
          slot_started = queued = true;
        }
      }
      ++r.slots_compacted;
    }
    // Rows moved: captured graphs recapture (their slot lengths changed), and a step on another
    // stream waits for the compaction on home (note_stream waits on ready_).
    if (queued) moved();
  }
  r.shrink.status = {};
  r.shrink.slot_capacity = live_.slots;
  r.shrink.max_seq_tokens = live_.max_seq_tokens;
  r.shrink.bound_slots = bound_slots_;
  r.shrink.kv = live_.kv;
  r.shrink.generation = generation();
  if (shrink_to) {
    const std::uint64_t before = device_used_bytes_.load(std::memory_order_relaxed);
    r.shrink = bind_locked(*shrink_to, plan, reshape::exact);
    r.status = r.shrink.status;
    const std::uint64_t after = device_used_bytes_.load(std::memory_order_relaxed);
    if (r.shrink.moved && before > after) r.freed_bytes = before - after;
  }
  return r;
}

evict_result buffer_owner::try_evict(std::span<const slot_keep> slots, std::optional<slot_request> shrink_to,
                                     const ladder_plan& plan) {
  return evict_with(slots, shrink_to, plan, std::nullopt);
}
evict_result buffer_owner::evict(std::span<const slot_keep> slots, std::optional<slot_request> shrink_to,
                                 const ladder_plan& plan, clock::time_point deadline) {
  return evict_with(slots, shrink_to, plan, deadline);
}

owner_status buffer_owner::ensure_staging() {
  // Hazard 3: only ever called from step_begin, with the turn held, i.e. after
  // the previous step's completion event completed: no copy of an earlier
  // step can still be landing in the arena we replace.
  const std::uint64_t need = staging_bytes_for(options_.shape, live_.slots);
  if (need <= staging_bytes_) return {};
  void* p = nullptr;
  if (const device_status st = backend_->alloc_pinned(static_cast<std::size_t>(need), p); !st) return dev_err(st);
  if (staging_ != nullptr) {
    const retired_buffer r{staging_, staging_bytes_, memory_kind::pinned};
    retire_ptrs({&r, 1});
  }
  staging_ = p;
  staging_bytes_ = need;
  moved();  // graphs may hold the staging address in their copy nodes
  return {};
}

step_begin_result buffer_owner::step_begin_with(stream_handle stream, wait_for deadline) {
  step_begin_result r;
  if (!stream) {
    r.status = err(owner_errc::invalid_argument);
    return r;
  }
  turn_hold hold;
  if (r.status = acquire(hold, deadline); !r.status.ok()) return r;
  retired_.reap(retire_list::reap_scope::step_path);  // no pinned frees on the step path
  if (live_.empty()) {
    r.status = err(owner_errc::not_bound);
    return r;
  }
  if (r.status = ensure_staging(); !r.status.ok()) return r;
  if (r.status = note_stream(stream); !r.status.ok()) return r;
  publish_tally();
  r.token.emplace(step_token(*this, std::move(hold), stream, view()));
  return r;
}

step_begin_result buffer_owner::try_step_begin(stream_handle stream) { return step_begin_with(stream, std::nullopt); }
step_begin_result buffer_owner::step_begin(stream_handle stream, clock::time_point deadline) {
  return step_begin_with(stream, deadline);
}

step_state buffer_owner::poll(step_token& step) {
  if (step.complete()) return step_state::complete;
  if (!step.fence_.done && !record_fence(step.fence_)) return step_state::device_error;
  const device_status st = backend_->event_query(step.fence_.done);
  if (st.code == device_errc::not_ready) return step_state::running;
  if (!st) return step_state::device_error;
  release_fence(step.fence_);
  retired_.reap(retire_list::reap_scope::step_path);  // still holding the turn; no pinned frees here
  publish_tally();
  step.hold_.reset();
  return step_state::complete;
}

graph_token buffer_owner::graph_captured(const step_token& step, std::uint64_t engine_graph) const noexcept {
  return graph_token{step.buffers_.generation, engine_graph};
}

graph_status buffer_owner::graph_for_launch(const step_token& step, const graph_token& graph) const noexcept {
  // Only a step holding this owner's turn may launch: then nothing can move
  // between this answer and the launch.
  if (step.owner_ != this || step.complete()) return graph_status::recapture;
  return graph.generation == generation() ? graph_status::launch : graph_status::recapture;
}

std::size_t buffer_owner::reap() {
  turn_hold hold;
  if (!acquire(hold, std::nullopt).ok()) return 0;
  const std::size_t n = retired_.reap();
  publish_tally();
  return n;
}

decode_buffers buffer_owner::view() const noexcept {
  const model_shape& m = options_.shape;
  decode_buffers b;
  b.generation = generation();
  b.bound_slots = bound_slots_;
  b.slot_capacity = live_.slots;
  b.max_seq_tokens = live_.max_seq_tokens;
  b.kv = live_.kv;
  b.k = live_.k;
  b.v = live_.v;
  b.sink = live_.sink;
  b.window = live_.window;
  b.conv = live_.conv;
  b.ssm = live_.ssm;
  b.scratch = live_.scratch;
  b.scratch_bytes = static_cast<std::uint64_t>(live_.slots) * m.scratch_bytes_per_slot;
  b.staging = staging_;
  b.staging_bytes = staging_bytes_;
  return b;
}

void buffer_owner::publish_tally() noexcept {
  const std::uint64_t dev =
      live_.empty() ? 0 : decode_device_bytes(options_.shape, live_.kv, live_.slots, live_.max_seq_tokens);
  device_used_bytes_.store(dev, std::memory_order_relaxed);
  pinned_used_bytes_.store(staging_bytes_, std::memory_order_relaxed);
  // Every slot holds a whole window: the bound slots' share of the ring's KV is theirs.
  const model_shape& m = options_.shape;
  const std::uint64_t kv =
      live_.empty() ? 0
                    : static_cast<std::uint64_t>(std::max(0, m.attention_layers)) *
                          (2 * kv_layer_bytes(m, live_.kv, live_.slots, live_.max_seq_tokens) +
                           q4_sink_layer_bytes(m, live_.kv, live_.slots) + q4_window_layer_bytes(m, live_.kv, live_.slots));
  const std::uint64_t bound = live_.empty() ? 0 : kv / static_cast<std::uint64_t>(live_.slots) *
                                                      static_cast<std::uint64_t>(std::min(bound_slots_, live_.slots));
  kv_bytes_.store(kv, std::memory_order_relaxed);
  kv_bound_bytes_.store(bound, std::memory_order_relaxed);
}

owner_tally buffer_owner::tally() const noexcept {
  owner_tally t;
  t.device_used_bytes = device_used_bytes_.load(std::memory_order_relaxed);
  t.pinned_used_bytes = pinned_used_bytes_.load(std::memory_order_relaxed);
  t.retiring_bytes = retired_.retiring_bytes();
  t.kv_bytes = kv_bytes_.load(std::memory_order_relaxed);
  t.kv_bound_bytes = kv_bound_bytes_.load(std::memory_order_relaxed);
  t.generation = generation();
  t.mode = memory_mode();
  return t;
}

}  // namespace pnmem::cuda
