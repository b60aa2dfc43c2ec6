// tests/linux/real_cgroup.hpp - where this process's cgroup is on the real machine.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "pnmem/linux/procfs.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem_test {

inline std::string slurp(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Where this process's cgroup of `hierarchy` is, from the real /proc, or "" when
// it cannot be located.
inline std::string real_cgroup_dir(pnmem::cgroup_mode hierarchy, std::string* cgroup_path = nullptr) {
  const std::string self = slurp("/proc/self/cgroup");
  const std::string mountinfo = slurp("/proc/self/mountinfo");
  const auto where = pnmem::procfs::parse_self_cgroup(self);
  if (!where.ok()) return {};
  const std::string_view path = hierarchy == pnmem::cgroup_mode::v2 ? where.value.v2_path : where.value.v1_memory_path;
  if (path.empty()) return {};
  const auto m = pnmem::procfs::find_cgroup_mount(mountinfo, hierarchy, path);
  if (!m.ok() || m.value.lookup != pnmem::procfs::mount_lookup::found) return {};
  if (cgroup_path != nullptr) *cgroup_path = std::string(path);
  return std::string(m.value.mount.mount_point.view()) +
         std::string(pnmem::procfs::path_below_root(path, m.value.mount.root.view()));
}


}  // namespace pnmem_test
