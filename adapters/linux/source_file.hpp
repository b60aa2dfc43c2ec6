// source_file.hpp - one kernel file kept open and re-read whole with pread.
//
// Private to the Linux adapter (not installed). Reading /proc and cgroupfs is the
// sampler's whole cost, so a file is opened once and re-read from offset 0 each
// sample. Every OS call goes through os_calls.hpp, so tests can inject EINTR,
// short reads and errors the kernel rarely produces on demand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace pnmem::detail {

enum class pread_status : std::uint8_t {
  ok,
  too_large,  // the file does not fit the buffer: an error, never a cut-off parse
  error,      // pread failed (errno in `error_number`)
};

struct pread_result {
  pread_status status = pread_status::ok;
  std::size_t size = 0;   // bytes read (ok)
  int error_number = 0;   // errno (error)
};

// Reads from offset 0 to end of file into `buffer`, retrying EINTR and short
// reads: only a 0-byte read means end of file. A file that fills the buffer is
// probed for one more byte to tell "exactly full" from "too large".
pread_result pread_whole(int fd, std::span<char> buffer) noexcept;

enum class source_status : std::uint8_t {
  ok,
  missing,  // the file does not exist (now): the source is absent, not broken
  failed,   // it exists but could not be opened or read, or is too large
};

struct source_read {
  source_status status = source_status::missing;
  std::string_view text;  // the file's bytes, in the caller's buffer (ok)
  int error_number = 0;   // errno of the failure (failed)
};

class source_file {
 public:
  source_file() = default;
  explicit source_file(std::string path) noexcept;
  ~source_file();
  source_file(source_file&& other) noexcept;
  source_file& operator=(source_file&& other) noexcept;
  source_file(const source_file&) = delete;
  source_file& operator=(const source_file&) = delete;

  // The whole file, opening it first if it is not open. A file that vanished
  // (a removed cgroup's files fail with ENODEV; a deleted regular file has no
  // links left) is closed and opened again once, so a source that came back is
  // read and one that is gone reads as missing. Any failure closes the file, so
  // the next read starts from a fresh open.
  source_read read(std::span<char> buffer) noexcept;

  // Opens the file if it is not open; true when it is open afterwards.
  bool open() noexcept;
  void close() noexcept;
  bool is_open() const noexcept { return fd_ >= 0; }
  const std::string& path() const noexcept { return path_; }

 private:
  source_status open_status(int& error_number) noexcept;
  bool unlinked() const noexcept;

  std::string path_;
  int fd_ = -1;
  // procfs, sysfs and cgroupfs report a vanished file through read errors; on any
  // other file system (fixture trees) the file's link count is checked instead.
  bool check_links_ = false;
};

// Reads a file of any size (the mount table: thousands of lines on a busy host)
// into `out`, opening and closing it. Used when the cgroup is (re)located, not
// per sample.
source_status read_whole_file(const std::string& path, std::string& out);

}  // namespace pnmem::detail
