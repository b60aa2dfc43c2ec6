// adapters/macos/macos_sampler.cpp - the three reads; the arithmetic is vm_arith.hpp.
#include "pnmem/macos/macos_sampler.hpp"

#include <mach/mach.h>
#include <sys/sysctl.h>
#include <sys/types.h>

#include <cstdint>

#include "pnmem/macos/vm_arith.hpp"

namespace pnmem {

namespace {

template <class T>
std::optional<T> sysctl_value(const char* name) {
  T value{};
  std::size_t size = sizeof value;
  if (::sysctlbyname(name, &value, &size, nullptr, 0) != 0 || size != sizeof value) return std::nullopt;
  return value;
}

}  // namespace

host_sample macos_sampler::sample() {
  macos::vm_reading r;
  r.total_bytes = sysctl_value<std::uint64_t>("hw.memsize");
  r.pressure = sysctl_value<int>("kern.memorystatus_vm_pressure_level");
  r.page_size_bytes = static_cast<std::uint64_t>(vm_kernel_page_size);

  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  const mach_port_t host = mach_host_self();
  if (host_statistics64(host, HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) == KERN_SUCCESS) {
    macos::vm_page_counts c;
    c.free = vm.free_count;
    c.inactive = vm.inactive_count;
    c.purgeable = vm.purgeable_count;
    r.pages = c;
  }
  mach_port_deallocate(mach_task_self(), host);
  return macos::make_host_sample(r);
}

}  // namespace pnmem
