// fake_backend.cpp - see pnmem/cuda/fake_backend.hpp.
#include "pnmem/cuda/fake_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <utility>
#include <vector>

namespace pnmem::cuda {

namespace {

// CUDA allocations are at least 256-byte aligned; so are the fake's, so an owner
// that relies on it (vectorised kernels do) is tested as it will run.
constexpr std::align_val_t block_alignment{256};

std::byte* allocate_storage(std::size_t bytes) noexcept {
  auto* p = static_cast<std::byte*>(::operator new[](bytes, block_alignment, std::nothrow));
  if (p != nullptr) std::memset(p, 0, bytes);  // deterministic contents (cudaMalloc's are garbage)
  return p;
}

constexpr device_status status(device_errc e) noexcept { return device_status{e, 0}; }

std::uintptr_t addr(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

std::string hex(const void* p) {
  char buf[2 + 2 * sizeof(void*) + 1];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr(p)));
  return buf;
}

std::string_view kind_name(std::uint8_t k) noexcept {
  constexpr std::string_view names[] = {"kernel",      "copy",           "free_async",  "event_record",
                                        "stream_wait_event", "alloc_async", "observation_scores", "select_keep",
                                        "compact_rows"};
  return k < std::size(names) ? names[k] : "op";
}

bool overlaps(std::uintptr_t a, std::size_t a_bytes, std::uintptr_t b, std::size_t b_bytes) noexcept {
  const std::size_t a_len = a_bytes == 0 ? 1 : a_bytes;
  const std::size_t b_len = b_bytes == 0 ? 1 : b_bytes;
  return a < b + b_len && b < a + a_len;
}

}  // namespace

void fake_backend::storage_delete::operator()(std::byte* p) const noexcept {
  ::operator delete[](p, block_alignment);
}

fake_backend::fake_backend(fake_options options) : options_(options) {
  const auto n = static_cast<std::size_t>(options_.devices > 0 ? options_.devices : 0);
  used_by_others_.assign(n, options_.used_by_others_bytes);
  live_device_.assign(n, 0);
  retiring_.assign(n, 0);
}

fake_backend::~fake_backend() = default;

// --- helpers (mu_ held) ---

bool fake_backend::valid_device(int device) const noexcept { return device >= 0 && device < options_.devices; }

fake_backend::stream* fake_backend::find_stream(stream_handle s) noexcept {
  const auto it = streams_.find(s.value);
  return it == streams_.end() || it->second.destroyed ? nullptr : &it->second;
}

fake_backend::event* fake_backend::find_event(event_handle e) noexcept {
  const auto it = events_.find(e.value);
  return it == events_.end() ? nullptr : &it->second;
}

bool fake_backend::op_complete(std::uint64_t op_id) const noexcept {
  return op_id < next_op_id_ && pending_.count(op_id) == 0;
}

const fake_backend::block* fake_backend::find_block(const void* p, std::size_t bytes,
                                                    use_check& result) const noexcept {
  const std::uintptr_t a = addr(p);
  auto it = blocks_.upper_bound(a);
  if (it == blocks_.begin()) {
    result = use_check::unknown;
    return nullptr;
  }
  --it;
  const block& b = it->second;
  if (a >= it->first + b.bytes) {
    result = use_check::unknown;
    return nullptr;
  }
  if (bytes > b.bytes - (a - it->first)) {
    result = use_check::out_of_bounds;
    return &b;
  }
  result = b.state == block_state::live ? use_check::ok
           : b.state == block_state::retiring ? use_check::retiring
                                               : use_check::freed;
  return &b;
}

bool fake_backend::registered_host(const void* p, std::size_t bytes) const noexcept {
  const std::uintptr_t a = addr(p);
  auto it = host_.upper_bound(a);
  if (it == host_.begin()) return false;
  --it;
  return a >= it->first && a - it->first < it->second && bytes <= it->second - (a - it->first);
}

std::string fake_backend::describe(const stream& st, const op& o) const {
  return "op#" + std::to_string(o.id) + " (" + std::string(kind_name(static_cast<std::uint8_t>(o.kind))) +
         " on stream " + std::to_string(st.handle) + ")";
}

std::string fake_backend::describe(const block& b) const {
  std::string s = (b.kind == block_kind::device ? (b.plain ? "plain device allocation #" : "device allocation #")
                                                 : "pinned allocation #") +
                  std::to_string(b.id) + " (" + std::to_string(b.bytes) + " bytes";
  if (b.kind == block_kind::device) s += " on device " + std::to_string(b.device);
  s += ")";
  if (b.state == block_state::freed) {
    s += " freed at t=" + std::to_string(b.freed_at) + " by " + std::string(b.freed_by);
  } else if (b.state == block_state::retiring) {
    s += " waiting on its free_async";
  }
  return s;
}

void fake_backend::violation(std::string text) { violations_.push_back(std::move(text)); }

void fake_backend::check_use(const stream& st, const op& o, op_use& u, std::string_view when, bool retiring_ok) {
  if (u.reported) return;
  if (registered_host(u.use.ptr, u.use.bytes)) return;
  use_check r = use_check::ok;
  const block* b = find_block(u.use.ptr, u.use.bytes, r);
  if (r == use_check::ok || (r == use_check::retiring && retiring_ok)) return;
  u.reported = true;
  std::string what = "t=" + std::to_string(now_) + " " + describe(st, o) + " " + std::string(when) + ": " +
                     (u.use.writes ? "writes " : "reads ") + hex(u.use.ptr) + " +" + std::to_string(u.use.bytes) +
                     " bytes: ";
  switch (r) {
    case use_check::retiring: what += "use queued after its free_async, in " + describe(*b); break;
    case use_check::freed: what += "use of freed memory, in " + describe(*b); break;
    case use_check::out_of_bounds: what += "runs past the end of " + describe(*b); break;
    case use_check::unknown: what += "not inside any allocation or registered host memory"; break;
    case use_check::ok: break;
  }
  violation(std::move(what));
}

void fake_backend::check_races(const stream& st, const op& o) {
  // The first buffer of `x` that conflicts with one of `y` (overlap, one side
  // writes), as {x's, y's}; an op touches its uses, or the block an alloc/free
  // takes or gives back.
  const auto conflict = [](const op& x, const op& y) -> std::optional<std::pair<buffer_use, buffer_use>> {
    const auto each = [](const op& z, const auto& f) {
      for (const op_use& u : z.uses)
        if (f(u.use)) return true;
      return z.footprint.ptr != nullptr && f(z.footprint);
    };
    std::optional<std::pair<buffer_use, buffer_use>> hit;
    each(x, [&](const buffer_use& a) {
      return each(y, [&](const buffer_use& b) {
        if (!(a.writes || b.writes) || !overlaps(addr(a.ptr), a.bytes, addr(b.ptr), b.bytes)) return false;
        hit.emplace(a, b);
        return true;
      });
    });
    return hit;
  };
  if (o.uses.empty() && o.footprint.ptr == nullptr) return;  // records and waits touch no memory
  for (const auto& [h, other] : streams_) {
    if (h == st.handle) continue;  // one stream runs in order
    const auto known = st.clock.find(h);
    const std::uint64_t ordered_up_to = known == st.clock.end() ? 0 : known->second;
    for (const op& a : other.queue) {
      if (a.seq <= ordered_up_to) continue;  // a wait on an event recorded after `a` orders it first
      const auto hit = conflict(o, a);  // one report per pair of ops
      if (!hit) continue;
      const auto& [mine, theirs] = *hit;
      violation("t=" + std::to_string(now_) + " " + describe(st, o) + " when queued: races with " +
                describe(other, a) + (a.started ? ", running" : ", still queued") +
                ", which no event wait orders before it: " + (mine.writes ? "writes " : "reads ") +
                hex(mine.ptr) + " +" + std::to_string(mine.bytes) + " bytes while it " +
                (theirs.writes ? "writes " : "reads ") + hex(theirs.ptr) + " +" + std::to_string(theirs.bytes) +
                " bytes");
    }
  }
}

std::uint64_t fake_backend::enqueue(stream& st, op o) {
  o.id = next_op_id_++;
  o.seq = ++st.clock[st.handle];
  pending_.insert(o.id);
  for (op_use& u : o.uses) check_use(st, o, u, "when queued", false);
  if (options_.report_races) check_races(st, o);
  const std::uint64_t id = o.id;
  st.queue.push_back(std::move(o));
  return id;
}

void fake_backend::report_in_flight_users(const block& b, std::string_view by) {
  const std::uintptr_t base = addr(b.storage.get());
  for (auto& [h, st] : streams_) {
    for (op& o : st.queue) {
      for (op_use& u : o.uses) {
        if (u.reported || !overlaps(addr(u.use.ptr), u.use.bytes, base, b.bytes)) continue;
        u.reported = true;
        violation("t=" + std::to_string(now_) + " " + std::string(by) + " of " + hex(b.storage.get()) +
                  ": freed while in use by " + describe(st, o) + (o.started ? ", running" : ", still queued") +
                  " (" + (u.use.writes ? "writes " : "reads ") + hex(u.use.ptr) + " +" +
                  std::to_string(u.use.bytes) + " bytes), " + describe(b));
      }
    }
  }
}

void fake_backend::release_block(block& b, std::string_view by) {
  if (b.kind == block_kind::device) {
    const auto d = static_cast<std::size_t>(b.device);
    if (b.state == block_state::live) live_device_[d] -= b.bytes;
    if (b.state == block_state::retiring) retiring_[d] -= b.bytes;
  }
  b.state = block_state::freed;
  b.freed_at = now_;
  b.freed_by = by;
  std::memset(b.storage.get(), poison_byte, b.bytes);
  // A stream-ordered free has no users left on its own stream; an op elsewhere
  // that still uses the block is reported when it starts or completes.
  // free_pinned and free_plain free at once, so every op still pending is a user.
  if (b.kind == block_kind::pinned || b.plain) report_in_flight_users(b, by);
  quarantine(addr(b.storage.get()));
}

void fake_backend::quarantine(std::uintptr_t base) {
  quarantine_.push_back(base);
  quarantined_bytes_ += blocks_.at(base).bytes;
  // Over the limit: release the oldest freed blocks no pending op still points into
  // (a referenced one must stay, or its late use would go unseen).
  for (auto it = quarantine_.begin(); quarantined_bytes_ > options_.quarantine_limit_bytes && it != quarantine_.end();) {
    const block& b = blocks_.at(*it);
    bool referenced = false;
    for (const auto& [h, st] : streams_) {
      for (const op& o : st.queue) {
        for (const op_use& u : o.uses) referenced = referenced || overlaps(addr(u.use.ptr), u.use.bytes, *it, b.bytes);
      }
    }
    if (referenced) {
      ++it;
      continue;
    }
    quarantined_bytes_ -= b.bytes;
    blocks_.erase(*it);
    it = quarantine_.erase(it);
  }
}

bool fake_backend::can_start(const stream& st) const noexcept {
  if (st.queue.empty() || st.queue.front().started) return false;
  const op& o = st.queue.front();
  return o.kind != op_kind::wait || o.waits_for == 0 || op_complete(o.waits_for);
}

void fake_backend::start_op(stream& st) {
  op& o = st.queue.front();
  o.started = true;
  o.end = now_ + o.duration;
  for (op_use& u : o.uses) check_use(st, o, u, "at start", true);
}

void fake_backend::apply_effects(const op& o) {
  // Only memory the fake owns (live or quarantined) or the test registered is
  // written: a stray pointer is reported, never dereferenced.
  const auto writable = [this](const buffer_use& u) PNMEM_REQUIRES(mu_) {
    if (registered_host(u.ptr, u.bytes)) return true;
    use_check r = use_check::ok;
    const block* b = find_block(u.ptr, u.bytes, r);
    return b != nullptr && r != use_check::out_of_bounds;
  };
  switch (o.kind) {
    case op_kind::kernel:
      for (const op_use& u : o.uses) {
        if (u.use.writes && u.use.bytes > 0 && writable(u.use)) {
          std::memset(const_cast<void*>(u.use.ptr), write_tag(o.id), u.use.bytes);
        }
      }
      break;
    case op_kind::copy: {
      const buffer_use& src = o.uses[0].use;
      const buffer_use& dst = o.uses[1].use;
      if (writable(src) && writable(dst)) std::memmove(const_cast<void*>(dst.ptr), src.ptr, dst.bytes);
      break;
    }
    case op_kind::free: {
      const auto it = blocks_.find(o.free_base);
      if (it != blocks_.end() && it->second.state == block_state::retiring) release_block(it->second, "free_async");
      break;
    }
    case op_kind::observe:
    case op_kind::select:
    case op_kind::compact:
      if (std::all_of(o.uses.begin(), o.uses.end(), [&](const op_use& u) PNMEM_REQUIRES(mu_) { return writable(u.use); }))
        run_eviction_reference(o);
      break;
    case op_kind::record:
    case op_kind::wait:
    case op_kind::alloc: break;
  }
}

void fake_backend::complete_op(stream& st) {
  op& o = st.queue.front();
  for (op_use& u : o.uses) check_use(st, o, u, "at completion", true);
  // The op is done before its effects: a free_async op must not count itself as a user.
  pending_.erase(o.id);
  op done = std::move(o);
  st.queue.pop_front();
  apply_effects(done);
}

bool fake_backend::start_ready_ops() {
  bool any = false;
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& [h, st] : streams_) {
      while (can_start(st)) {
        start_op(st);
        progress = any = true;
        if (st.queue.front().duration != 0) break;
        complete_op(st);
      }
    }
  }
  return any;
}

void fake_backend::collect_finished_streams() {
  for (auto it = streams_.begin(); it != streams_.end();) {
    it = it->second.destroyed && it->second.queue.empty() ? streams_.erase(it) : std::next(it);
  }
}

void fake_backend::run_to(std::uint64_t target, bool until_idle) {
  for (;;) {
    start_ready_ops();
    std::optional<std::uint64_t> next;
    for (const auto& [h, st] : streams_) {
      if (!st.queue.empty() && st.queue.front().started) {
        const std::uint64_t end = st.queue.front().end;
        next = next ? std::min(*next, end) : end;
      }
    }
    if (!next || (!until_idle && *next > target)) {
      if (!until_idle) now_ = std::max(now_, target);
      break;
    }
    now_ = *next;
    // Every op ending now completes, streams in handle order (deterministic).
    for (auto& [h, st] : streams_) {
      if (!st.queue.empty() && st.queue.front().started && st.queue.front().end == now_) complete_op(st);
    }
  }
  collect_finished_streams();
}

// --- device_backend ---

device_status fake_backend::device_count(int& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = options_.devices > 0 ? options_.devices : 0;
  return out > 0 ? status(device_errc::ok) : status(device_errc::no_device);
}

device_status fake_backend::mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  if (!valid_device(device)) return status(device_errc::no_device);
  const auto d = static_cast<std::size_t>(device);
  const std::uint64_t total = options_.total_bytes_per_device;
  const std::uint64_t taken = used_by_others_[d] + live_device_[d] + retiring_[d];
  total_bytes = total;
  free_bytes = taken < total ? total - taken : 0;
  return status(device_errc::ok);
}

device_status fake_backend::device_uuid(int device, die_uuid& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = die_uuid{};
  if (!valid_device(device)) return status(device_errc::no_device);
  const auto d = static_cast<std::size_t>(device);
  if (d < options_.uuids.size()) {
    out = options_.uuids[d];
  } else {
    out.bytes[0] = 0xfa;
    out.bytes[15] = static_cast<std::uint8_t>(device + 1);
  }
  return status(device_errc::ok);
}

device_status fake_backend::device_alloc_mode(int device, alloc_mode& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = alloc_mode::unknown;
  if (!valid_device(device)) return status(device_errc::no_device);
  out = options_.memory_pools ? alloc_mode::stream_ordered : alloc_mode::plain;
  return status(device_errc::ok);
}

device_status fake_backend::alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = nullptr;
  if (!valid_device(device)) return status(device_errc::no_device);
  stream* st = find_stream(s);
  // cudaMallocAsync allocates from the pool of the stream's device.
  if (bytes == 0 || st == nullptr || st->device != device) return status(device_errc::invalid_value);
  // A device without memory pools: cudaMallocAsync answers cudaErrorNotSupported.
  if (!options_.memory_pools) return status(device_errc::not_supported);
  std::byte* mem = add_block(block_kind::device, device, false, bytes);
  if (mem == nullptr) return status(device_errc::out_of_memory);
  // Live at once for the lifetime checks; for the race check the allocation is
  // a point on `s`: other streams must be ordered after it before using it.
  op o;
  o.kind = op_kind::alloc;
  o.footprint = buffer_use{mem, bytes, true};
  enqueue(*st, std::move(o));
  out = mem;
  return status(device_errc::ok);
}

device_status fake_backend::free_async(void* p, stream_handle s) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  stream* st = find_stream(s);
  if (p == nullptr || st == nullptr) return status(device_errc::invalid_value);
  const std::string at = "t=" + std::to_string(now_) + " free_async(" + hex(p) + ", stream " + std::to_string(s.value) + "): ";
  block* const found = block_to_free(p, free_call::async, at);
  if (found == nullptr) return status(device_errc::invalid_value);
  block& b = *found;
  const auto d = static_cast<std::size_t>(b.device);
  live_device_[d] -= b.bytes;
  retiring_[d] += b.bytes;
  b.state = block_state::retiring;
  op o;
  o.kind = op_kind::free;
  o.free_base = addr(p);
  o.footprint = buffer_use{p, b.bytes, true};
  enqueue(*st, std::move(o));
  return status(device_errc::ok);
}

device_status fake_backend::alloc_plain(int device, std::size_t bytes, void*& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = nullptr;
  if (!valid_device(device)) return status(device_errc::no_device);
  if (bytes == 0) return status(device_errc::invalid_value);
  // cudaMalloc is not stream-ordered: usable by every stream at once, no op queued.
  out = add_block(block_kind::device, device, true, bytes);
  return status(out != nullptr ? device_errc::ok : device_errc::out_of_memory);
}

device_status fake_backend::free_plain(void* p) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  // At once, as cudaFree - but without its device-wide wait: every queued or
  // running op that still uses the block is reported (release_block).
  return free_at_once(p, free_call::plain, "free_plain");
}

device_status fake_backend::alloc_pinned(std::size_t bytes, void*& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = nullptr;
  if (bytes == 0) return status(device_errc::invalid_value);
  out = add_block(block_kind::pinned, 0, false, bytes);
  return status(out != nullptr ? device_errc::ok : device_errc::out_of_memory);
}

device_status fake_backend::free_pinned(void* p) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  return free_at_once(p, free_call::pinned, "free_pinned");
}

std::byte* fake_backend::add_block(block_kind kind, int device, bool plain, std::size_t bytes) {
  const auto d = static_cast<std::size_t>(device);
  if (kind == block_kind::device) {
    const std::uint64_t taken = used_by_others_[d] + live_device_[d] + retiring_[d];
    const std::uint64_t total = options_.total_bytes_per_device;
    if (taken > total || bytes > total - taken) return nullptr;
  }
  std::byte* mem = allocate_storage(bytes);
  if (mem == nullptr) return nullptr;
  block b;
  b.id = next_block_id_++;
  b.kind = kind;
  b.plain = plain;
  b.device = device;
  b.bytes = bytes;
  b.storage.reset(mem);
  if (kind == block_kind::device) live_device_[d] += bytes;
  blocks_.emplace(addr(mem), std::move(b));
  return mem;
}

device_status fake_backend::free_at_once(void* p, free_call call, std::string_view by) {
  if (p == nullptr) return status(device_errc::invalid_value);
  block* const b = block_to_free(p, call, "t=" + std::to_string(now_) + " " + std::string(by) + "(" + hex(p) + "): ");
  if (b == nullptr) return status(device_errc::invalid_value);
  release_block(*b, by);
  return status(device_errc::ok);
}

fake_backend::block* fake_backend::block_to_free(void* p, free_call call, const std::string& at) {
  const auto it = blocks_.find(addr(p));
  if (it == blocks_.end()) {
    violation(at + "not the start of any allocation");
    return nullptr;
  }
  block& b = it->second;
  if ((b.kind == block_kind::pinned) != (call == free_call::pinned)) {
    violation(at + (call != free_call::pinned ? std::string("pinned memory must be freed with free_pinned")
                    : b.plain             ? std::string("device memory from alloc_plain must be freed with free_plain")
                                          : std::string("device memory must be freed with free_async")));
    return nullptr;
  }
  if (b.state != block_state::live) {
    violation(at + "double free of " + describe(b));
    return nullptr;
  }
  if (call == free_call::async && b.plain) {
    violation(at + "memory from alloc_plain must be freed with free_plain: " + describe(b));
    return nullptr;
  }
  if (call == free_call::plain && !b.plain) {
    violation(at + "memory from alloc_async must be freed with free_async: " + describe(b));
    return nullptr;
  }
  return &b;
}

device_status fake_backend::stream_create(int device, stream_handle& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = {};
  if (!valid_device(device)) return status(device_errc::no_device);
  stream st;
  st.handle = next_handle_++;
  st.id = next_stream_id_++;
  st.device = device;
  ++streams_created_;
  out.value = st.handle;
  streams_.emplace(st.handle, std::move(st));
  return status(device_errc::ok);
}

device_status fake_backend::stream_destroy(stream_handle s) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  stream* st = find_stream(s);
  if (st == nullptr) return status(device_errc::invalid_value);
  // As cudaStreamDestroy: returns at once; queued work still runs.
  st->destroyed = true;
  if (st->queue.empty()) streams_.erase(s.value);
  return status(device_errc::ok);
}

device_status fake_backend::event_create(int device, event_handle& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  out = {};
  if (!valid_device(device)) return status(device_errc::no_device);
  const std::uint64_t h = next_handle_++;
  events_.emplace(h, event{device, 0, {}});
  ++events_created_;
  out.value = h;
  return status(device_errc::ok);
}

device_status fake_backend::event_destroy(event_handle e) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  // A pending record still completes in its stream; only the handle goes.
  return events_.erase(e.value) == 1 ? status(device_errc::ok) : status(device_errc::invalid_value);
}

device_status fake_backend::event_record(event_handle e, stream_handle s) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  event* ev = find_event(e);
  stream* st = find_stream(s);
  // CUDA: the event and the stream must belong to the same device.
  if (ev == nullptr || st == nullptr || ev->device != st->device) return status(device_errc::invalid_value);
  op o;
  o.kind = op_kind::record;
  ev->last_record = enqueue(*st, std::move(o));
  ev->clock = st->clock;  // what a stream waiting on this record will be ordered after
  return status(device_errc::ok);
}

device_status fake_backend::event_query(event_handle e) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  const event* ev = find_event(e);
  if (ev == nullptr) return status(device_errc::invalid_value);
  // Never recorded: complete, as cudaEventQuery says.
  return ev->last_record == 0 || op_complete(ev->last_record) ? status(device_errc::ok)
                                                               : status(device_errc::not_ready);
}

device_status fake_backend::stream_wait_event(stream_handle s, event_handle e) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  const event* ev = find_event(e);
  stream* st = find_stream(s);
  if (ev == nullptr || st == nullptr) return status(device_errc::invalid_value);
  // Waits for the event's most recent record at the time of this call (CUDA's rule).
  op o;
  o.kind = op_kind::wait;
  o.waits_for = ev->last_record;
  enqueue(*st, std::move(o));
  // Work queued on `s` from now on is ordered after everything before the record.
  if (ev->last_record != 0) {
    for (const auto& [h, seq] : ev->clock) st->clock[h] = std::max(st->clock[h], seq);
  }
  return status(device_errc::ok);
}

device_status fake_backend::stream_id(stream_handle s, std::uint64_t& out) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  const stream* st = find_stream(s);
  if (st == nullptr) return status(device_errc::invalid_value);
  out = st->id;
  return status(device_errc::ok);
}

device_status fake_backend::copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept {
  pnmem::detail::lock_guard lk(mu_);
  stream* st = find_stream(s);
  if (dst == nullptr || src == nullptr || bytes == 0 || st == nullptr) return status(device_errc::invalid_value);
  op o;
  o.kind = op_kind::copy;
  o.duration = options_.copy_ticks;
  o.uses = {op_use{buffer_use{src, bytes, false}}, op_use{buffer_use{dst, bytes, true}}};
  enqueue(*st, std::move(o));
  return status(device_errc::ok);
}

// --- rung 4b: eviction ops, run by the host reference at completion ---

void fake_backend::run_eviction_reference(const op& o) {
  switch (o.kind) {
    case op_kind::observe: {
      std::vector<float> scratch(static_cast<std::size_t>(o.observe_args.n_tokens));
      observation_scores_reference(o.observe_args, scratch.data());
      break;
    }
    case op_kind::select: {
      const auto n = static_cast<std::size_t>(o.select_args.n_tokens);
      std::vector<int> positions(static_cast<std::size_t>(kept_count(o.select_args)));
      std::vector<float> scratch(n);
      select_keep_reference(o.select_args, positions.data(), scratch.data());
      break;
    }
    case op_kind::compact:
      if (!compact_rows_reference(o.compact_args)) {
        violation("t=" + std::to_string(now_) + " op#" + std::to_string(o.id) + " (compact_rows): keep[0.." +
                  std::to_string(o.compact_args.kept) + ") is not increasing and below n_rows " +
                  std::to_string(o.compact_args.n_rows) + ": nothing moved (a kernel would scramble the stripe)");
      }
      break;
    default: break;
  }
}

device_status fake_backend::enqueue_eviction(stream_handle s, op o) {
  stream* st = find_stream(s);
  if (st == nullptr) return status(device_errc::invalid_value);
  o.duration = 1;
  enqueue(*st, std::move(o));
  return status(device_errc::ok);
}

device_status fake_backend::observation_scores_async(const observation_pooling& a, stream_handle s) noexcept {
  if (!valid(a)) return status(device_errc::invalid_value);
  pnmem::detail::lock_guard lk(mu_);
  op o;
  o.kind = op_kind::observe;
  o.observe_args = a;
  const auto n = static_cast<std::size_t>(a.n_tokens);
  o.uses = {op_use{buffer_use{a.attn, static_cast<std::size_t>(a.rows) * n * sizeof(float), false}},
            op_use{buffer_use{a.scores, n * sizeof(float), true}}};
  return enqueue_eviction(s, std::move(o));
}

device_status fake_backend::select_keep_async(const keep_selection& a, stream_handle s) noexcept {
  if (!valid(a)) return status(device_errc::invalid_value);
  pnmem::detail::lock_guard lk(mu_);
  op o;
  o.kind = op_kind::select;
  o.select_args = a;
  if (a.scores != nullptr)
    o.uses.push_back(op_use{buffer_use{a.scores, static_cast<std::size_t>(a.n_tokens) * sizeof(float), false}});
  if (const int k = kept_count(a); k > 0)
    o.uses.push_back(op_use{buffer_use{a.keep, static_cast<std::size_t>(k) * sizeof(std::int32_t), true}});
  return enqueue_eviction(s, std::move(o));
}

device_status fake_backend::compact_rows_async(const row_compaction& a, stream_handle s) noexcept {
  if (!valid(a)) return status(device_errc::invalid_value);
  pnmem::detail::lock_guard lk(mu_);
  op o;
  o.kind = op_kind::compact;
  o.compact_args = a;
  if (a.kept > 0)
    o.uses.push_back(op_use{buffer_use{a.keep, static_cast<std::size_t>(a.kept) * sizeof(std::int32_t), false}});
  o.uses.push_back(op_use{buffer_use{a.rows, static_cast<std::size_t>(a.n_rows) * a.row_bytes, true}});
  return enqueue_eviction(s, std::move(o));
}

// --- the test's side ---

std::uint64_t fake_backend::submit(stream_handle s, std::vector<buffer_use> uses, std::uint64_t duration_ticks) {
  pnmem::detail::lock_guard lk(mu_);
  stream* st = find_stream(s);
  if (st == nullptr) {
    violation("t=" + std::to_string(now_) + " submit on stream " + std::to_string(s.value) +
              ": not a live stream (never created, or destroyed)");
    return 0;
  }
  op o;
  o.kind = op_kind::kernel;
  o.duration = duration_ticks;
  o.uses.reserve(uses.size());
  for (const buffer_use& u : uses) o.uses.push_back(op_use{u});
  return enqueue(*st, std::move(o));
}

void fake_backend::advance(std::uint64_t ticks) {
  pnmem::detail::lock_guard lk(mu_);
  const std::uint64_t target = ticks > std::numeric_limits<std::uint64_t>::max() - now_ ? std::numeric_limits<std::uint64_t>::max() : now_ + ticks;
  run_to(target, false);
}

void fake_backend::run_until_idle() {
  pnmem::detail::lock_guard lk(mu_);
  run_to(now_, true);
}

std::uint64_t fake_backend::now() const {
  pnmem::detail::lock_guard lk(mu_);
  return now_;
}

std::size_t fake_backend::pending_ops() const {
  pnmem::detail::lock_guard lk(mu_);
  return pending_.size();
}

void fake_backend::register_host(const void* p, std::size_t bytes) {
  pnmem::detail::lock_guard lk(mu_);
  if (p != nullptr && bytes > 0) host_[addr(p)] = bytes;
}

void fake_backend::unregister_host(const void* p) {
  pnmem::detail::lock_guard lk(mu_);
  host_.erase(addr(p));
}

void fake_backend::set_used_by_others(int device, std::uint64_t bytes) {
  pnmem::detail::lock_guard lk(mu_);
  if (valid_device(device)) used_by_others_[static_cast<std::size_t>(device)] = bytes;
}

const std::vector<std::string>& fake_backend::violations() const {
  pnmem::detail::lock_guard lk(mu_);
  return violations_;
}

void fake_backend::clear_violations() {
  pnmem::detail::lock_guard lk(mu_);
  violations_.clear();
}

std::size_t fake_backend::live_allocations() const {
  pnmem::detail::lock_guard lk(mu_);
  return static_cast<std::size_t>(std::count_if(blocks_.begin(), blocks_.end(), [](const auto& kv) {
    return kv.second.state == block_state::live;
  }));
}

std::uint64_t fake_backend::live_bytes() const {
  pnmem::detail::lock_guard lk(mu_);
  std::uint64_t sum = 0;
  for (const auto& [base, b] : blocks_) sum += b.state == block_state::live ? b.bytes : 0;
  return sum;
}

std::uint64_t fake_backend::live_device_bytes(int device) const {
  pnmem::detail::lock_guard lk(mu_);
  return valid_device(device) ? live_device_[static_cast<std::size_t>(device)] : 0;
}

std::uint64_t fake_backend::live_pinned_bytes() const {
  pnmem::detail::lock_guard lk(mu_);
  std::uint64_t sum = 0;
  for (const auto& [base, b] : blocks_) {
    sum += b.state == block_state::live && b.kind == block_kind::pinned ? b.bytes : 0;
  }
  return sum;
}

std::uint64_t fake_backend::retiring_bytes(int device) const {
  pnmem::detail::lock_guard lk(mu_);
  return valid_device(device) ? retiring_[static_cast<std::size_t>(device)] : 0;
}

std::vector<std::string> fake_backend::leaks() const {
  pnmem::detail::lock_guard lk(mu_);
  std::vector<std::string> out;
  std::vector<const block*> live;
  for (const auto& [base, b] : blocks_) {
    if (b.state == block_state::live) live.push_back(&b);
  }
  std::sort(live.begin(), live.end(), [](const block* a, const block* b) { return a->id < b->id; });
  for (const block* b : live) out.push_back(describe(*b) + " at " + hex(b->storage.get()) + " never freed");
  for (const auto& [h, st] : streams_) {
    if (!st.destroyed) {
      out.push_back("stream " + std::to_string(h) + " (id " + std::to_string(st.id) + ", device " +
                    std::to_string(st.device) + ") never destroyed");
    }
  }
  std::vector<std::uint64_t> ev;
  for (const auto& [h, e] : events_) ev.push_back(h);
  std::sort(ev.begin(), ev.end());
  for (const std::uint64_t h : ev) out.push_back("event " + std::to_string(h) + " never destroyed");
  return out;
}

std::uint64_t fake_backend::events_created() const {
  pnmem::detail::lock_guard lk(mu_);
  return events_created_;
}

std::uint64_t fake_backend::streams_created() const {
  pnmem::detail::lock_guard lk(mu_);
  return streams_created_;
}

std::size_t fake_backend::live_events() const {
  pnmem::detail::lock_guard lk(mu_);
  return events_.size();
}

std::size_t fake_backend::live_streams() const {
  pnmem::detail::lock_guard lk(mu_);
  return static_cast<std::size_t>(
      std::count_if(streams_.begin(), streams_.end(), [](const auto& kv) { return !kv.second.destroyed; }));
}

}  // namespace pnmem::cuda
