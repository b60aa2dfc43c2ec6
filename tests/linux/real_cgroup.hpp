// tests/linux/real_cgroup.hpp - where this process's cgroup is on the real
// machine, located with the library's own parsers (procfs.hpp). Test code only,
// header-only, no doctest.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "file_text.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem::test {

// This process's place in one cgroup hierarchy.
struct cgroup_location {
  std::filesystem::path mount_point;  // where the hierarchy is mounted
  std::string mount_root;             // the hierarchy's directory shown there ("/" on a host)
  std::string path;                   // this process's cgroup, as /proc/self/cgroup names it
  std::filesystem::path dir;          // this process's cgroup directory

  // A directory under mount_point as /proc/<pid>/cgroup names it ("/a/b").
  std::string cgroup_path(const std::filesystem::path& d) const {
    const std::string below = "/" + d.lexically_relative(mount_point).generic_string();
    const std::string prefix = mount_root == "/" ? std::string() : mount_root;
    return below == "/." ? (prefix.empty() ? "/" : prefix) : prefix + below;
  }
};

// Where this process is in `hierarchy` (v1: the memory controller's), from the
// real /proc; nullopt when it is in none or no mount shows its cgroup.
inline std::optional<cgroup_location> own_cgroup(pnmem::cgroup_mode hierarchy) {
  const std::string self = read_file("/proc/self/cgroup").value_or(std::string());
  const std::string mountinfo = read_file("/proc/self/mountinfo").value_or(std::string());
  const auto where = pnmem::procfs::parse_self_cgroup(self);
  if (!where.ok()) return std::nullopt;
  const std::string_view path = hierarchy == pnmem::cgroup_mode::v2 ? where.value.v2_path : where.value.v1_memory_path;
  if (path.empty()) return std::nullopt;
  const auto m = pnmem::procfs::find_cgroup_mount(mountinfo, hierarchy, path);
  if (!m.ok() || m.value.lookup != pnmem::procfs::mount_lookup::found) return std::nullopt;
  cgroup_location out;
  out.mount_point = std::string(m.value.mount.mount_point.view());
  out.mount_root = std::string(m.value.mount.root.view());
  out.path = std::string(path);
  out.dir = std::string(m.value.mount.mount_point.view()) +
            std::string(pnmem::procfs::path_below_root(path, m.value.mount.root.view()));
  return out;
}

// own_cgroup's directory, or "" when it cannot be located; `cgroup_path`, when
// given, receives the path /proc/self/cgroup names.
inline std::string real_cgroup_dir(pnmem::cgroup_mode hierarchy, std::string* cgroup_path = nullptr) {
  const auto where = own_cgroup(hierarchy);
  if (!where) return {};
  if (cgroup_path != nullptr) *cgroup_path = where->path;
  return where->dir.string();
}

}  // namespace pnmem::test
