// Parsers of the kernel's memory text files. See pnmem/linux/procfs.hpp.
#include "pnmem/linux/procfs.hpp"

#include <limits>
#include <span>

namespace pnmem::procfs {
namespace {

constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }

// The checks every kernel text file passes before its lines are read.
errc check_text(std::string_view text) noexcept {
  if (text.empty()) return errc::empty;
  if (text.find('\0') != std::string_view::npos) return errc::malformed;
  if (text.back() != '\n') return errc::truncated;
  return errc::ok;
}

// Walks the '\n'-terminated lines of a checked text; each without its '\n' and
// a trailing '\r'.
class line_reader {
 public:
  explicit line_reader(std::string_view text) noexcept : rest_(text) {}
  // The text after the last line returned.
  std::string_view rest() const noexcept { return rest_; }
  bool next(std::string_view& line) noexcept {
    if (rest_.empty()) return false;
    const std::size_t nl = rest_.find('\n');
    const std::size_t end = nl == std::string_view::npos ? rest_.size() : nl;
    line = rest_.substr(0, end);
    rest_.remove_prefix(end == rest_.size() ? end : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  }

 private:
  std::string_view rest_;
};

// The next blank-separated field of `rest`, consumed; empty at the end.
std::string_view next_field(std::string_view& rest) noexcept {
  std::size_t i = 0;
  while (i < rest.size() && is_blank(rest[i])) ++i;
  std::size_t j = i;
  while (j < rest.size() && !is_blank(rest[j])) ++j;
  const std::string_view field = rest.substr(i, j - i);
  rest.remove_prefix(j);
  return field;
}

bool only_blanks(std::string_view s) noexcept {
  for (const char c : s) {
    if (!is_blank(c)) return false;
  }
  return true;
}

bool all_digits(std::string_view s) noexcept {
  for (const char c : s) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// A whole field of decimal digits: no sign, no spaces, overflow checked. A field
// with a stray character is malformed however many digits come before it.
result<std::uint64_t> to_u64(std::string_view digits) noexcept {
  if (digits.empty() || !all_digits(digits)) return {0, errc::malformed};
  std::uint64_t v = 0;
  for (const char c : digits) {
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (u64_max - d) / 10) return {0, errc::out_of_range};
    v = v * 10 + d;
  }
  return {v, errc::ok};
}

// A PSI average "12.34" (the kernel prints two decimals; up to nine are read),
// within [0, 100].
result<double> to_percent(std::string_view s) noexcept {
  const std::size_t dot = s.find('.');
  const std::string_view whole_digits = s.substr(0, dot);
  const std::string_view frac_digits = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (whole_digits.empty() || (dot != std::string_view::npos && frac_digits.empty())) {
    return {0.0, errc::malformed};
  }
  if (frac_digits.size() > 9 || !all_digits(frac_digits)) return {0.0, errc::malformed};
  const result<std::uint64_t> whole = to_u64(whole_digits);
  if (!whole.ok()) return {0.0, whole.error};
  if (whole.value > 100) return {0.0, errc::out_of_range};
  std::uint64_t frac = 0;
  std::uint64_t scale = 1;
  for (const char c : frac_digits) {
    frac = frac * 10 + static_cast<std::uint64_t>(c - '0');
    scale *= 10;
  }
  const double v = static_cast<double>(whole.value) + static_cast<double>(frac) / static_cast<double>(scale);
  if (v > 100.0) return {0.0, errc::out_of_range};
  return {v, errc::ok};
}

// The value of a one-line file: the line without surrounding blanks.
result<std::string_view> single_value(std::string_view text) noexcept {
  if (const errc e = check_text(text); e != errc::ok) return {{}, e};
  line_reader lines(text);
  std::string_view line;
  lines.next(line);
  std::string_view extra;
  if (lines.next(extra)) return {{}, errc::malformed};
  std::string_view rest = line;
  const std::string_view value = next_field(rest);
  if (value.empty() || !only_blanks(rest)) return {{}, errc::malformed};
  return {value, errc::ok};
}

// Records one required key's value, refusing a second occurrence.
template <class T>
errc take_once(bool& seen, T& slot, const result<T>& parsed) noexcept {
  if (seen) return errc::duplicate_key;
  if (!parsed.ok()) return parsed.error;
  seen = true;
  slot = parsed.value;
  return errc::ok;
}

// Calls `on_line` for each line of a kernel text file that check_text accepts.
// The first error, the text's or a line's, ends the walk and is the answer.
template <class OnLine>
errc for_each_line(std::string_view text, OnLine&& on_line) noexcept {
  if (const errc e = check_text(text); e != errc::ok) return e;
  line_reader lines(text);
  std::string_view line;
  while (lines.next(line)) {
    if (const errc e = on_line(line); e != errc::ok) return e;
  }
  return errc::ok;
}

// The value of a "Key:   <n> kB" line, the text after its ':', in bytes: a
// whole decimal field, then "kB", then nothing but blanks. kB * 1024 is
// overflow-checked.
result<std::uint64_t> kib_field_bytes(std::string_view rest) noexcept {
  const std::string_view number = next_field(rest);
  const std::string_view unit = next_field(rest);
  if (unit != "kB" || !only_blanks(rest)) return {0, errc::malformed};
  const result<std::uint64_t> kib = to_u64(number);
  if (!kib.ok()) return kib;
  if (kib.value > u64_max / 1024) return {0, errc::out_of_range};
  return {kib.value * 1024, errc::ok};
}

// One key of a "Key: <n> kB" file, wanted exactly once.
struct kib_key {
  std::string_view name;  // the text before the ':'
  std::uint64_t* bytes;   // where its value goes
  bool seen = false;
};

// Reads `keys` from a "Key: <n> kB" file (/proc/meminfo, /proc/<pid>/status):
// the text checks and line walk of for_each_line; a line whose text before its
// first ':' is one of the keys must hold "<n> kB" (kib_field_bytes) and comes
// once (take_once: a second is duplicate_key, whatever it holds); every other
// line is not looked at. Each key must be there (missing_key). The first error
// in the text is the answer; the values written are then meaningless.
errc read_kib_keys(std::string_view text, std::span<kib_key> keys) noexcept {
  const errc walked = for_each_line(text, [&](std::string_view line) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return errc::ok;
    const std::string_view key = line.substr(0, colon);
    for (kib_key& k : keys) {
      if (k.name == key) return take_once(k.seen, *k.bytes, kib_field_bytes(line.substr(colon + 1)));
    }
    return errc::ok;
  });
  if (walked != errc::ok) return walked;
  for (const kib_key& k : keys) {
    if (!k.seen) return errc::missing_key;
  }
  return errc::ok;
}

}  // namespace

result<meminfo> parse_meminfo(std::string_view text) noexcept {
  meminfo m;
  kib_key keys[] = {{"MemTotal", &m.total_bytes}, {"MemAvailable", &m.avail_bytes}};
  if (const errc e = read_kib_keys(text, keys); e != errc::ok) return {{}, e};
  // A machine with no memory is garbage, and a 0 total would read as "unknown" downstream.
  if (m.total_bytes == 0) return {{}, errc::out_of_range};
  return {m, errc::ok};
}

result<status_memory> parse_status_memory(std::string_view text) noexcept {
  status_memory m;
  kib_key keys[] = {{"VmHWM", &m.hwm_bytes}, {"VmRSS", &m.rss_bytes}};
  if (const errc e = read_kib_keys(text, keys); e != errc::ok) return {{}, e};
  return {m, errc::ok};
}

namespace {

result<psi_line> parse_psi_fields(std::string_view rest) noexcept {
  psi_line p;
  bool seen[4] = {false, false, false, false};
  for (std::string_view field = next_field(rest); !field.empty(); field = next_field(rest)) {
    const std::size_t eq = field.find('=');
    if (eq == std::string_view::npos) return {{}, errc::malformed};
    const std::string_view key = field.substr(0, eq);
    const std::string_view value = field.substr(eq + 1);
    errc e = errc::ok;
    if (key == "avg10") {
      e = take_once(seen[0], p.avg10_pct, to_percent(value));
    } else if (key == "avg60") {
      e = take_once(seen[1], p.avg60_pct, to_percent(value));
    } else if (key == "avg300") {
      e = take_once(seen[2], p.avg300_pct, to_percent(value));
    } else if (key == "total") {
      e = take_once(seen[3], p.total_us, to_u64(value));
    }  // a field a later kernel adds is not ours to judge
    if (e != errc::ok) return {{}, e};
  }
  for (const bool s : seen) {
    if (!s) return {{}, errc::missing_key};
  }
  return {p, errc::ok};
}

}  // namespace

result<psi> parse_psi(std::string_view text) noexcept {
  psi out;
  bool seen_some = false;
  const errc walked = for_each_line(text, [&](std::string_view line) {
    std::string_view rest = line;
    const std::string_view kind = next_field(rest);
    const bool is_some = kind == "some";
    if (!is_some && kind != "full") return errc::ok;
    const result<psi_line> fields = parse_psi_fields(rest);
    return is_some ? take_once(seen_some, out.some, fields) : take_once(out.has_full, out.full, fields);
  });
  if (walked != errc::ok) return {{}, walked};
  if (!seen_some) return {{}, errc::missing_key};
  return {out, errc::ok};
}

result<std::uint64_t> parse_cgroup_bytes(std::string_view text) noexcept {
  const result<std::string_view> v = single_value(text);
  if (!v.ok()) return {0, v.error};
  return to_u64(v.value);
}

result<cgroup_limit> parse_cgroup_v2_limit(std::string_view text) noexcept {
  const result<std::string_view> v = single_value(text);
  if (!v.ok()) return {{}, v.error};
  if (v.value == "max") return {{0, false}, errc::ok};
  const result<std::uint64_t> n = to_u64(v.value);
  if (!n.ok()) return {{}, n.error};
  return {{n.value, true}, errc::ok};
}

result<cgroup_limit> parse_cgroup_v1_limit(std::string_view text) noexcept {
  const result<std::uint64_t> n = parse_cgroup_bytes(text);
  if (!n.ok()) return {{}, n.error};
  if (n.value >= v1_unlimited_threshold_bytes) return {{0, false}, errc::ok};
  return {{n.value, true}, errc::ok};
}

result<std::uint64_t> parse_memory_stat_inactive_file(std::string_view text, cgroup_mode hierarchy) noexcept {
  if (hierarchy == cgroup_mode::none) return {0, errc::malformed};
  std::uint64_t local = 0;
  std::uint64_t hierarchical = 0;
  bool seen_local = false;
  bool seen_hierarchical = false;
  const errc walked = for_each_line(text, [&](std::string_view line) {
    std::string_view rest = line;
    const std::string_view key = next_field(rest);
    const bool is_local = key == "inactive_file";
    const bool is_hierarchical = hierarchy == cgroup_mode::v1 && key == "total_inactive_file";
    if (!is_local && !is_hierarchical) return errc::ok;
    const std::string_view value = next_field(rest);
    result<std::uint64_t> n = to_u64(value);
    if (n.ok() && !only_blanks(rest)) n.error = errc::malformed;
    return is_local ? take_once(seen_local, local, n) : take_once(seen_hierarchical, hierarchical, n);
  });
  if (walked != errc::ok) return {0, walked};
  if (seen_hierarchical) return {hierarchical, errc::ok};
  if (seen_local) return {local, errc::ok};
  return {0, errc::missing_key};
}

result<self_cgroup> parse_self_cgroup(std::string_view text) noexcept {
  self_cgroup out;
  bool seen_v2 = false;
  bool seen_memory = false;
  const errc walked = for_each_line(text, [&](std::string_view line) {
    const std::size_t c1 = line.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return errc::malformed;
    const result<std::uint64_t> id = to_u64(line.substr(0, c1));
    if (!id.ok()) return errc::malformed;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    // The path is everything after the second colon: a cgroup name may hold ':'.
    const std::string_view path = line.substr(c2 + 1);
    if (path.empty() || path.front() != '/') return errc::malformed;

    if (id.value == 0 && controllers.empty()) {
      if (seen_v2) return errc::duplicate_key;
      seen_v2 = true;
      out.v2_path = path;
      return errc::ok;
    }
    std::string_view list = controllers;
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      const std::string_view name = list.substr(0, comma);
      list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
      if (name != "memory") continue;
      if (seen_memory) return errc::duplicate_key;
      seen_memory = true;
      out.v1_memory_path = path;
    }
    return errc::ok;
  });
  if (walked != errc::ok) return {{}, walked};
  return {out, errc::ok};
}

bool unescape_mount_field(std::string_view field, mount_path& out) noexcept {
  out.size = 0;
  for (std::size_t i = 0; i < field.size(); ++i) {
    char c = field[i];
    if (c == '\\') {
      if (field.size() - i < 4) return false;  // "\ooo": three octal digits must follow
      unsigned v = 0;
      for (std::size_t k = 1; k <= 3; ++k) {
        const char o = field[i + k];
        if (o < '0' || o > '7') return false;
        v = v * 8 + static_cast<unsigned>(o - '0');
      }
      if (v == 0 || v > 255) return false;  // a NUL cannot be part of a path
      c = static_cast<char>(static_cast<unsigned char>(v));
      i += 3;
    }
    if (out.size == out.bytes.size()) return false;
    out.bytes[out.size++] = c;
  }
  return true;
}

namespace {

// True when the path from /proc/self/cgroup lies in (or is) the mounted sub-tree `root`.
bool root_contains(std::string_view root, std::string_view path) noexcept {
  if (root == "/") return true;
  if (path.substr(0, root.size()) != root) return false;
  return path.size() == root.size() || path[root.size()] == '/';
}

// A cgroup path that names a directory plainly: absolute, no "." or ".."
// components. The kernel prints "/../x" for a cgroup outside the reader's
// cgroup namespace; such a cgroup has no directory we can open.
bool plain_cgroup_path(std::string_view path) noexcept {
  if (path.empty() || path.front() != '/') return false;
  std::string_view rest = path.substr(1);
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part == "." || part == "..") return false;
    if (part.empty() && slash != std::string_view::npos) return false;  // "//"
    rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
  }
  return true;
}

bool has_option(std::string_view options, std::string_view wanted) noexcept {
  while (!options.empty()) {
    const std::size_t comma = options.find(',');
    if (options.substr(0, comma) == wanted) return true;
    options.remove_prefix(comma == std::string_view::npos ? options.size() : comma + 1);
  }
  return false;
}

// True when a line of `later` (the mount table after a mount) mounts anything at `mount_point` (its
// field as the table spells it): the later mount is stacked over the earlier one and hides it. A line
// too short to have a mount point is left to the caller's own check.
bool mounted_over(std::string_view later, std::string_view mount_point) noexcept {
  line_reader lines(later);
  std::string_view line;
  while (lines.next(line)) {
    std::string_view rest = line;
    std::string_view field;
    for (int i = 0; i < 5; ++i) field = next_field(rest);
    if (field == mount_point) return true;
  }
  return false;
}

}  // namespace

result<cgroup_mount_match> find_cgroup_mount(std::string_view mountinfo, cgroup_mode hierarchy,
                                             std::string_view cgroup_path) noexcept {
  if (hierarchy == cgroup_mode::none) return {{}, errc::malformed};
  if (const errc e = check_text(mountinfo); e != errc::ok) return {{}, e};
  const bool plain = plain_cgroup_path(cgroup_path);
  cgroup_mount_match match;
  bool found = false;
  line_reader lines(mountinfo);
  std::string_view line;
  while (lines.next(line)) {
    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    std::string_view rest = line;
    std::string_view fields[6];
    for (auto& f : fields) f = next_field(rest);
    if (fields[5].empty()) return {{}, errc::malformed};
    std::string_view f = next_field(rest);
    while (!f.empty() && f != "-") f = next_field(rest);
    if (f != "-") return {{}, errc::malformed};
    const std::string_view fstype = next_field(rest);
    const std::string_view source = next_field(rest);
    const std::string_view super_options = next_field(rest);
    if (fstype.empty() || source.empty() || super_options.empty()) return {{}, errc::malformed};

    const bool wanted = hierarchy == cgroup_mode::v2
                            ? fstype == "cgroup2"
                            : (fstype == "cgroup" && has_option(super_options, "memory"));
    if (!wanted || found) continue;
    if (match.lookup == mount_lookup::absent) match.lookup = mount_lookup::not_visible;
    if (!unescape_mount_field(fields[3], match.mount.root) ||
        !unescape_mount_field(fields[4], match.mount.mount_point)) {
      return {{}, errc::malformed};
    }
    // A mount another one was later stacked on (same mount point) shows that one's tree instead.
    if (plain && root_contains(match.mount.root.view(), cgroup_path) && !mounted_over(lines.rest(), fields[4])) {
      match.lookup = mount_lookup::found;
      found = true;  // keep reading: a malformed line later still makes the table garbage
    }
  }
  if (!found) {
    match.mount = {};
  }
  return {match, errc::ok};
}

std::string_view path_below_root(std::string_view cgroup_path, std::string_view root) noexcept {
  std::string_view below = cgroup_path;
  if (root != "/") below.remove_prefix(root.size() < below.size() ? root.size() : below.size());
  while (!below.empty() && below.back() == '/') below.remove_suffix(1);
  return below;
}

}  // namespace pnmem::procfs
