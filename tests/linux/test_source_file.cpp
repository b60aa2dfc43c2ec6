// The pread loop and the kept-open file: EINTR, short reads, too-large files and
// errors through the OS-call seam; vanished and returning files on a real file system.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "fixture_tree.hpp"
#include "os_calls.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using pnmem::detail::pread_status;
using pnmem::detail::source_file;
using pnmem::detail::source_status;

using pnmem::test::temp_tree;
using pnmem::test::write_text;

namespace {

// A fake file behind the seam's pread: `content`, served at most `chunk` bytes per
// call, with an EINTR before every call while `eintr_every` is set, or a fixed errno.
struct fake_file {
  std::string content;
  std::size_t chunk = 1 << 20;
  bool eintr_every = false;
  int fail_errno = 0;
  int calls = 0;
  bool interrupted = false;
};
fake_file* g_fake = nullptr;

ssize_t fake_pread(int, void* buf, std::size_t count, off_t offset) {
  fake_file& f = *g_fake;
  ++f.calls;
  if (f.fail_errno != 0) {
    errno = f.fail_errno;
    return -1;
  }
  if (f.eintr_every && !f.interrupted) {
    f.interrupted = true;
    errno = EINTR;
    return -1;
  }
  f.interrupted = false;
  const auto off = static_cast<std::size_t>(offset);
  if (off >= f.content.size()) return 0;
  std::size_t n = f.content.size() - off;
  if (n > count) n = count;
  if (n > f.chunk) n = f.chunk;
  std::memcpy(buf, f.content.data() + off, n);
  return static_cast<ssize_t>(n);
}

// pread_whole over `f` (on descriptor 0, which the fake ignores).
pnmem::detail::pread_result pread_fake(fake_file& f, std::span<char> buf) {
  g_fake = &f;
  using pnmem::linux_os::calls;
  const pnmem::linux_os::calls_override seam(pnmem::linux_os::real_calls_but(&calls::pread, fake_pread));
  return pnmem::detail::pread_whole(0, buf);
}

}  // namespace

TEST_CASE("pread_whole: short reads and EINTR are retried until EOF") {
  fake_file f;
  f.content = "MemTotal: 4 kB\nMemAvailable: 2 kB\n";
  f.chunk = 3;
  f.eintr_every = true;
  std::vector<char> buf(64);
  const auto r = pread_fake(f, buf);
  REQUIRE(r.status == pread_status::ok);
  CHECK(std::string_view(buf.data(), r.size) == f.content);
  CHECK(f.calls > 20);  // 12 chunks, an EINTR before each, and the EOF read
}

TEST_CASE("pread_whole: a file exactly the buffer's size fits; one byte more is too large") {
  fake_file f;
  f.content = std::string(64, 'a');
  std::vector<char> buf(64);
  const auto fits = pread_fake(f, buf);
  CHECK(fits.status == pread_status::ok);
  CHECK(fits.size == 64);
  f.content.push_back('b');
  CHECK(pread_fake(f, buf).status == pread_status::too_large);
}

TEST_CASE("pread_whole: an error is reported with its errno") {
  fake_file f;
  f.fail_errno = EIO;
  std::vector<char> buf(64);
  const auto r = pread_fake(f, buf);
  CHECK(r.status == pread_status::error);
  CHECK(r.error_number == EIO);
}

TEST_CASE("source_file: an empty file reads as zero bytes") {
  temp_tree d;
  write_text(d.root / "empty", "");
  source_file f((d.root / "empty").string());
  std::vector<char> buf(64);
  const auto r = f.read(buf);
  CHECK(r.status == source_status::ok);
  CHECK(r.text.empty());
}

TEST_CASE("source_file: missing, then present, then deleted, then back") {
  temp_tree d;
  const fs::path p = d.root / "meminfo";
  source_file f(p.string());
  std::vector<char> buf(64);
  CHECK(f.read(buf).status == source_status::missing);

  write_text(p, "one\n");
  auto r = f.read(buf);
  REQUIRE(r.status == source_status::ok);
  CHECK(r.text == "one\n");
  CHECK(f.is_open());

  // Rewritten in place (same inode): the kept descriptor sees the new bytes.
  write_text(p, "two\n");
  CHECK(f.read(buf).text == "two\n");

  fs::remove(p);
  CHECK(f.read(buf).status == source_status::missing);
  CHECK_FALSE(f.is_open());

  write_text(p, "three\n");
  CHECK(f.read(buf).text == "three\n");

  // Replaced by rename (a new inode): the old descriptor is dropped.
  write_text(d.root / "next", "four\n");
  fs::rename(d.root / "next", p);
  CHECK(f.read(buf).text == "four\n");
}

TEST_CASE("source_file: a directory where a file belongs has failed, not gone missing") {
  temp_tree d;
  fs::create_directory(d.root / "meminfo");
  source_file f((d.root / "meminfo").string());
  std::vector<char> buf(64);
  const auto r = f.read(buf);
  CHECK(r.status == source_status::failed);
  CHECK(r.error_number == EISDIR);
  CHECK_FALSE(f.is_open());  // the next read starts from a fresh open
}

TEST_CASE("source_file: a file larger than the buffer has failed") {
  temp_tree d;
  write_text(d.root / "big", std::string(100, 'x'));
  source_file f((d.root / "big").string());
  std::vector<char> buf(64);
  const auto r = f.read(buf);
  CHECK(r.status == source_status::failed);
  CHECK(r.error_number == EFBIG);
}

TEST_CASE("source_file: a path under a regular file is missing (ENOTDIR)") {
  temp_tree d;
  write_text(d.root / "file", "x\n");
  source_file f((d.root / "file" / "child").string());
  std::vector<char> buf(64);
  CHECK(f.read(buf).status == source_status::missing);
}

TEST_CASE("source_file: the kernel's own files are read whole") {
  source_file f("/proc/self/status");
  std::vector<char> buf(16 * 1024);
  const auto r = f.read(buf);
  REQUIRE(r.status == source_status::ok);
  CHECK(r.text.substr(0, 5) == "Name:");
  CHECK(r.text.back() == '\n');
  // Kept open and re-read from offset 0.
  CHECK(f.read(buf).text.substr(0, 5) == "Name:");
}

TEST_CASE("read_whole_file: grows past the per-sample buffer") {
  temp_tree d;
  const std::string big(200 * 1024, 'm');
  write_text(d.root / "mountinfo", big);
  std::string out;
  CHECK(pnmem::detail::read_whole_file((d.root / "mountinfo").string(), out) == source_status::ok);
  CHECK(out == big);
  CHECK(pnmem::detail::read_whole_file((d.root / "absent").string(), out) == source_status::missing);
}
