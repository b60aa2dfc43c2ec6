// memory_cgroup.hpp - finding the process's memory cgroup: the sampler's and the peak meter's one walk.
//
// Private to the Linux adapter (not installed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "pnmem/linux/procfs.hpp"
#include "source_file.hpp"

namespace pnmem::detail {

enum class cgroup_search : std::uint8_t {
  used,       // `use` took a cgroup
  none,       // in no memory cgroup, none that a mount shows, or `use` took none
  missing,    // no mount table
  failed,     // the mount table could not be read
  malformed,  // /proc/self/cgroup or the mount table is garbage
};

// Offers the memory cgroups that `self_cgroup_text` (/proc/self/cgroup's bytes) names and the mount
// table at `mountinfo_path` shows, v2's first, then v1's, to use(hierarchy, mount, cgroup_path) until it
// returns true.
template <class Use>
cgroup_search search_memory_cgroup(std::string_view self_cgroup_text, const std::string& mountinfo_path, Use&& use) {
  const procfs::result<procfs::self_cgroup> where = procfs::parse_self_cgroup(self_cgroup_text);
  if (!where.ok()) return cgroup_search::malformed;
  if (where.value.v2_path.empty() && where.value.v1_memory_path.empty()) return cgroup_search::none;
  std::string mountinfo;
  const source_status st = read_whole_file(mountinfo_path, mountinfo);
  if (st != source_status::ok) return st == source_status::missing ? cgroup_search::missing : cgroup_search::failed;
  const std::pair<cgroup_mode, std::string_view> candidates[] = {
      {cgroup_mode::v2, where.value.v2_path},
      {cgroup_mode::v1, where.value.v1_memory_path},
  };
  for (const auto& [hierarchy, cgroup_path] : candidates) {
    if (cgroup_path.empty()) continue;
    const procfs::result<procfs::cgroup_mount_match> match = procfs::find_cgroup_mount(mountinfo, hierarchy, cgroup_path);
    if (!match.ok()) return cgroup_search::malformed;
    if (match.value.lookup == procfs::mount_lookup::found && use(hierarchy, match.value.mount, cgroup_path)) {
      return cgroup_search::used;
    }
  }
  return cgroup_search::none;
}

}  // namespace pnmem::detail
