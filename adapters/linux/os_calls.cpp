// The Linux adapter's OS-call seam. See os_calls.hpp.
#include "os_calls.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>

namespace pnmem::linux_os {
namespace {

int real_open(const char* path, int flags) { return ::open(path, flags); }
int real_ppoll(::pollfd* fds, ::nfds_t count, const ::timespec* timeout) {
  return ::ppoll(fds, count, timeout, nullptr);
}
int real_eventfd(unsigned int initial, int flags) { return ::eventfd(initial, flags); }

constexpr calls real_table{
    real_open, ::pread, ::read, ::write, ::close, ::fstat, ::fstatfs, real_ppoll, real_eventfd,
};

std::atomic<const calls*> in_force{&real_table};
static_assert(std::atomic<const calls*>::is_always_lock_free);

}  // namespace

const calls& real_calls() noexcept { return real_table; }

const calls& sys() noexcept { return *in_force.load(std::memory_order_acquire); }

calls_override::calls_override(const calls& replacement) noexcept
    : table_(replacement), previous_(in_force.exchange(&table_, std::memory_order_acq_rel)) {}

calls_override::~calls_override() { in_force.store(previous_, std::memory_order_release); }

}  // namespace pnmem::linux_os
