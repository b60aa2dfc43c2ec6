// tools/pnmem/textfile_writer.cpp
#include "textfile_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

namespace pnmem_cli {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// `<path>: <step>: <errno text>`
std::string failure(const std::string& path, std::string_view step, int err) {
  std::string out = path;
  out += ": ";
  out += step;
  out += ": ";
  out += errno_text(err);
  return out;
}

// close() that keeps the first errno: 0, or the errno.
int close_fd(int fd) { return ::close(fd) == 0 ? 0 : errno; }

// All of `text` to `fd`, across short writes and EINTR: 0, or the errno.
int write_all(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

textfile_writer::textfile_writer(std::string target) : target_(std::move(target)) {
  const std::filesystem::path p(target_);
  dir_ = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  temp_ = (std::filesystem::path(dir_) / ("." + p.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
}

std::string textfile_writer::check() const {
  if (target_.empty()) return "empty path";
  if (!std::filesystem::path(target_).has_filename()) return "names a directory, not a file";
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) return "directory \"" + dir_ + "\": " + errno_text(errno);
  if (!S_ISDIR(st.st_mode)) return "directory \"" + dir_ + "\": " + errno_text(ENOTDIR);
  if (::stat(target_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return "is a directory";
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create a file in \"" + dir_ + "\": " + errno_text(errno);
  ::close(fd);
  ::unlink(temp_.c_str());
  return {};
}

std::string textfile_writer::write(std::string_view text) const {
  // 0644: node_exporter usually runs as another user, and reads it. Set with fchmod too: open's mode
  // is cut by the umask (a service's 077 would make it 0600, and the scrape would fail).
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure(temp_, "create", errno);
  const auto give_up = [&](std::string_view step, int err) {
    ::unlink(temp_.c_str());
    return failure(temp_, step, err);
  };
  if (::fchmod(fd, 0644) != 0) {
    const int err = errno;
    ::close(fd);
    return give_up("chmod 0644", err);
  }
  if (const int err = write_all(fd, text); err != 0) {
    ::close(fd);
    return give_up("write", err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return give_up("fsync", err);
  }
  if (const int err = close_fd(fd); err != 0) return give_up("close", err);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    return failure(target_, "rename", err);
  }
  // The rename made durable. Some filesystems cannot fsync a directory (EINVAL):
  // the file is in place all the same.
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return failure(dir_, "open directory for fsync", errno);
  const int dir_err = ::fsync(dfd) == 0 ? 0 : errno;
  ::close(dfd);
  if (dir_err != 0 && dir_err != EINVAL) return failure(dir_, "fsync directory", dir_err);
  return {};
}

}  // namespace pnmem_cli
