// The Linux adapter's installed headers (pnmem/linux/) declare no OS types, so
// they include no OS header: the OS calls live behind the private seam
// (adapters/linux/os_calls.hpp). This file fails to compile when one comes back.
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/process_peak.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/linux/psi_trigger.hpp"

#if defined(POLLPRI) || defined(_SYS_POLL_H) || defined(_SYS_STATFS_H) || defined(_SYS_VFS_H) || \
    defined(_SYS_EVENTFD_H) || defined(_FCNTL_H) || defined(_SYS_STAT_H)
#error "an installed pnmem/linux header includes an OS header (poll, statfs, eventfd, fcntl or stat)"
#endif

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

TEST_CASE("the installed Linux headers compile without OS headers") {
  // The sampler's default trigger, as it was before it was written once: 100 ms of some stall in 1 s.
  CHECK(pnmem::default_psi_trigger ==
        pnmem::psi_trigger_spec{pnmem::psi_stall::some, std::chrono::milliseconds(100), std::chrono::seconds(1)});
  CHECK(pnmem::default_psi_trigger == pnmem::psi_trigger_spec{});
  const std::vector<pnmem::psi_trigger_spec> one_default{pnmem::default_psi_trigger};
  CHECK(pnmem::linux_sampler_options{}.psi_triggers == one_default);
  CHECK(pnmem::psi_trigger_config{}.triggers == pnmem::linux_sampler_options{}.psi_triggers);
  // process_peak.hpp: nothing measured until read(); its status parser is procfs.hpp's.
  CHECK(pnmem::linux_os::peak_value{}.status == pnmem::linux_os::peak_status::missing);
  CHECK(pnmem::linux_os::parse_status_memory("VmHWM:\t2 kB\nVmRSS:\t1 kB\n").value.hwm_bytes == 2048);
}
