// pnmem/cuda/stream_registry.hpp - stream ids for a runtime without cudaStreamGetId.
//
// device_backend::stream_id promises an identity that outlives handle reuse: the
// runtime may hand a destroyed stream's cudaStream_t value to the next stream it
// creates, and the buffer owner keys the streams a model ran on by id, so a new
// stream must never inherit an old one's id (it would skip the wait for the last
// move's copies, buffer_owner::note_stream). cudaStreamGetId gives such ids from
// CUDA 12.0 on. Built against an older toolkit (the floor is 11.4), the cudart
// backend assigns them itself, here: an id is handed out when a stream becomes
// known (created through the backend, or adopted), never again, and the entry is
// dropped before the stream is destroyed, so the handle's next owner gets a new id.
//
// Thread-safe: one mutex; every call is short.
#pragma once

#include <cstdint>
#include <map>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem::cuda {

class stream_registry {
 public:
  stream_registry() = default;
  stream_registry(const stream_registry&) = delete;
  stream_registry& operator=(const stream_registry&) = delete;

  // Makes `handle` known with a fresh id (replacing any id it had: a new stream
  // at an old address is a new stream). Returns the id, or 0 when `handle` is 0
  // or there is no memory for the entry.
  std::uint64_t add(std::uint64_t handle) noexcept {
    if (handle == 0) return 0;
    pnmem::detail::lock_guard lk(mu_);
    try {
      const std::uint64_t id = next_id_++;
      ids_[handle] = id;
      return id;
    } catch (...) {
      return 0;
    }
  }

  // As add(), but keeps the id of a handle already known (adopting twice is harmless).
  std::uint64_t adopt(std::uint64_t handle) noexcept {
    if (handle == 0) return 0;
    pnmem::detail::lock_guard lk(mu_);
    if (const auto it = ids_.find(handle); it != ids_.end()) return it->second;
    try {
      const std::uint64_t id = next_id_++;
      ids_.emplace(handle, id);
      return id;
    } catch (...) {
      return 0;
    }
  }

  // Forgets `handle` (call before the stream is destroyed). False if it was unknown.
  bool remove(std::uint64_t handle) noexcept {
    pnmem::detail::lock_guard lk(mu_);
    return ids_.erase(handle) == 1;
  }

  // The id of a known handle; false (and `id` untouched) if unknown.
  bool find(std::uint64_t handle, std::uint64_t& id) const noexcept {
    pnmem::detail::lock_guard lk(mu_);
    const auto it = ids_.find(handle);
    if (it == ids_.end()) return false;
    id = it->second;
    return true;
  }

  std::size_t size() const noexcept {
    pnmem::detail::lock_guard lk(mu_);
    return ids_.size();
  }

 private:
  mutable pnmem::detail::mutex mu_;
  std::map<std::uint64_t, std::uint64_t> ids_ PNMEM_GUARDED_BY(mu_);  // handle -> id
  std::uint64_t next_id_ PNMEM_GUARDED_BY(mu_) = 1;                   // ids are never reused
};

}  // namespace pnmem::cuda
