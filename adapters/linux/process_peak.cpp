// A process's memory high-water marks. See pnmem/linux/process_peak.hpp.
#include "pnmem/linux/process_peak.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memory_cgroup.hpp"
#include "os_calls.hpp"
#include "source_file.hpp"

namespace pnmem::linux_os {

// ---- the meter -------------------------------------------------------------------------------------

namespace {

using pnmem::detail::source_file;
using pnmem::detail::source_read;
using pnmem::detail::source_status;

constexpr std::size_t read_buffer_bytes = 16 * 1024;  // /proc/<pid>/status is ~1.5 KiB

peak_status status_of_errno(int e) noexcept {
  switch (e) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:  // the process is gone
      return peak_status::missing;
    case EACCES:
    case EPERM:
      return peak_status::permission_denied;
    default:
      return peak_status::failed;
  }
}

peak_status status_of(const source_read& r) noexcept {
  if (r.status == source_status::missing) return peak_status::missing;
  return status_of_errno(r.error_number);
}

// One whole write of `text` to an open file; errno on failure. 0 bytes written is EIO.
int write_all(int fd, std::string_view text) noexcept {
  for (;;) {
    const ssize_t n = sys().write(fd, text.data(), text.size());
    if (n == static_cast<ssize_t>(text.size())) return 0;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? errno : EIO;
  }
}

// Opens `path` for writing, writes `text`, closes: 0, or the errno of the open or the write.
int write_file(const std::string& path, std::string_view text) noexcept {
  const int fd = sys().open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int e = write_all(fd, text);
  sys().close(fd);
  return e;
}

// A cgroup file that rejects writes for everyone (mode without write bits: memory.peak before Linux
// 6.12) cannot be reset; one that has write bits refused this writer.
peak_status write_refusal(const std::string& path, int error_number) noexcept {
  if (error_number != EACCES && error_number != EPERM) return status_of_errno(error_number);
  const int fd = sys().open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return peak_status::permission_denied;
  struct ::stat st {};
  const bool stat_ok = sys().fstat(fd, &st) == 0;
  sys().close(fd);
  if (stat_ok && (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) return peak_status::unsupported;
  return peak_status::permission_denied;
}

}  // namespace

struct peak_meter::impl {
  std::string root_prefix;  // options.root without a trailing '/': "" for "/"
  std::string proc_dir;     // <root>/proc/<pid> or <root>/proc/self
  std::vector<char> buffer = std::vector<char>(read_buffer_bytes);
  source_file status;

  // The cgroup (located once).
  cgroup_mode mode = cgroup_mode::none;
  std::string dir;  // with a trailing '/'
  peak_status location = peak_status::missing;
  int location_errno = 0;
  source_file current;      // memory.current | memory.usage_in_bytes
  source_file v1_max_usage; // memory.max_usage_in_bytes
  std::string v2_peak_path;
  int v2_peak_fd = -1;      // memory.peak, kept open: a v2 reset is seen only through the file that made it
  bool v2_peak_writable = false;
  int v2_peak_open_errno = 0;

  ~impl() {
    if (v2_peak_fd >= 0) sys().close(v2_peak_fd);
  }

  void locate(const std::string& cgroup_file);
  bool use_v2(const procfs::cgroup_mount& mount, std::string_view cgroup_path);
  bool use_v1(const procfs::cgroup_mount& mount, std::string_view cgroup_path);
  void open_v2_peak();
  peak_value read_process();
  peak_value read_cgroup();
  std::string dir_of(const procfs::cgroup_mount& mount, std::string_view below) const {
    std::string d = root_prefix;
    if (mount.mount_point.view() != "/") d += mount.mount_point.view();
    d += below;
    d += '/';
    return d;
  }
};

void peak_meter::impl::locate(const std::string& cgroup_file) {
  std::string self;
  const source_status st = pnmem::detail::read_whole_file(cgroup_file, self);
  if (st != source_status::ok) {
    location = st == source_status::missing ? peak_status::missing : peak_status::failed;
    location_errno = st == source_status::missing ? ENOENT : 0;  // read_whole_file keeps no errno
    return;
  }
  const auto found = pnmem::detail::search_memory_cgroup(
      self, root_prefix + "/proc/self/mountinfo",
      [&](cgroup_mode hierarchy, const procfs::cgroup_mount& mount, std::string_view cgroup_path) {
        if (!(hierarchy == cgroup_mode::v2 ? use_v2(mount, cgroup_path) : use_v1(mount, cgroup_path))) return false;
        mode = hierarchy;
        return true;
      });
  switch (found) {
    case pnmem::detail::cgroup_search::used: location = peak_status::ok; break;
    case pnmem::detail::cgroup_search::failed: location = peak_status::failed; break;
    case pnmem::detail::cgroup_search::malformed: location = peak_status::malformed; break;
    case pnmem::detail::cgroup_search::none:
    case pnmem::detail::cgroup_search::missing: break;  // missing, as it starts
  }
}

// The process's v2 cgroup, or its nearest ancestor with the memory controller (memory.current).
bool peak_meter::impl::use_v2(const procfs::cgroup_mount& mount, std::string_view cgroup_path) {
  std::string_view below = procfs::path_below_root(cgroup_path, mount.root.view());
  for (;;) {
    const std::string d = dir_of(mount, below);
    source_file usage(d + "memory.current");
    if (usage.open()) {
      dir = d;
      current = std::move(usage);
      v2_peak_path = d + "memory.peak";
      open_v2_peak();
      return true;
    }
    if (below.empty()) return false;
    below = below.substr(0, below.rfind('/'));
  }
}

bool peak_meter::impl::use_v1(const procfs::cgroup_mount& mount, std::string_view cgroup_path) {
  const std::string d = dir_of(mount, procfs::path_below_root(cgroup_path, mount.root.view()));
  source_file usage(d + "memory.usage_in_bytes");
  if (!usage.open()) return false;
  dir = d;
  current = std::move(usage);
  v1_max_usage = source_file(d + "memory.max_usage_in_bytes");
  return true;
}

void peak_meter::impl::open_v2_peak() {
  v2_peak_fd = sys().open(v2_peak_path.c_str(), O_RDWR | O_CLOEXEC);
  if (v2_peak_fd >= 0) {
    v2_peak_writable = true;
    return;
  }
  v2_peak_open_errno = errno;  // read-only file (before 6.12), or no write permission: read without
  v2_peak_fd = sys().open(v2_peak_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (v2_peak_fd < 0) v2_peak_open_errno = errno;
}

peak_value peak_meter::impl::read_process() {
  peak_value v;
  const source_read r = status.read(std::span<char>(buffer));
  if (r.status != source_status::ok) {
    v.status = status_of(r);
    v.error_number = r.error_number;
    return v;
  }
  const procfs::result<procfs::status_memory> m = procfs::parse_status_memory(r.text);
  if (!m.ok()) {
    // A kernel thread or a zombie has no VmHWM: nothing to measure.
    v.status = m.error == procfs::errc::missing_key ? peak_status::missing : peak_status::malformed;
    return v;
  }
  v.status = peak_status::ok;
  v.peak_bytes = m.value.hwm_bytes;
  v.current_bytes = m.value.rss_bytes;
  return v;
}

peak_value peak_meter::impl::read_cgroup() {
  peak_value v;
  if (mode == cgroup_mode::none) {
    v.status = location;
    v.error_number = location_errno;
    return v;
  }
  // The peak first, then the usage (the peak is then never below the usage read with it... up to the
  // charges of that instant).
  if (mode == cgroup_mode::v2) {
    if (v2_peak_fd < 0) {
      v.status = status_of_errno(v2_peak_open_errno);  // ENOENT: no memory.peak before Linux 5.19
      v.error_number = v2_peak_open_errno;
      return v;
    }
    const pnmem::detail::pread_result r = pnmem::detail::pread_whole(v2_peak_fd, std::span<char>(buffer));
    if (r.status != pnmem::detail::pread_status::ok) {
      v.status = peak_status::failed;
      v.error_number = r.status == pnmem::detail::pread_status::too_large ? EFBIG : r.error_number;
      if (r.error_number == ENODEV) v.status = peak_status::missing;  // the cgroup was removed
      return v;
    }
    const procfs::result<std::uint64_t> p = procfs::parse_cgroup_bytes(std::string_view(buffer.data(), r.size));
    if (!p.ok()) {
      v.status = peak_status::malformed;
      return v;
    }
    v.peak_bytes = p.value;
  } else {
    const source_read r = v1_max_usage.read(std::span<char>(buffer));
    if (r.status != source_status::ok) {
      v.status = status_of(r);
      v.error_number = r.error_number;
      return v;
    }
    const procfs::result<std::uint64_t> p = procfs::parse_cgroup_bytes(r.text);
    if (!p.ok()) {
      v.status = peak_status::malformed;
      return v;
    }
    v.peak_bytes = p.value;
  }
  const source_read u = current.read(std::span<char>(buffer));
  if (u.status != source_status::ok) {
    v.status = status_of(u);
    v.error_number = u.error_number;
    v.peak_bytes = 0;
    return v;
  }
  const procfs::result<std::uint64_t> c = procfs::parse_cgroup_bytes(u.text);
  if (!c.ok()) {
    v.status = peak_status::malformed;
    v.peak_bytes = 0;
    return v;
  }
  v.current_bytes = c.value;
  v.status = peak_status::ok;
  return v;
}

peak_meter::peak_meter() : peak_meter(peak_meter_options{}) {}

peak_meter::peak_meter(peak_meter_options options) : impl_(std::make_unique<impl>()) {
  impl& m = *impl_;
  m.root_prefix = std::move(options.root);
  while (!m.root_prefix.empty() && m.root_prefix.back() == '/') m.root_prefix.pop_back();
  m.proc_dir = m.root_prefix + "/proc/" + (options.pid > 0 ? std::to_string(options.pid) : std::string("self"));
  m.status = source_file(m.proc_dir + "/status");
  m.locate(m.proc_dir + "/cgroup");
}

peak_meter::~peak_meter() = default;
peak_meter::peak_meter(peak_meter&&) noexcept = default;
peak_meter& peak_meter::operator=(peak_meter&&) noexcept = default;

peak_sample peak_meter::read() noexcept { return {impl_->read_process(), impl_->read_cgroup()}; }

peak_reset peak_meter::reset() noexcept {
  impl& m = *impl_;
  peak_reset out;
  // VmHWM: "5" to clear_refs (Linux 4.0+) sets it to VmRSS. Older kernels answer EINVAL.
  const std::string clear_refs = m.proc_dir + "/clear_refs";
  if (const int e = write_file(clear_refs, "5"); e == 0) {
    out.process = peak_status::ok;
  } else {
    out.process = e == EINVAL ? peak_status::unsupported : status_of_errno(e);
    out.process_error_number = e;
  }

  if (m.mode == cgroup_mode::none) {
    out.cgroup = m.location;
    out.cgroup_error_number = m.location_errno;
  } else if (m.mode == cgroup_mode::v1) {
    const std::string path = m.dir + "memory.max_usage_in_bytes";
    if (const int e = write_file(path, "0"); e == 0) {
      out.cgroup = peak_status::ok;
    } else {
      out.cgroup = write_refusal(path, e);
      out.cgroup_error_number = e;
    }
  } else if (m.v2_peak_fd < 0) {
    out.cgroup = status_of_errno(m.v2_peak_open_errno);
    out.cgroup_error_number = m.v2_peak_open_errno;
  } else if (!m.v2_peak_writable) {
    out.cgroup = write_refusal(m.v2_peak_path, m.v2_peak_open_errno);
    out.cgroup_error_number = m.v2_peak_open_errno;
  } else if (const int e = write_all(m.v2_peak_fd, "0"); e == 0) {
    out.cgroup = peak_status::ok;
  } else {
    // Opened for writing but the write refused: a kernel whose memory.peak takes no writes.
    out.cgroup = e == EINVAL || e == EACCES || e == EPERM || e == EBADF ? peak_status::unsupported : status_of_errno(e);
    out.cgroup_error_number = e;
  }
  return out;
}

cgroup_mode peak_meter::cgroup_hierarchy() const noexcept { return impl_->mode; }
const std::string& peak_meter::cgroup_dir() const noexcept { return impl_->dir; }
peak_status peak_meter::cgroup_location() const noexcept { return impl_->location; }
int peak_meter::cgroup_location_error_number() const noexcept { return impl_->location_errno; }

}  // namespace pnmem::linux_os
