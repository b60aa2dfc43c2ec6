// faulty_backend.hpp - the fake backend with device calls that can be made to fail.
//
// Forwards every call to a fake_backend (fake_backend.hpp) unless a fault is
// armed for it: a die whose mem_get_info fails (a die that fell off the bus),
// or the next N calls of one kind returning an error, the way cudart reports a
// full driver or a lost context. Used where the adapter must keep its promise
// (never free early, never leak) when the device says no.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda::test {

enum class device_call : std::uint8_t {
  event_create,
  event_record,
  stream_wait_event,
  free_async,
  copy_async,
  free_plain,
  compact_rows,
  count
};

class faulty_backend final : public device_backend {
 public:
  explicit faulty_backend(fake_options o = {}) : fake_(o) {}

  fake_backend& fake() noexcept { return fake_; }

  // mem_get_info(failing_die) fails with `failure`; -1 = none.
  int failing_die = -1;

  // The next `n` calls of `call` fail with `error` (and do nothing).
  void fail_next(device_call call, int n, device_errc error = device_errc::out_of_memory) noexcept {
    auto& f = faults_[static_cast<std::size_t>(call)];
    f.remaining = n;
    f.error = error;
  }
  // Calls of `call` that were refused so far.
  int refused(device_call call) const noexcept { return faults_[static_cast<std::size_t>(call)].refused; }

  std::string_view name() const noexcept override { return "faulty"; }
  device_status device_count(int& out) noexcept override { return fake_.device_count(out); }
  device_status mem_get_info(int d, std::uint64_t& f, std::uint64_t& t) noexcept override {
    if (d == failing_die) return {device_errc::failure, 999};
    return fake_.mem_get_info(d, f, t);
  }
  device_status device_alloc_mode(int d, alloc_mode& m) noexcept override { return fake_.device_alloc_mode(d, m); }
  device_status alloc_async(int d, std::size_t n, stream_handle s, void*& p) noexcept override {
    return fake_.alloc_async(d, n, s, p);
  }
  device_status alloc_plain(int d, std::size_t n, void*& p) noexcept override { return fake_.alloc_plain(d, n, p); }
  device_status free_plain(void* p) noexcept override {
    if (const auto st = refuse(device_call::free_plain); !st) return st;
    return fake_.free_plain(p);
  }
  device_status free_async(void* p, stream_handle s) noexcept override {
    if (const auto st = refuse(device_call::free_async); !st) return st;
    return fake_.free_async(p, s);
  }
  device_status alloc_pinned(std::size_t n, void*& p) noexcept override { return fake_.alloc_pinned(n, p); }
  device_status free_pinned(void* p) noexcept override { return fake_.free_pinned(p); }
  device_status stream_create(int d, stream_handle& s) noexcept override { return fake_.stream_create(d, s); }
  device_status stream_destroy(stream_handle s) noexcept override { return fake_.stream_destroy(s); }
  device_status event_create(int d, event_handle& e) noexcept override {
    if (const auto st = refuse(device_call::event_create); !st) return st;
    return fake_.event_create(d, e);
  }
  device_status event_destroy(event_handle e) noexcept override { return fake_.event_destroy(e); }
  device_status event_record(event_handle e, stream_handle s) noexcept override {
    if (const auto st = refuse(device_call::event_record); !st) return st;
    return fake_.event_record(e, s);
  }
  device_status event_query(event_handle e) noexcept override { return fake_.event_query(e); }
  device_status stream_wait_event(stream_handle s, event_handle e) noexcept override {
    if (const auto st = refuse(device_call::stream_wait_event); !st) return st;
    return fake_.stream_wait_event(s, e);
  }
  device_status stream_id(stream_handle s, std::uint64_t& id) noexcept override { return fake_.stream_id(s, id); }
  device_status copy_async(void* d, const void* s, std::size_t n, stream_handle st) noexcept override {
    if (const auto r = refuse(device_call::copy_async); !r) return r;
    return fake_.copy_async(d, s, n, st);
  }
  device_status observation_scores_async(const observation_pooling& a, stream_handle s) noexcept override {
    return fake_.observation_scores_async(a, s);
  }
  device_status select_keep_async(const keep_selection& a, stream_handle s) noexcept override {
    return fake_.select_keep_async(a, s);
  }
  device_status compact_rows_async(const row_compaction& a, stream_handle s) noexcept override {
    if (const auto r = refuse(device_call::compact_rows); !r) return r;
    return fake_.compact_rows_async(a, s);
  }

 private:
  struct fault {
    int remaining = 0;
    int refused = 0;
    device_errc error = device_errc::out_of_memory;
  };

  device_status refuse(device_call call) noexcept {
    fault& f = faults_[static_cast<std::size_t>(call)];
    if (f.remaining <= 0) return {};
    --f.remaining;
    ++f.refused;
    return {f.error, 0};
  }

  fake_backend fake_;
  std::array<fault, static_cast<std::size_t>(device_call::count)> faults_{};
};

}  // namespace pnmem::cuda::test
