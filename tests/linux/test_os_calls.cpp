// Every OS call of the Linux adapter fails at least once through its one seam
// (os_calls.hpp), and the adapter reacts as its headers say: a source that
// cannot be opened or read is marked failed, a trigger that cannot be checked,
// written or polled falls back to polling with a reason, a missing eventfd
// throws. The fakes wrap the real calls and fail only what they are about.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "fake_psi_kernel.hpp"
#include "fixture_sampler.hpp"
#include "fixture_tree.hpp"
#include "os_calls.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/psi_trigger.hpp"
#include "source_file.hpp"

using namespace pnmem;
using linux_os::calls;
using linux_os::calls_override;
using linux_os::real_calls;
using linux_os::real_calls_but;

namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// The sources of a fixture, without triggers (the triggers' calls are tested on the fake kernel).
host_sample sample_v1_limit() { return pnmem::test::sample_fixture("v1_limit", pnmem::test::psi_triggers::none); }

// open() fails with `err` for the paths that end in `suffix`, while this is alive.
struct open_failure {
  static inline std::string_view suffix;
  static inline int err = 0;
  static int open(const char* path, int flags) {
    if (!std::string_view(path).ends_with(suffix)) return real_calls().open(path, flags);
    errno = err;
    return -1;
  }
  open_failure(std::string_view path_suffix, int error_number) {
    suffix = path_suffix;
    err = error_number;
  }
  calls_override seam{real_calls_but(&calls::open, &open_failure::open)};
};

// The fake kernel, with one more call replaced on top.
template <class Fn>
calls fake_kernel_but(Fn calls::*entry, Fn replacement) {
  calls c = pnmem::test::fake_psi::table();
  c.*entry = replacement;
  return c;
}

}  // namespace

TEST_CASE("the seam: the real calls by default, an override for its scope only, nested scopes restore in order") {
  CHECK(&linux_os::sys() == &real_calls());
  {
    const calls_override outer(real_calls_but(&calls::close, +[](int) { return 0; }));
    const calls* outer_table = &linux_os::sys();
    CHECK(outer_table != &real_calls());
    {
      const calls_override inner(real_calls());
      CHECK(&linux_os::sys() != outer_table);
    }
    CHECK(&linux_os::sys() == outer_table);
  }
  CHECK(&linux_os::sys() == &real_calls());
}

TEST_CASE("open fails (EACCES) on /proc/meminfo: meminfo failed, total unknown; the other sources still read") {
  REQUIRE(sample_v1_limit().provenance.read(host_source::meminfo));
  const open_failure seam{"/proc/meminfo", EACCES};
  const host_sample h = sample_v1_limit();
  CHECK(h.provenance.failed(host_source::meminfo));
  CHECK(h.total_bytes == 0);
  CHECK(h.provenance.read(host_source::psi));
  CHECK(h.provenance.read(host_source::cgroup_limit));
}

TEST_CASE("open fails with ENOENT: the source is missing, not failed") {
  const open_failure seam{"/proc/pressure/memory", ENOENT};
  const host_sample h = sample_v1_limit();
  CHECK_FALSE(h.provenance.failed(host_source::psi));
  CHECK_FALSE(h.provenance.read(host_source::psi));
  CHECK(h.provenance.read(host_source::meminfo));
}

TEST_CASE("pread fails (EIO) everywhere: every source that exists is marked failed, never read as 0") {
  const calls_override seam(real_calls_but(&calls::pread, +[](int, void*, std::size_t, off_t) -> ssize_t {
    errno = EIO;
    return -1;
  }));
  const host_sample h = sample_v1_limit();
  CHECK(h.provenance.failed(host_source::meminfo));
  CHECK(h.provenance.failed(host_source::psi));
  // /proc/self/cgroup could not be read: the container's limit is unknown.
  CHECK(h.provenance.failed(host_source::cgroup_limit));
  CHECK(h.total_bytes == 0);
}

TEST_CASE("fstat fails: the link count of a plain file is unknown, and the file is read as it is") {
  pnmem::test::temp_tree d;
  pnmem::test::write_text(d / "meminfo", "MemTotal: 4 kB\n");
  const calls_override seam(real_calls_but(&calls::fstat, +[](int, struct ::stat*) {
    errno = EIO;
    return -1;
  }));
  pnmem::detail::source_file f((d / "meminfo").string());
  std::vector<char> buf(64);
  const auto r = f.read(buf);
  CHECK(r.status == pnmem::detail::source_status::ok);
  CHECK(r.text == "MemTotal: 4 kB\n");
}

TEST_CASE("fstatfs fails on the pressure file: not known to be a kernel file, so never written; polling") {
  pnmem::test::fake_scope f;
  const calls_override seam(fake_kernel_but(&calls::fstatfs, +[](int, struct ::statfs*) {
    errno = EIO;
    return -1;
  }));
  psi_trigger t(pnmem::test::fake_config());
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "not a kernel pressure file"));
  CHECK(f.k.writes.empty());
  CHECK(f.k.open_fds.empty());
}

TEST_CASE("write fails (EIO) on the trigger: polling, the errno in the reason, nothing left open") {
  pnmem::test::fake_scope f(+[](const std::string&) { return EIO; });
  psi_trigger t(pnmem::test::fake_config());
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), std::strerror(EIO)));
  CHECK(t.armed().empty());
  CHECK(f.k.open_fds.empty());
}

TEST_CASE("poll fails (EINVAL): the triggers are dropped with a reason, the wait reports an event") {
  pnmem::test::fake_scope f;
  psi_trigger t(pnmem::test::fake_config());
  REQUIRE(t.mode() == psi_mode::trigger);
  {
    const calls_override seam(fake_kernel_but(&calls::ppoll, +[](::pollfd*, ::nfds_t, const ::timespec*) {
      errno = EINVAL;
      return -1;
    }));
    CHECK(t.wait_for(std::chrono::hours{1}) == pnmem::wake::event);
  }
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "poll() on the triggers failed"));
  CHECK(f.k.open_fds.empty());
}

TEST_CASE("eventfd fails (EMFILE): psi_trigger and the sampler throw, as documented") {
  const calls_override seam(real_calls_but(&calls::eventfd, +[](unsigned int, int) {
    errno = EMFILE;
    return -1;
  }));
  CHECK_THROWS_AS(psi_trigger{pnmem::test::fake_config()}, std::system_error);
  CHECK_THROWS_AS(pnmem::linux_sampler{}, std::system_error);
}
