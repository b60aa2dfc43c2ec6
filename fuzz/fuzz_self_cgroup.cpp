// fuzz_self_cgroup: procfs::parse_self_cgroup over any bytes (/proc/self/cgroup).
//
// Properties:
//   - the text contract of procfs.hpp, a named error;
//   - a success agrees with a reference reading of the documented format: every line
//     "id:controllers:/path" (id decimal, the path everything after the second ':'
//     and starting with '/'); "0::/path" is the v2 path, a line whose comma-separated
//     controllers name `memory` gives the v1 memory path; two v2 lines or two
//     mentions of memory are errors;
//   - the paths view into the input, start with '/' when not empty, and follow a ':';
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`;
//   - appending a v2 line, or a memory line, is duplicate_key when there was one,
//     else adds exactly that path; appending another controller's line changes nothing.
#include <string>

#include "procfs_checks.hpp"

using namespace pnmem_fuzz;

namespace {

// A parse's answer with its paths copied out of the text.
struct owned {
  procfs::errc error = procfs::errc::ok;
  std::string v2_path;
  std::string v1_memory_path;
};

owned parse_owned(std::string_view t) {
  const exact_text text(t);
  const auto r = procfs::parse_self_cgroup(text.view());
  FUZZ_CHECK(views_into(r.value.v2_path, text.view()) && views_into(r.value.v1_memory_path, text.view()));
  return {r.error, std::string(r.value.v2_path), std::string(r.value.v1_memory_path)};
}

bool same(const owned& a, const owned& b) {
  return a.error == b.error && a.v2_path == b.v2_path && a.v1_memory_path == b.v1_memory_path;
}

struct reference {
  bool ok = false;
  std::string_view v2_path;
  std::string_view v1_memory_path;
};

reference read_reference(std::string_view t) {
  if (!well_formed_kernel_text(t)) return {};
  reference out;
  int v2_lines = 0;
  int memory_mentions = 0;
  for (const std::string_view line : kernel_lines(t)) {
    const std::size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) return {};
    const std::size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return {};
    const u64_ref id = reference_u64(line.substr(0, c1));
    if (id.state != 1) return {};
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view path = line.substr(c2 + 1);
    if (path.empty() || path.front() != '/') return {};
    if (id.value == 0 && controllers.empty()) {
      if (++v2_lines > 1) return {};
      out.v2_path = path;
      continue;
    }
    while (!controllers.empty()) {
      const std::size_t comma = controllers.find(',');
      if (controllers.substr(0, comma) == "memory") {
        if (++memory_mentions > 1) return {};
        out.v1_memory_path = path;
      }
      if (comma == std::string_view::npos) break;
      controllers.remove_prefix(comma + 1);
    }
  }
  out.ok = true;
  return out;
}

void check_path(std::string_view path, std::string_view t) {
  if (path.empty()) return;
  FUZZ_CHECK(path.front() == '/');
  FUZZ_CHECK(views_into(path, t));
  FUZZ_CHECK(path.data() > t.data() && path.data()[-1] == ':');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);
  const auto r = parse_checked(t, procfs::parse_self_cgroup);
  const reference ref = read_reference(t);
  FUZZ_CHECK(r.ok() == ref.ok);

  const owned mine{r.error, std::string(r.value.v2_path), std::string(r.value.v1_memory_path)};
  if (t.find('\r') == std::string_view::npos) FUZZ_CHECK(same(parse_owned(with_crlf(t)), mine));
  if (!r.ok()) return 0;

  FUZZ_CHECK(r.value.v2_path == ref.v2_path && r.value.v1_memory_path == ref.v1_memory_path);
  check_path(r.value.v2_path, t);
  check_path(r.value.v1_memory_path, t);
  check_cut_short(t, [](std::string_view s) { return procfs::parse_self_cgroup(s); });

  const std::string text(t);
  const owned v2_added = parse_owned(text + "0::/fuzz.slice/a:b\n");
  if (r.value.v2_path.empty()) {
    FUZZ_CHECK(same(v2_added, owned{procfs::errc::ok, "/fuzz.slice/a:b", mine.v1_memory_path}));
  } else {
    FUZZ_CHECK(v2_added.error == procfs::errc::duplicate_key);
  }
  const owned memory_added = parse_owned(text + "13:cpu,memory:/fuzz\n");
  if (r.value.v1_memory_path.empty()) {
    FUZZ_CHECK(same(memory_added, owned{procfs::errc::ok, mine.v2_path, "/fuzz"}));
  } else {
    FUZZ_CHECK(memory_added.error == procfs::errc::duplicate_key);
  }
  FUZZ_CHECK(same(parse_owned(text + "12:pids,name=systemd:/x\n"), mine));
  return 0;
}
