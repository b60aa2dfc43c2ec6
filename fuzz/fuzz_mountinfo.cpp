// fuzz_mountinfo: procfs::find_cgroup_mount, unescape_mount_field and
// path_below_root over any bytes (/proc/self/mountinfo and a cgroup path).
//
// Input: a header line, then the mount table:
//   <mode><cgroup path>\n<mountinfo text...>
// mode '1' looks up the v1 memory hierarchy, any other byte v2; the cgroup path is
// the rest of the header line (as /proc/self/cgroup would give it). Without a '\n'
// the whole input is the header and the table is empty. Both parts are handed to
// the parser in exact-size heap buffers.
//
// Properties:
//   - cgroup_mode::none is malformed; otherwise the text contract of procfs.hpp;
//   - the answer agrees with a reference reading of the documented table: every line
//     has 6 fields, a "-" after them and fstype, source and super options after it
//     (else the table is malformed); the first mount of the hierarchy (v2: cgroup2;
//     v1: cgroup with `memory` in its super options) whose root contains a plain
//     path (absolute, no "." / ".." / empty components) and whose mount point no
//     later line mounts over (same mount point field) is found, with its root and
//     mount point unescaped (\ooo); mounted but none showing it is not_visible; no
//     such mount is absent; an undecodable root or mount point is malformed;
//   - a found mount's root contains the path, and path_below_root gives the rest of
//     the path: a view into it, without a trailing '/';
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`;
//   - appending an unrelated mount elsewhere changes nothing (over the found one, it
//     hides it, and the lines a found mount let go unread are read: the reference's
//     answer, malformed included); appending a mount of the
//     hierarchy at "/" finds it when nothing was found and the path is plain;
//     appending a line that is not a mount line makes the table malformed;
//   - unescape_mount_field (on the path and on the table) agrees with a reference
//     decoder, and every byte escaped as \ooo decodes back to itself (NUL aside).
#include <string>
#include <vector>

#include "procfs_checks.hpp"

using namespace pnmem_fuzz;

namespace {

using pnmem::cgroup_mode;
using procfs::mount_lookup;

// The reference decoder: ok and the bytes, or not ok.
struct unescaped {
  bool ok = false;
  std::string bytes;
};

unescaped reference_unescape(std::string_view field) {
  unescaped out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out.bytes += field[i];
      continue;
    }
    if (i + 3 >= field.size()) return {};
    unsigned v = 0;
    for (std::size_t k = 1; k <= 3; ++k) {
      const char o = field[i + k];
      if (o < '0' || o > '7') return {};
      v = v * 8 + static_cast<unsigned>(o - '0');
    }
    if (v == 0 || v > 255) return {};
    out.bytes += static_cast<char>(static_cast<unsigned char>(v));
    i += 3;
  }
  if (out.bytes.size() > procfs::mount_path_capacity) return {};
  out.ok = true;
  return out;
}

void check_unescape(std::string_view field) {
  const exact_text text(field);
  procfs::mount_path out;
  const bool ok = procfs::unescape_mount_field(text.view(), out);
  const unescaped ref = reference_unescape(field);
  FUZZ_CHECK(ok == ref.ok);
  if (ok) {
    FUZZ_CHECK(out.size <= procfs::mount_path_capacity && out.size <= field.size());
    FUZZ_CHECK(out.view() == ref.bytes);
    // Escaping every byte as \ooo (as the kernel escapes ' ', '\t', '\n', '\\') decodes
    // back. A raw NUL byte is copied, not refused (only a decoded one is; a mountinfo
    // text never holds one), and escaped it would be refused: not for such output.
    if (out.view().find('\0') != std::string_view::npos) return;
    std::string escaped;
    for (const char c : out.view()) {
      const auto b = static_cast<unsigned char>(c);
      escaped += '\\';
      escaped += static_cast<char>('0' + ((b >> 6) & 7));
      escaped += static_cast<char>('0' + ((b >> 3) & 7));
      escaped += static_cast<char>('0' + (b & 7));
    }
    const exact_text again(escaped);
    procfs::mount_path back;
    FUZZ_CHECK(procfs::unescape_mount_field(again.view(), back) && back.view() == out.view());
  }
}

bool plain_path(std::string_view p) {
  if (p.empty() || p.front() != '/') return false;
  std::size_t start = 1;
  while (start <= p.size()) {
    const std::size_t slash = p.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? p.size() : slash;
    const std::string_view part = p.substr(start, end - start);
    if (part == "." || part == "..") return false;
    if (part.empty() && slash != std::string_view::npos) return false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return true;
}

bool root_shows(std::string_view root, std::string_view path) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.substr(0, root.size()) == root && path[root.size()] == '/');
}

bool has_option(std::string_view options, std::string_view wanted) {
  while (true) {
    const std::size_t comma = options.find(',');
    if (options.substr(0, comma) == wanted) return true;
    if (comma == std::string_view::npos) return false;
    options.remove_prefix(comma + 1);
  }
}

struct match_ref {
  bool ok = false;
  mount_lookup lookup = mount_lookup::absent;
  std::string root;
  std::string mount_point;
};

match_ref read_reference(std::string_view table, cgroup_mode mode, std::string_view path) {
  if (mode == cgroup_mode::none || !well_formed_kernel_text(table)) return {};
  match_ref out;
  bool found = false;
  const auto lines = kernel_lines(table);
  // Each line's mount point as the table spells it: a later line with the same one is stacked over it.
  std::vector<std::string_view> points;
  for (const std::string_view line : lines) {
    const auto fields = blank_fields(line);
    points.push_back(fields.size() >= 5 ? fields[4] : std::string_view{});
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const auto fields = blank_fields(line);
    if (fields.size() < 6) return {};
    std::size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 3 >= fields.size()) return {};  // no "-", or fewer than three fields after it
    const std::string_view fstype = fields[dash + 1];
    const bool wanted =
        mode == cgroup_mode::v2 ? fstype == "cgroup2" : fstype == "cgroup" && has_option(fields[dash + 3], "memory");
    if (!wanted || found) continue;
    out.lookup = mount_lookup::not_visible;
    const unescaped root = reference_unescape(fields[3]);
    const unescaped mount_point = reference_unescape(fields[4]);
    if (!root.ok || !mount_point.ok) return {};
    bool hidden = false;
    for (std::size_t j = i + 1; j < points.size(); ++j) hidden = hidden || points[j] == fields[4];
    if (plain_path(path) && root_shows(root.bytes, path) && !hidden) {
      out.lookup = mount_lookup::found;
      out.root = root.bytes;
      out.mount_point = mount_point.bytes;
      found = true;
    }
  }
  out.ok = true;
  return out;
}

// A lookup's answer with its paths copied out.
struct owned {
  procfs::errc error = procfs::errc::ok;
  mount_lookup lookup = mount_lookup::absent;
  std::string root;
  std::string mount_point;
};

owned find_owned(std::string_view table, cgroup_mode mode, std::string_view path) {
  const exact_text t(table);
  const exact_text p(path);
  const auto r = procfs::find_cgroup_mount(t.view(), mode, p.view());
  owned out{r.error, r.value.lookup, {}, {}};
  if (r.ok() && r.value.lookup == mount_lookup::found) {
    out.root = std::string(r.value.mount.root.view());
    out.mount_point = std::string(r.value.mount.mount_point.view());
  }
  return out;
}

bool same(const owned& a, const owned& b) {
  return a.error == b.error && a.lookup == b.lookup && a.root == b.root && a.mount_point == b.mount_point;
}

// find_owned's answer, checked against the reference reading of the same table.
owned agreed_with_reference(std::string_view table, cgroup_mode mode, std::string_view path) {
  const owned got = find_owned(table, mode, path);
  const match_ref want = read_reference(table, mode, path);
  FUZZ_CHECK((got.error == procfs::errc::ok) == want.ok);
  if (want.ok) FUZZ_CHECK(got.lookup == want.lookup && got.root == want.root && got.mount_point == want.mount_point);
  return got;
}

void check_below_root(std::string_view path, std::string_view root) {
  const exact_text p(path);
  const exact_text r(root);
  const std::string_view below = procfs::path_below_root(p.view(), r.view());
  FUZZ_CHECK(views_into(below, p.view()));
  FUZZ_CHECK(below.empty() || below.back() != '/');
  if (root == "/") {
    std::string_view trimmed = path;
    while (!trimmed.empty() && trimmed.back() == '/') trimmed.remove_suffix(1);
    FUZZ_CHECK(below == trimmed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = as_text(data, size);
  const std::size_t nl = input.find('\n');
  const std::string_view header = input.substr(0, nl);
  const std::string_view table = nl == std::string_view::npos ? std::string_view{} : input.substr(nl + 1);
  const cgroup_mode mode = !header.empty() && header.front() == '1' ? cgroup_mode::v1 : cgroup_mode::v2;
  const std::string_view path = header.empty() ? header : header.substr(1);

  check_unescape(path);
  check_unescape(table);
  check_below_root(path, "/");
  check_below_root(path, path);
  check_below_root(path, path.substr(0, path.size() / 2));

  FUZZ_CHECK(find_owned(table, cgroup_mode::none, path).error == procfs::errc::malformed);

  const exact_text table_text(table);
  const exact_text path_text(path);
  const auto r = procfs::find_cgroup_mount(table_text.view(), mode, path_text.view());
  check_kernel_text_contract(table, r.error);
  const owned mine = agreed_with_reference(table, mode, path);  // the answer, owned, against the reference
  FUZZ_CHECK(r.error == mine.error);
  if (table.find('\r') == std::string_view::npos) FUZZ_CHECK(same(find_owned(with_crlf(table), mode, path), mine));
  if (!r.ok()) return 0;

  FUZZ_CHECK(r.value.lookup == mine.lookup);
  const bool found = r.value.lookup == mount_lookup::found;
  if (found) {
    const std::string_view root = r.value.mount.root.view();
    FUZZ_CHECK(root == mine.root && r.value.mount.mount_point.view() == mine.mount_point);
    FUZZ_CHECK(plain_path(path) && root_shows(root, path));
    FUZZ_CHECK(r.value.mount.root.size <= procfs::mount_path_capacity);
    FUZZ_CHECK(r.value.mount.mount_point.size <= procfs::mount_path_capacity);
    const std::string_view below = procfs::path_below_root(path_text.view(), root);
    FUZZ_CHECK(views_into(below, path_text.view()));
    FUZZ_CHECK(below.empty() || below.back() != '/');
    if (root != "/") FUZZ_CHECK(below.empty() || below.data() == path_text.view().data() + root.size());
  }
  check_cut_short(table, [&](std::string_view s) { return procfs::find_cgroup_mount(s, mode, path); });

  const std::string text(table);
  FUZZ_CHECK(find_owned(text + "not a mount line\n", mode, path).error == procfs::errc::malformed);
  // An unrelated mount at another mount point changes nothing. At the found one's it hides it, and the
  // lines after it that a found mount let go unread are read: the answer is the reference's, whatever
  // they hold (another mount that shows the path, none, or a root that does not decode).
  const owned with_proc = agreed_with_reference(text + "90 1 0:90 / /proc rw,relatime shared:9 - proc proc rw\n", mode, path);
  if (mine.mount_point != "/proc") FUZZ_CHECK(same(with_proc, mine));
  const std::string ours = mode == cgroup_mode::v2
                               ? "91 1 0:91 / /fuzz/mnt rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
                               : "91 1 0:91 / /fuzz/mnt rw,nosuid shared:3 - cgroup cgroup rw,cpu,memory\n";
  const owned added = agreed_with_reference(text + ours, mode, path);
  if (found && mine.mount_point != "/fuzz/mnt") {
    FUZZ_CHECK(same(added, mine));
  } else if (!found && plain_path(path)) {
    FUZZ_CHECK(same(added, owned{procfs::errc::ok, mount_lookup::found, "/", "/fuzz/mnt"}));
  } else if (!found) {
    FUZZ_CHECK(added.error == procfs::errc::ok && added.lookup == mount_lookup::not_visible);
  }
  return 0;
}
