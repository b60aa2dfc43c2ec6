// Host memory from /proc and the process's memory cgroup. The formula and the
// rules for missing sources are in pnmem/linux/linux_sampler.hpp.
#include "pnmem/linux/linux_sampler.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "pnmem/clock_ns.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/psi_window.hpp"
#include "memory_cgroup.hpp"
#include "source_file.hpp"

namespace pnmem {
namespace {

using detail::source_file;
using detail::source_read;
using detail::source_status;

// Large enough for meminfo (~1.5 KiB), memory.stat (~2 KiB on v1 with its
// total_* lines) and a /proc/self/cgroup of long container paths, with room to spare.
constexpr std::size_t read_buffer_bytes = 16 * 1024;

// One cgroup on the way from the process's cgroup up to the mount root.
struct cgroup_level {
  std::string path;   // as /proc/self/cgroup names it (the limit_cgroup provenance)
  std::string dir;    // its directory under the root, with a trailing '/'
  source_file usage;  // memory.current | memory.usage_in_bytes
  source_file limit;  // memory.max | memory.limit_in_bytes
  source_file high;   // memory.high (v2 only; pathless in v1)
  source_file stat;   // memory.stat
};

// Percent of the wall interval that the counter says was stalled. A clock that
// did not move or went back gives 0; the difference is taken unsigned, so no
// pair of clock readings overflows.
double stall_rate_pct(std::uint64_t before_us, std::uint64_t after_us, std::int64_t before_ns,
                      std::int64_t after_ns) {
  if (after_us < before_us || after_ns <= before_ns) return 0.0;
  const double interval_ns =
      static_cast<double>(static_cast<std::uint64_t>(after_ns) - static_cast<std::uint64_t>(before_ns));
  const double rate = 100.0 * static_cast<double>(after_us - before_us) / (interval_ns / 1000.0);
  return rate > 100.0 ? 100.0 : rate;
}

// The interval's rate where the last kernel period's stall is one the kernel's averages register (at
// least 1 % of 2 s: psi_window.hpp psi_stall_registers), else 0: a trickle of microsecond stalls that
// avg10 never shows does not raise the level either.
double registered_rate_pct(const psi_window& period, double rate_pct) {
  const psi_window::span held = period.held();
  return psi_stall_registers(held.stall_us, held.span_ns) ? rate_pct : 0.0;
}

// What the cgroup files said in one sample.
struct cgroup_reading {
  std::optional<std::uint64_t> limit_bytes;  // effective limit; empty = no limit anywhere
  std::size_t limiting = 0;                  // index of the level holding it
  std::uint64_t max_bytes = 0;               // min memory.max / limit_in_bytes; 0 = unset
  std::uint64_t high_bytes = 0;              // min memory.high; 0 = unset
  std::optional<std::uint64_t> usage_bytes;  // of the limiting level (or the process's)
  std::uint64_t working_set_bytes = 0;
};

std::uint64_t min_set(std::uint64_t current, std::uint64_t candidate) {
  return current == 0 || candidate < current ? candidate : current;
}

// One source's value: ok; missing (absent: its numbers stay 0, unmarked);
// failed (it exists but could not be read, or its bytes did not parse).
template <class T>
struct source_value {
  source_status status = source_status::missing;
  T value{};
  bool ok() const noexcept { return status == source_status::ok; }
};

// The bytes of a read, parsed by `parse` (a procfs parser).
template <class Parse>
auto parse_read(const source_read& r, Parse parse) -> source_value<decltype(parse(r.text).value)> {
  if (r.status != source_status::ok) return {r.status, {}};
  const auto v = parse(r.text);
  if (!v.ok()) return {source_status::failed, {}};
  return {source_status::ok, v.value};
}

// The provenance bit a source's value earns.
void mark(sample_provenance& p, host_source source, source_status status) {
  if (status == source_status::ok) p.mark_read(source);
  if (status == source_status::failed) p.mark_failed(source);
}

}  // namespace

struct linux_sampler::impl {
  explicit impl(linux_sampler_options options)
      : root_prefix(std::move(options.root)),
        clock(options.monotonic_ns ? std::move(options.monotonic_ns) : std::function<std::int64_t()>(pnmem::steady_now_ns)),
        source(options.psi_source),
        log(std::move(options.log)),
        buffer(read_buffer_bytes) {
    while (!root_prefix.empty() && root_prefix.back() == '/') root_prefix.pop_back();
    self_cgroup = source_file(root_prefix + "/proc/self/cgroup");
    meminfo = source_file(root_prefix + "/proc/meminfo");
    psi = source_file(root_prefix + "/proc/pressure/memory");
  }

  host_sample sample();
  source_read read(source_file& f) {
    last_reads.push_back(&f);
    return f.read(std::span<char>(buffer));
  }
  void refresh_cgroup();
  void locate(std::string_view self_cgroup_text);
  bool build_levels(cgroup_mode hierarchy, const procfs::cgroup_mount& mount, std::string_view cgroup_path);
  std::optional<procfs::meminfo> read_meminfo(host_sample& h);
  void read_psi(host_sample& h);
  void take_psi(host_sample& h, const source_read& r, const std::string& path, host_source bit);
  void note(const std::string& line);
  cgroup_reading read_cgroup(sample_provenance& p);

  std::string root_prefix;  // options.root without a trailing '/': "" for "/"
  std::function<std::int64_t()> clock;
  psi_source source;
  std::function<void(std::string_view)> log;
  std::vector<char> buffer;
  source_file self_cgroup;
  source_file meminfo;
  source_file psi;

  // Where the memory cgroup is, as located from located_from (/proc/self/cgroup's bytes).
  std::string located_from;
  bool located = false;
  bool location_failed = false;  // /proc/self/cgroup or the mount table was garbage
  cgroup_mode mode = cgroup_mode::none;
  std::vector<cgroup_level> levels;  // [0] = the process's cgroup, back() = the mount root
  std::size_t usage_level = 0;       // the nearest level with a usage file: the process's memory cgroup

  // The v2 cgroup's memory.pressure for the PSI trigger: written by sample(),
  // taken by the waiting thread (wait_for), which arms it.
  pnmem::detail::mutex pressure_mu;
  std::string pressure_file PNMEM_GUARDED_BY(pressure_mu);
  std::string armed_pressure_file;  // the waiting thread's

  // PSI source cgroup: the process's v2 memory.pressure (reopened when the cgroup changes), and
  // why the last sample read the host's file instead (empty: it read the cgroup's, or none yet).
  source_file cgroup_psi;
  std::string fallback_reason;
  std::string reference_path;  // the file the rate's reference was read from

  // The previous PSI reading, for the stall rate.
  bool have_psi_reference = false;
  bool reference_has_full = false;
  std::uint64_t reference_some_us = 0;
  std::uint64_t reference_full_us = 0;
  std::int64_t reference_ns = 0;
  // The last kernel PSI period (2 s) of each counter: a rate counts only when its stall is one the
  // kernel's averages register (psi_window.hpp psi_stall_registers).
  psi_window some_period;
  psi_window full_period;

  bool trigger_armed = false;
  std::vector<source_file*> last_reads;  // what the last sample read: the benchmark's floor
};

void linux_sampler::impl::refresh_cgroup() {
  const source_read r = read(self_cgroup);
  if (r.status != source_status::ok) {
    levels.clear();
    mode = cgroup_mode::none;
    located = false;
    located_from.clear();
    location_failed = r.status == source_status::failed;
    return;
  }
  // The common case: same cgroup as last time, keep the open files.
  if (located && !location_failed && r.text == located_from) return;
  located_from.assign(r.text);  // copy: the read buffer is reused by the next read
  locate(located_from);
  located = true;
}

void linux_sampler::impl::locate(std::string_view self_cgroup_text) {
  levels.clear();
  usage_level = 0;
  mode = cgroup_mode::none;
  const detail::cgroup_search found = detail::search_memory_cgroup(
      self_cgroup_text, root_prefix + "/proc/self/mountinfo",
      [&](cgroup_mode hierarchy, const procfs::cgroup_mount& mount, std::string_view cgroup_path) {
        if (build_levels(hierarchy, mount, cgroup_path)) {
          mode = hierarchy;
          return true;
        }
        levels.clear();
        return false;
      });
  location_failed = found == detail::cgroup_search::failed || found == detail::cgroup_search::malformed;
}

bool linux_sampler::impl::build_levels(cgroup_mode hierarchy, const procfs::cgroup_mount& mount,
                                       std::string_view cgroup_path) {
  const bool v2 = hierarchy == cgroup_mode::v2;
  const std::string_view mount_root = mount.root.view();
  std::string dir_prefix = root_prefix;
  if (mount.mount_point.view() != "/") dir_prefix += mount.mount_point.view();
  const std::string_view root_path = mount_root == "/" ? std::string_view{} : mount_root;

  std::string_view below = procfs::path_below_root(cgroup_path, mount_root);
  for (;;) {
    cgroup_level level;
    level.path.assign(root_path).append(below);
    if (level.path.empty()) level.path.push_back('/');  // not = "/": GCC 12 -O3 warns falsely (-Wrestrict)
    const std::string dir = dir_prefix + std::string(below) + "/";
    level.dir = dir;
    level.usage = source_file(dir + (v2 ? "memory.current" : "memory.usage_in_bytes"));
    level.limit = source_file(dir + (v2 ? "memory.max" : "memory.limit_in_bytes"));
    level.high = source_file(v2 ? dir + "memory.high" : std::string());
    level.stat = source_file(dir + "memory.stat");
    levels.push_back(std::move(level));
    if (below.empty()) break;
    below = below.substr(0, below.rfind('/'));
  }
  // The hierarchy is ours only where the memory controller is: a v2 cgroup
  // without it (and the root cgroup) has no memory.current, and its memory is
  // charged to the nearest ancestor that has one. That cgroup's usage stands for
  // the process's when nothing is limited.
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (levels[i].usage.open()) {
      usage_level = i;
      return true;
    }
  }
  return false;
}

std::optional<procfs::meminfo> linux_sampler::impl::read_meminfo(host_sample& h) {
  sample_provenance& p = h.provenance;
  const source_value<procfs::meminfo> m = parse_read(read(meminfo), procfs::parse_meminfo);
  mark(p, host_source::meminfo, m.status);
  if (!m.ok()) return std::nullopt;
  p.meminfo_total_bytes = m.value.total_bytes;
  p.meminfo_avail_bytes = m.value.avail_bytes;
  return m.value;
}

void linux_sampler::impl::note(const std::string& line) {
  if (log) {
    log(line);
  } else {
    std::fprintf(stderr, "pnmem: %s\n", line.c_str());
  }
}

// The PSI file the source says, read into `h` (nothing for off).
void linux_sampler::impl::read_psi(host_sample& h) {
  if (source == psi_source::off) return;
  if (source == psi_source::cgroup) {
    // The process's own cgroup's memory.pressure, where cgroup v2 gives it one.
    std::string why;
    if (mode == cgroup_mode::v2 && !levels.empty()) {
      const std::string path = levels.front().dir + "memory.pressure";
      if (cgroup_psi.path() != path) cgroup_psi = source_file(path);
      const source_read r = read(cgroup_psi);
      if (r.status == source_status::ok) {
        if (!fallback_reason.empty()) note("PSI source cgroup: reading " + path + " again");
        fallback_reason.clear();
        take_psi(h, r, cgroup_psi.path(), host_source::cgroup_pressure);
        return;
      }
      if (r.status == source_status::failed) h.provenance.mark_failed(host_source::cgroup_pressure);
      why = path + (r.status == source_status::failed ? " could not be read" : " does not exist (no PSI in cgroups)");
    } else {
      why = mode == cgroup_mode::v1 ? "the memory cgroup is v1 (no memory.pressure)"
                                    : "the process is in no v2 memory cgroup";
    }
    if (why != fallback_reason) {
      note("PSI source cgroup: " + why + "; reading /proc/pressure/memory (the whole box's stalls) instead");
      fallback_reason = why;
    }
  }
  take_psi(h, read(psi), psi.path(), host_source::psi);
}

void linux_sampler::impl::take_psi(host_sample& h, const source_read& r, const std::string& path, host_source bit) {
  sample_provenance& p = h.provenance;
  const std::int64_t now_ns = clock();  // right after the read: the counters' time
  const source_value<procfs::psi> v = parse_read(r, procfs::parse_psi);
  mark(p, bit, v.status);
  // The rate's reference and the periods start over after a gap or on another file (a counter or clock
  // that went back restarts the periods too: psi_window).
  const auto start_over = [&] {
    have_psi_reference = false;
    some_period.update(now_ns, 0, false, psi_kernel_period_ns);
    full_period.update(now_ns, 0, false, psi_kernel_period_ns);
  };
  if (!v.ok()) {
    start_over();  // the next rate starts over rather than spanning the gap
    return;
  }
  // Another file than the reference's (the cgroup source fell back, or came back): its counters
  // are not comparable. The rate starts over, and no counter is reported for this sample, so the
  // watcher's window starts over too.
  const bool switched = !reference_path.empty() && reference_path != path;
  if (switched) start_over();
  reference_path = path;
  p.psi = trigger_armed ? psi_mode::trigger : psi_mode::poll;
  h.psi_some_avg10 = v.value.some.avg10_pct;
  h.psi_full_avg10 = v.value.has_full ? v.value.full.avg10_pct : 0.0;
  h.psi_full_total_us = v.value.has_full ? v.value.full.total_us : 0;
  h.psi_full_total_known = v.value.has_full && !switched;
  some_period.update(now_ns, v.value.some.total_us, true, psi_kernel_period_ns);
  full_period.update(now_ns, v.value.full.total_us, v.value.has_full, psi_kernel_period_ns);
  if (have_psi_reference) {
    h.psi_some_rate = registered_rate_pct(some_period,
                                          stall_rate_pct(reference_some_us, v.value.some.total_us, reference_ns, now_ns));
    if (v.value.has_full && reference_has_full) {
      h.psi_full_rate = registered_rate_pct(
          full_period, stall_rate_pct(reference_full_us, v.value.full.total_us, reference_ns, now_ns));
    }
  }
  have_psi_reference = true;
  reference_has_full = v.value.has_full;
  reference_some_us = v.value.some.total_us;
  reference_full_us = v.value.full.total_us;
  reference_ns = now_ns;
}

cgroup_reading linux_sampler::impl::read_cgroup(sample_provenance& p) {
  cgroup_reading c;
  if (mode == cgroup_mode::none || levels.empty()) return c;
  const bool v2 = mode == cgroup_mode::v2;
  bool limit_read = false;
  bool limit_failed = false;

  // One limit file: its value when set, and which bits it earns.
  const auto read_limit = [&](source_file& f) -> std::optional<std::uint64_t> {
    // Missing is e.g. the root cgroup's memory.max.
    const source_value<procfs::cgroup_limit> l =
        parse_read(read(f), v2 ? procfs::parse_cgroup_v2_limit : procfs::parse_cgroup_v1_limit);
    if (l.status == source_status::failed) limit_failed = true;
    if (!l.ok()) return std::nullopt;
    limit_read = true;
    return l.value.set ? std::optional<std::uint64_t>(l.value.bytes) : std::nullopt;
  };

  for (std::size_t i = 0; i < levels.size(); ++i) {
    std::optional<std::uint64_t> level_limit = read_limit(levels[i].limit);
    if (level_limit) c.max_bytes = min_set(c.max_bytes, *level_limit);
    if (v2) {
      // Reclaim throttling starts at memory.high: it bounds what the engine can use as surely as max.
      if (const std::optional<std::uint64_t> high = read_limit(levels[i].high)) {
        c.high_bytes = min_set(c.high_bytes, *high);
        if (!level_limit || *high < *level_limit) level_limit = high;
      }
    }
    // `<=`: a tie goes to the ancestor (levels run upward).
    if (level_limit && (!c.limit_bytes || *level_limit <= *c.limit_bytes)) {
      c.limit_bytes = level_limit;
      c.limiting = i;
    }
  }
  if (limit_read) p.mark_read(host_source::cgroup_limit);
  if (limit_failed) p.mark_failed(host_source::cgroup_limit);

  cgroup_level& measured = levels[c.limit_bytes ? c.limiting : usage_level];
  const source_value<std::uint64_t> usage = parse_read(read(measured.usage), procfs::parse_cgroup_bytes);
  mark(p, host_source::cgroup_usage, usage.status);
  if (usage.ok()) c.usage_bytes = usage.value;

  // The working set only matters against a limit; without one memory.stat is not read.
  if (!c.limit_bytes) return c;
  // Unknown inactive_file counts as 0: the larger, safer working set.
  const source_value<std::uint64_t> inactive = parse_read(
      read(measured.stat), [&](std::string_view text) { return procfs::parse_memory_stat_inactive_file(text, mode); });
  mark(p, host_source::cgroup_stat, inactive.status);
  if (c.usage_bytes) c.working_set_bytes = detail::sat_sub(*c.usage_bytes, inactive.value);
  return c;
}

host_sample linux_sampler::impl::sample() {
  host_sample h;
  sample_provenance& p = h.provenance;
  last_reads.clear();

  refresh_cgroup();
  if (location_failed) {
    p.mark_failed(host_source::cgroup_limit);
    p.mark_failed(host_source::cgroup_usage);
  }
  p.cgroup = mode;

  const std::optional<procfs::meminfo> mem = read_meminfo(h);
  read_psi(h);
  const cgroup_reading c = read_cgroup(p);

  h.cgroup_max_bytes = c.max_bytes;
  h.cgroup_high_bytes = c.high_bytes;
  h.cgroup_current_bytes = c.usage_bytes.value_or(0);
  if (c.limit_bytes) {
    p.cgroup_limit_bytes = *c.limit_bytes;
    p.cgroup_working_set_bytes = c.working_set_bytes;
    p.set_limit_cgroup_path(levels[c.limiting].path);
  }
  if (mem) {
    h.total_bytes = mem->total_bytes;
    h.avail_bytes = mem->avail_bytes < mem->total_bytes ? mem->avail_bytes : mem->total_bytes;
    if (c.limit_bytes) {
      const std::uint64_t headroom_bytes = detail::sat_sub(*c.limit_bytes, c.working_set_bytes);
      if (*c.limit_bytes < h.total_bytes) h.total_bytes = *c.limit_bytes;
      if (headroom_bytes < h.avail_bytes) h.avail_bytes = headroom_bytes;
      // A limit of 0 is a cgroup that can hold nothing: that is CRITICAL, and a
      // total of 0 would read as "not sampled" instead.
      if (h.total_bytes == 0) h.total_bytes = 1;
    }
  }
  return h;
}

linux_sampler::linux_sampler() : linux_sampler(linux_sampler_options{}) {}
linux_sampler::linux_sampler(linux_sampler_options options) {
  psi_trigger_config tc;
  tc.root = options.root;
  // PSI off: nothing to wait for (wait_for is a plain interruptible wait).
  tc.triggers = options.psi_source == psi_source::off ? std::vector<psi_trigger_spec>{} : options.psi_triggers;
  impl_ = std::make_unique<impl>(std::move(options));
  trigger_ = std::make_unique<psi_trigger>(std::move(tc));
}
linux_sampler::~linux_sampler() = default;
linux_sampler::linux_sampler(linux_sampler&&) noexcept = default;
linux_sampler& linux_sampler::operator=(linux_sampler&&) noexcept = default;

host_sample linux_sampler::sample() {
  impl_->trigger_armed = trigger_->mode() == psi_mode::trigger;
  host_sample h = impl_->sample();
  // A v2 cgroup has its own memory.pressure: the waiting thread arms the same
  // triggers on it (its stalls are the container's, not the whole box's).
  const std::string file = impl_->mode == cgroup_mode::v2 && !impl_->levels.empty()
                               ? impl_->levels.front().dir + "memory.pressure"
                               : std::string();
  pnmem::detail::lock_guard lock(impl_->pressure_mu);
  impl_->pressure_file = file;
  return h;
}

wake linux_sampler::wait_for(std::chrono::nanoseconds timeout) {
  std::string file;
  {
    pnmem::detail::lock_guard lock(impl_->pressure_mu);
    file = impl_->pressure_file;
  }
  if (!file.empty() && file != impl_->armed_pressure_file) {
    impl_->armed_pressure_file = file;
    trigger_->arm_cgroup_pressure(file);
  }
  return trigger_->wait_for(timeout);
}
void linux_sampler::interrupt() noexcept { trigger_->interrupt(); }

std::size_t linux_sampler::read_all_for_benchmark() {
  std::size_t bytes = 0;
  for (source_file* f : impl_->last_reads) bytes += f->read(std::span<char>(impl_->buffer)).text.size();
  return bytes;
}

}  // namespace pnmem
