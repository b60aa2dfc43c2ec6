// One kernel file kept open and re-read whole with pread. See source_file.hpp.
#include "source_file.hpp"

#include <fcntl.h>
#include <linux/magic.h>

#include <cerrno>
#include <utility>

#include "os_calls.hpp"

namespace pnmem::detail {

pread_result pread_whole(int fd, std::span<char> buffer) noexcept {
  std::size_t size = 0;
  for (;;) {
    char probe = 0;
    const bool full = size == buffer.size();
    // When the buffer is full, one more byte tells "exactly fits" from "too large".
    char* const dest = full ? &probe : buffer.data() + size;
    const std::size_t want = full ? 1 : buffer.size() - size;
    const ssize_t n = linux_os::sys().pread(fd, dest, want, static_cast<off_t>(size));
    if (n < 0) {
      if (errno == EINTR) continue;
      return {pread_status::error, 0, errno};
    }
    if (n == 0) return {pread_status::ok, size, 0};
    if (full) return {pread_status::too_large, 0, 0};
    // A misbehaving pread (a test's, through the seam) can claim more than asked: never overrun.
    if (static_cast<std::size_t>(n) > want) return {pread_status::error, 0, EIO};
    size += static_cast<std::size_t>(n);
  }
}

namespace {

bool kernel_file_system(int fd) noexcept {
  struct statfs fs {};
  if (linux_os::sys().fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
      return true;
    default:
      return false;
  }
}

// kernfs (cgroupfs, sysfs) answers reads of a removed node with ENODEV; NFS-like
// file systems with ESTALE.
bool vanished_errno(int e) noexcept { return e == ENODEV || e == ESTALE; }

bool absent_errno(int e) noexcept { return e == ENOENT || e == ENOTDIR; }

}  // namespace

source_file::source_file(std::string path) noexcept : path_(std::move(path)) {}

source_file::~source_file() { close(); }

source_file::source_file(source_file&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      check_links_(other.check_links_) {}

source_file& source_file::operator=(source_file&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    check_links_ = other.check_links_;
  }
  return *this;
}

void source_file::close() noexcept {
  if (fd_ >= 0) linux_os::sys().close(fd_);  // a close error on a read-only fd loses nothing
  fd_ = -1;
}

source_status source_file::open_status(int& error_number) noexcept {
  if (fd_ >= 0) return source_status::ok;
  if (path_.empty()) return source_status::missing;
  const int fd = linux_os::sys().open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_number = errno;
    return absent_errno(error_number) ? source_status::missing : source_status::failed;
  }
  fd_ = fd;
  check_links_ = !kernel_file_system(fd);
  return source_status::ok;
}

bool source_file::open() noexcept {
  int ignored = 0;
  return open_status(ignored) == source_status::ok;
}

bool source_file::unlinked() const noexcept {
  struct stat st {};
  return linux_os::sys().fstat(fd_, &st) == 0 && st.st_nlink == 0;
}

source_read source_file::read(std::span<char> buffer) noexcept {
  // Two rounds: the second follows a close of a file that vanished under us.
  for (int round = 0; round < 2; ++round) {
    int error_number = 0;
    const source_status opened = open_status(error_number);
    if (opened != source_status::ok) return {opened, {}, error_number};
    if (check_links_ && unlinked()) {
      close();
      continue;
    }
    const pread_result r = pread_whole(fd_, buffer);
    if (r.status == pread_status::ok) return {source_status::ok, {buffer.data(), r.size}, 0};
    close();
    if (r.status == pread_status::too_large) return {source_status::failed, {}, EFBIG};
    if (!vanished_errno(r.error_number)) return {source_status::failed, {}, r.error_number};
  }
  // Vanished twice in a row: something is replacing it as we read.
  return {source_status::failed, {}, ESTALE};
}

source_status read_whole_file(const std::string& path, std::string& out) {
  source_file file(path);
  std::size_t capacity = 64 * 1024;
  constexpr std::size_t max_capacity = 64 * 1024 * 1024;
  for (;;) {
    out.resize(capacity);
    const source_read r = file.read(std::span<char>(out.data(), out.size()));
    if (r.status == source_status::ok) {
      out.resize(r.text.size());
      return source_status::ok;
    }
    if (r.status == source_status::missing || r.error_number != EFBIG || capacity >= max_capacity) {
      out.clear();
      return r.status;
    }
    capacity *= 2;
  }
}

}  // namespace pnmem::detail
