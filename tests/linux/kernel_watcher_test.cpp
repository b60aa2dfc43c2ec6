// The watcher inside a real memory cgroup (suite linux-kernel).
//
// A fresh memory cgroup limited to 3 GiB (cgroup v2 where this process's v2
// parent delegates the memory controller, else the v1 memory hierarchy), and
// two children moved into it:
//
//   W  runs pnmem::watcher<pnmem::linux_sampler> (50 ms polls) and writes one
//      fixed-size record per new snapshot to a pipe until its control pipe closes;
//   G  on each command byte maps and touches another 128 MiB of anonymous memory
//      (resident, charged to the cgroup) and acks.
//
// The parent grows G step by step and, after each ack, waits for W's first
// snapshot sampled wholly after it. Every record must report the cgroup's limit,
// total = min(MemTotal, limit), the new cgroup as the limiting one, avail =
// min(MemAvailable, limit - working set) and the level pnmem derives from them;
// the working set must grow by about 128 MiB a step, and the host level rise
// without ever falling, to TIGHT at least (CRITICAL expected), in bands computed
// from pnmem::host_reserve_bytes. Growth stops at CRITICAL or 2.6 GiB, well
// below the limit: nothing is ever OOM-killed.
//
// Exit 0 pass, 1 fail, 77 skip (Meson's SKIP) with one line saying why: not
// root, no memory cgroup hierarchy, too little free memory, cgroups cannot be
// created. Both children are killed and the cgroup removed on every path out,
// signals included (cgroup_sandbox.hpp).
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cgroup_sandbox.hpp"
#include "kernel_test_exit.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/level.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/watcher.hpp"

namespace fs = std::filesystem;
using namespace pnmem::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using pnmem::MiB;

namespace {

constexpr std::uint64_t limit_bytes = 3 * pnmem::GiB;
constexpr std::uint64_t step_bytes = 128 * MiB;
constexpr std::uint64_t max_grow_bytes = limit_bytes / 15 * 13;  // 2.6 GiB: 400 MiB below the limit
constexpr std::uint64_t free_margin_bytes = 512 * MiB;           // MemAvailable needed beyond the limit
// A step adds 128 MiB of anonymous memory; page tables and the watcher's own
// allocations add a little, batched charging may lag a little.
constexpr std::uint64_t step_low_bytes = step_bytes - 16 * MiB;
constexpr std::uint64_t step_high_bytes = step_bytes + 32 * MiB;
constexpr auto poll_interval = 50ms;
constexpr auto wait_limit = 10s;   // for any one ack or snapshot
constexpr auto total_limit = 60s;  // for the whole run

const char* const stale_prefix = "pnmem-watcher-test-";

std::string mib(std::uint64_t bytes) { return std::to_string(bytes / MiB) + " MiB"; }

std::int64_t now_ns() { return pnmem::to_ns(steady::now()); }

// ---- W: the watcher -----------------------------------------------------------------

// One snapshot as W sends it: fixed size, one write() (<= PIPE_BUF: atomic).
struct snapshot_record {
  std::uint64_t seq;
  std::int64_t sample_time_ns;  // steady_clock, the same clock as the parent's
  std::uint64_t total;
  std::uint64_t avail;
  std::uint64_t meminfo_total;
  std::uint64_t meminfo_avail;
  std::uint64_t cgroup_limit;
  std::uint64_t working_set;
  double psi_some_pct;
  double psi_full_pct;
  double psi_full_confirmed_pct;  // what is CRITICAL: avg10 or the window (one interval's rate is not)
  pnmem::mem_level level;
  pnmem::mem_level raw_level;
  pnmem::cgroup_mode mode;
  std::array<char, pnmem::cgroup_path_capacity> limit_cgroup;

  std::string_view limit_path() const noexcept {
    std::size_t n = 0;
    while (n < limit_cgroup.size() && limit_cgroup[n] != '\0') ++n;
    return {limit_cgroup.data(), n};
  }
};
static_assert(std::is_trivially_copyable_v<snapshot_record>);
static_assert(sizeof(snapshot_record) <= PIPE_BUF);

snapshot_record to_record(const pnmem::mem_state& s) {
  snapshot_record r{};
  r.seq = s.seq;
  r.sample_time_ns = s.sample_time_ns;
  r.total = s.host_total_bytes;
  r.avail = s.host_avail_bytes;
  r.meminfo_total = s.provenance.meminfo_total_bytes;
  r.meminfo_avail = s.provenance.meminfo_avail_bytes;
  r.cgroup_limit = s.provenance.cgroup_limit_bytes;
  r.working_set = s.provenance.cgroup_working_set_bytes;
  r.psi_some_pct = pnmem::psi_some_pct(s);
  r.psi_full_pct = pnmem::psi_full_pct(s);
  r.psi_full_confirmed_pct = pnmem::psi_full_confirmed_pct(s);
  r.level = s.level;
  r.raw_level = s.raw_level;
  r.mode = s.provenance.cgroup;
  r.limit_cgroup = s.provenance.limit_cgroup;
  return r;
}

// The host level pnmem derives for a record's numbers: with the container's reserve where its total
// is the cgroup's limit (policy.hpp host_reserve_bytes(snapshot): a 3 GiB limit keeps 768 MiB).
pnmem::mem_state host_of(std::uint64_t total, std::uint64_t avail, std::uint64_t limit) {
  pnmem::mem_state s;
  s.host_total_bytes = total;
  s.host_avail_bytes = avail;
  s.cgroup_max_bytes = limit;
  return s;
}
pnmem::mem_level record_host_level(const snapshot_record& r) {
  return pnmem::host_level(host_of(r.total, r.avail, r.cgroup_limit));
}

// The four pipes between the parent and its children, each end closed once.
struct pipes {
  enum end : std::size_t {
    w_control_r, w_control_w,  // parent -> W: closed = stop
    w_out_r, w_out_w,          // W -> parent: records
    g_command_r, g_command_w,  // parent -> G: one byte = grow
    g_ack_r, g_ack_w,          // G -> parent: 'r' ready, 'a' grown
    count
  };
  std::array<int, count> fd;

  pipes() { fd.fill(-1); }
  ~pipes() {
    for (std::size_t i = 0; i < count; ++i) close(static_cast<end>(i));
  }
  pipes(const pipes&) = delete;
  pipes& operator=(const pipes&) = delete;

  bool open() {
    for (std::size_t i = 0; i < count; i += 2) {
      if (::pipe2(&fd[i], O_CLOEXEC) != 0) return false;
    }
    return true;
  }
  void close(end e) {
    if (fd[e] >= 0) ::close(fd[e]);
    fd[e] = -1;
  }
  // In a child: keep two ends, close the rest.
  void keep_only(end a, end b) {
    for (std::size_t i = 0; i < count; ++i) {
      if (i != a && i != b) close(static_cast<end>(i));
    }
  }
  int operator[](end e) const { return fd[e]; }
};

// The status of `pid` if it ends within `ms` milliseconds.
std::optional<int> reap_within(pid_t pid, int ms) {
  for (int waited = 0;; waited += 10) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (waited >= ms) return std::nullopt;
    detail::sleep_10ms();
  }
}

std::string status_text(const std::optional<int>& status) {
  if (!status) return " (still running)";
  return WIFSIGNALED(*status) ? " (signal " + std::to_string(WTERMSIG(*status)) + ")"
                              : " (exit " + std::to_string(WEXITSTATUS(*status)) + ")";
}

[[noreturn]] void watcher_main(const fs::path& cg, int control_fd, int out_fd) {
  if (!move_into_cgroup(cg, ::getpid())) {
    std::fprintf(stderr, "watcher: cannot move into %s: %s\n", cg.c_str(), errno_text().c_str());
    ::_exit(3);
  }
  {
    pnmem::watcher_options options;
    options.poll_interval = poll_interval;
    options.pressure_poll_interval = poll_interval;
    pnmem::watcher<pnmem::linux_sampler> w{pnmem::linux_sampler{}, options};
    if (!w.start()) ::_exit(4);
    std::uint64_t sent = 0;
    for (;;) {
      const pnmem::mem_state s = w.read();
      if (s.seq != sent) {
        sent = s.seq;
        const snapshot_record r = to_record(s);
        if (::write(out_fd, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) break;
      }
      pollfd p{control_fd, POLLIN, 0};
      if (::poll(&p, 1, 2) != 0) break;  // the control pipe closed (or failed): done
    }
    w.stop();
  }
  ::_exit(0);
}

// ---- G: the grower ------------------------------------------------------------------

[[noreturn]] void grower_main(const fs::path& cg, int command_fd, int ack_fd) {
  if (!move_into_cgroup(cg, ::getpid())) {
    std::fprintf(stderr, "grower: cannot move into %s: %s\n", cg.c_str(), errno_text().c_str());
    ::_exit(3);
  }
  if (::write(ack_fd, "r", 1) != 1) ::_exit(4);
  for (;;) {
    char command = 0;
    if (::read(command_fd, &command, 1) != 1) ::_exit(0);  // the parent is done
    void* block = ::mmap(nullptr, step_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) ::_exit(5);
    std::memset(block, 0x5a, step_bytes);  // every page resident, none the shared zero page
    if (::write(ack_fd, "a", 1) != 1) ::_exit(6);
  }
}

// ---- where the cgroup goes ------------------------------------------------------------

struct memory_hierarchy {
  cgroup_version version = cgroup_version::v1;
  cgroup_location where;  // this process in that hierarchy
  fs::path parent;        // where the test's cgroup is made
  std::string note;       // why this one
};

// v2 where the memory controller is delegated: the test's cgroup is a sibling
// of this process's v2 cgroup (a cgroup with processes cannot enable controllers
// for its children), or a child of the root, which can. Else v1.
std::optional<memory_hierarchy> choose_hierarchy() {
  std::string v2_note = "no cgroup2 mounted";
  if (auto v2 = own_cgroup(pnmem::cgroup_mode::v2)) {
    if (const auto parent = v2_memory_parent(*v2, &v2_note)) {
      return memory_hierarchy{cgroup_version::v2, *v2, *parent, parent->string() + " delegates the memory controller"};
    }
  }
  if (auto v1 = own_cgroup(pnmem::cgroup_mode::v1)) {
    return memory_hierarchy{cgroup_version::v1, *v1, v1->dir, v2_note};
  }
  return std::nullopt;
}

std::optional<std::uint64_t> read_number(const fs::path& p) {
  const auto text = read_file(p);
  if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '9') return std::nullopt;
  return std::strtoull(text->c_str(), nullptr, 10);
}

// Why the test's cgroup would not be the limiting one, or an ancestor would OOM
// first: any limit from `parent` up that is not above ours, or leaves too little room.
std::optional<std::string> ancestor_problem(const memory_hierarchy& h) {
  for (fs::path d = h.parent;; d = d.parent_path()) {
    std::vector<const char*> files = {memory_limit_file(h.version)};
    if (h.version == cgroup_version::v2) files.push_back("memory.high");
    for (const char* f : files) {
      const auto limit = read_number(d / f);  // "max" and absent files read as no limit
      if (!limit || *limit >= pnmem::procfs::v1_unlimited_threshold_bytes) continue;
      if (*limit <= limit_bytes) return (d / f).string() + " is " + mib(*limit) + ", not above the test's limit";
      const auto usage = read_number(d / (h.version == cgroup_version::v1 ? "memory.usage_in_bytes" : "memory.current"));
      if (usage && *limit - std::min(*limit, *usage) < max_grow_bytes + free_margin_bytes) {
        return (d / f).string() + " leaves " + mib(*limit - std::min(*limit, *usage)) + " of room";
      }
    }
    if (d == h.where.mount_point || d == d.parent_path()) break;
  }
  return std::nullopt;
}

// ---- the parent's side ----------------------------------------------------------------

struct row {
  int step;
  std::uint64_t grown;
  snapshot_record r;
};

class rig {
 public:
  rig(cgroup_sandbox& sandbox, cgroup_version version, std::string limit_path, std::uint64_t meminfo_total,
      steady::time_point deadline)
      : sandbox_(sandbox),
        version_(version),
        limit_path_(std::move(limit_path)),
        meminfo_total_(meminfo_total),
        deadline_(deadline) {}

  int w_out = -1;    // W's records
  int g_ack = -1;    // G's acks
  pid_t w_pid = -1;
  pid_t g_pid = -1;
  std::string error;  // set by a failed wait

  std::size_t records_seen() const noexcept { return seen_; }
  const std::optional<snapshot_record>& last() const noexcept { return last_; }

  // Waits for G's next byte, taking W's records meanwhile.
  bool wait_ack(char expected) {
    const auto until = std::min(deadline_, steady::now() + wait_limit);
    for (;;) {
      pollfd p[2] = {{g_ack, POLLIN, 0}, {w_out, POLLIN, 0}};
      if (!turn(p, 2, until, "G's ack")) return false;
      if (p[1].revents != 0 && !drain()) return false;
      if (p[0].revents != 0) {
        char c = 0;
        const ssize_t n = ::read(g_ack, &c, 1);
        if (n == 1 && c == expected) return true;
        if (n < 0 && errno == EINTR) continue;
        error = n == 0 ? "the grower ended" + child_status(g_pid) : std::string("the grower sent garbage");
        return false;
      }
    }
  }

  // The first snapshot whose sampling began after `after_ns`: the second one
  // stamped after it (a stamp is taken when a sample is published; the next
  // sample starts after that).
  std::optional<snapshot_record> wait_fresh(std::int64_t after_ns) {
    const auto until = std::min(deadline_, steady::now() + wait_limit);
    fresh_after_ns_ = after_ns;
    fresh_count_ = 0;
    fresh_.reset();
    while (!fresh_) {
      pollfd p[1] = {{w_out, POLLIN, 0}};
      if (!turn(p, 1, until, "a fresh snapshot") || (p[0].revents != 0 && !drain())) return std::nullopt;
    }
    return fresh_;
  }

 private:
  // One poll, up to 100 ms; false (with error) past `until` or on a signal.
  bool turn(pollfd* p, nfds_t n, steady::time_point until, const char* what) {
    if (cgroup_sandbox::stop_requested()) {
      error = "interrupted by a signal";
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now());
    if (left.count() <= 0) {
      error = std::string("no ") + what + " in time" +
              (steady::now() >= deadline_ ? " (the whole run is bounded to 60 s)" : " (10 s)");
      return false;
    }
    const int r = ::poll(p, n, static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), 100)));
    if (r < 0 && errno != EINTR) {
      error = "poll: " + errno_text();
      return false;
    }
    if (r <= 0) {
      for (nfds_t i = 0; i < n; ++i) p[i].revents = 0;
    }
    return true;
  }

  // Reads what W sent; checks every record. False (with error) on a bad one or W's end.
  bool drain() {
    char chunk[4096];
    const ssize_t n = ::read(w_out, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) return true;
      error = "reading W: " + errno_text();
      return false;
    }
    if (n == 0) {
      error = "the watcher ended" + child_status(w_pid);
      return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
    while (buffer_.size() >= sizeof(snapshot_record)) {
      snapshot_record r;
      std::memcpy(&r, buffer_.data(), sizeof r);
      buffer_.erase(0, sizeof r);
      if (!check(r)) return false;
      ++seen_;
      last_ = r;
      if (r.sample_time_ns > fresh_after_ns_ && ++fresh_count_ == 2) fresh_ = r;
    }
    return true;
  }

  bool check(const snapshot_record& r) {
    const auto bad = [&](const std::string& what) {
      error = "snapshot seq " + std::to_string(r.seq) + ": " + what;
      return false;
    };
    const pnmem::cgroup_mode mode = version_ == cgroup_version::v1 ? pnmem::cgroup_mode::v1 : pnmem::cgroup_mode::v2;
    if (r.mode != mode) return bad("cgroup mode " + std::string(pnmem::to_string(r.mode)) + ", expected " + to_string(version_));
    if (r.cgroup_limit != limit_bytes) return bad("cgroup limit " + std::to_string(r.cgroup_limit) + ", expected " + std::to_string(limit_bytes));
    if (r.limit_path() != limit_path_) return bad("limit cgroup '" + std::string(r.limit_path()) + "', expected '" + limit_path_ + "'");
    if (r.meminfo_total != meminfo_total_) return bad("MemTotal " + std::to_string(r.meminfo_total) + ", expected " + std::to_string(meminfo_total_));
    const std::uint64_t total = std::min(meminfo_total_, limit_bytes);
    if (r.total != total) return bad("total " + std::to_string(r.total) + ", expected min(MemTotal, limit) = " + std::to_string(total));
    const std::uint64_t headroom = limit_bytes - std::min(limit_bytes, r.working_set);
    const std::uint64_t avail = std::min({r.meminfo_avail, headroom, r.meminfo_total});
    if (r.avail != avail) return bad("avail " + std::to_string(r.avail) + ", expected min(MemAvailable, limit - working set) = " + std::to_string(avail));
    const pnmem::mem_level host = record_host_level(r);
    // The level's own PSI rule: a full stall seen in one interval is TIGHT; CRITICAL needs it confirmed
    // (the seed's two-argument form reads one interval's rate as confirmed: under a loaded box's real
    // stalls it expected CRITICAL where the watcher rightly said TIGHT).
    const pnmem::mem_level expected =
        pnmem::worst_of(host, pnmem::psi_level(r.psi_some_pct, r.psi_full_pct, r.psi_full_confirmed_pct));
    if (r.raw_level != expected) {
      return bad("raw level " + std::string(pnmem::to_string(r.raw_level)) + ", expected " +
                 std::string(pnmem::to_string(expected)) + " (host " + std::string(pnmem::to_string(host)) + ")");
    }
    if (r.level != r.raw_level) return bad("published level differs from the raw level with no dwell");
    return true;
  }

  // How a child that closed its pipe ended (reaped, so no longer the sandbox's).
  std::string child_status(pid_t pid) {
    const std::optional<int> status = reap_within(pid, 1000);
    if (status) sandbox_.disown(pid);
    return status_text(status);
  }

  cgroup_sandbox& sandbox_;
  cgroup_version version_;
  std::string limit_path_;
  std::uint64_t meminfo_total_;
  steady::time_point deadline_;
  std::string buffer_;
  std::size_t seen_ = 0;
  std::optional<snapshot_record> last_;
  std::int64_t fresh_after_ns_ = 0;
  int fresh_count_ = 0;
  std::optional<snapshot_record> fresh_;
};

void print_row(const row& x) {
  const pnmem::mem_level host = record_host_level(x.r);
  std::string level(pnmem::to_string(x.r.level));
  if (x.r.level != host) level += " (host " + std::string(pnmem::to_string(host)) + ", PSI)";
  std::printf("%4d  %9" PRIu64 "  %15" PRIu64 "  %9" PRIu64 "  %s\n", x.step, x.grown / MiB, x.r.working_set / MiB,
              x.r.avail / MiB, level.c_str());
}

int run() {
  const auto start = steady::now();
  if (::geteuid() != 0) return skip("not root: cannot create a memory cgroup");
  const auto meminfo_text = read_file("/proc/meminfo");
  if (!meminfo_text) return skip("no /proc/meminfo");
  const auto meminfo = pnmem::procfs::parse_meminfo(*meminfo_text);
  if (!meminfo.ok()) return fail("cannot parse /proc/meminfo");
  if (meminfo.value.avail_bytes < limit_bytes + free_margin_bytes) {
    return skip("MemAvailable is " + mib(meminfo.value.avail_bytes) + "; a " + mib(limit_bytes) +
                " cgroup needs " + mib(limit_bytes + free_margin_bytes));
  }
  const auto hierarchy = choose_hierarchy();
  if (!hierarchy) return skip("no memory cgroup hierarchy (neither a delegated cgroup2 nor cgroup v1 memory)");
  if (const auto problem = ancestor_problem(*hierarchy)) return skip(*problem);

  remove_stale_cgroups(hierarchy->parent, stale_prefix);
  cgroup_sandbox sandbox;  // owns the cgroup and both children
  if (!sandbox.create(hierarchy->parent, stale_prefix)) {
    return skip("cannot create " + sandbox.dir().string() + ": " + errno_text());
  }
  const fs::path& cg = sandbox.dir();
  if (hierarchy->version == cgroup_version::v2 && ::access((cg / "memory.max").c_str(), F_OK) != 0) {
    return skip("no memory controller in the new cgroup " + cg.string());
  }
  if (!sandbox.set_memory_limit(hierarchy->version, limit_bytes)) {
    return fail("cannot set " + (cg / memory_limit_file(hierarchy->version)).string() + ": " + errno_text());
  }
  const std::string limit_path = hierarchy->where.cgroup_path(cg);

  const std::uint64_t total = std::min(meminfo.value.total_bytes, limit_bytes);
  const std::uint64_t reserve = pnmem::host_reserve_bytes(host_of(total, 0, limit_bytes));
  std::printf("cgroup %s %s (limit %s; %s); MemTotal %s, MemAvailable %s\n", to_string(hierarchy->version),
              cg.c_str(), mib(limit_bytes).c_str(), hierarchy->note.c_str(), mib(meminfo.value.total_bytes).c_str(),
              mib(meminfo.value.avail_bytes).c_str());
  std::printf("total %s, reserve %s: WATCH past a working set of %s, TIGHT past %s, CRITICAL from %s\n",
              mib(total).c_str(), mib(reserve).c_str(), mib(total - 2 * reserve).c_str(),
              mib(total - reserve - reserve / 4).c_str(), mib(total - reserve).c_str());

  // Every pipe before the first fork; no thread exists in this process.
  pipes fds;
  if (!fds.open()) return fail("pipe: " + errno_text());
  const pid_t self = ::getpid();

  rig r(sandbox, hierarchy->version, limit_path, meminfo.value.total_bytes, start + total_limit);
  r.w_out = fds[pipes::w_out_r];
  r.g_ack = fds[pipes::g_ack_r];
  // Forks a child that keeps only descriptors `in` and `out` and runs child_main(cg, in, out).
  const auto spawn = [&](pid_t& pid, pipes::end in, pipes::end out, void (*child_main)(const fs::path&, int, int)) {
    pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      prepare_child(self);
      fds.keep_only(in, out);
      child_main(cg, fds[in], fds[out]);
    }
    sandbox.adopt(pid);
    return true;
  };
  if (!spawn(r.w_pid, pipes::w_control_r, pipes::w_out_w, watcher_main)) return fail("fork: " + errno_text());
  if (!spawn(r.g_pid, pipes::g_command_r, pipes::g_ack_w, grower_main)) return fail("fork: " + errno_text());
  // Only the children hold the other ends now: EOF when one ends.
  fds.close(pipes::w_out_w);
  fds.close(pipes::g_ack_w);
  fds.close(pipes::w_control_r);
  fds.close(pipes::g_command_r);

  if (!r.wait_ack('r')) return fail("the grower did not start: " + r.error);
  std::optional<snapshot_record> fresh = r.wait_fresh(now_ns());
  if (!fresh) return fail("no first snapshot: " + r.error);

  std::vector<row> rows{{0, 0, *fresh}};
  std::printf("step  grown MiB  working set MiB  avail MiB  level\n");
  print_row(rows.back());
  std::uint64_t grown = 0;
  while (record_host_level(rows.back().r) != pnmem::mem_level::critical &&
         grown + step_bytes <= max_grow_bytes) {
    if (::write(fds[pipes::g_command_w], "g", 1) != 1) return fail("cannot command the grower: " + errno_text());
    if (!r.wait_ack('a')) return fail("step " + std::to_string(rows.size()) + ": " + r.error);
    fresh = r.wait_fresh(now_ns());
    if (!fresh) return fail("step " + std::to_string(rows.size()) + ": " + r.error);
    grown += step_bytes;
    rows.push_back({static_cast<int>(rows.size()), grown, *fresh});
    print_row(rows.back());
  }

  // Both children finish on EOF; the watcher must stop cleanly.
  fds.close(pipes::w_control_w);
  fds.close(pipes::g_command_w);
  const std::optional<int> w_status = reap_within(r.w_pid, 5000);
  if (w_status) sandbox.disown(r.w_pid);
  if (reap_within(r.g_pid, 5000)) sandbox.disown(r.g_pid);
  const double seconds = std::chrono::duration<double>(steady::now() - start).count();

  // The checks over the steps (every record was checked on arrival).
  pnmem::mem_level highest = pnmem::mem_level::ok;
  bool psi_seen = false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const pnmem::mem_level host = record_host_level(rows[i].r);
    psi_seen = psi_seen || rows[i].r.level != host;
    if (host < highest) {
      return fail("step " + std::to_string(i) + ": level fell to " + std::string(pnmem::to_string(host)) +
                  " from " + std::string(pnmem::to_string(highest)));
    }
    highest = host;
    if (i == 0) continue;
    const std::uint64_t before = rows[i - 1].r.working_set;
    const std::uint64_t now = rows[i].r.working_set;
    if (now < before + step_low_bytes || now > before + step_high_bytes) {
      return fail("step " + std::to_string(i) + ": the working set went from " + mib(before) + " to " + mib(now) +
                  ", not up by about " + mib(step_bytes));
    }
  }
  if (highest < pnmem::mem_level::tight) {
    return fail("the level only reached " + std::string(pnmem::to_string(highest)) + " at " + mib(grown) + " grown");
  }
  if (!w_status || !WIFEXITED(*w_status) || WEXITSTATUS(*w_status) != 0) {
    return fail("the watcher did not stop cleanly when its control pipe closed" + status_text(w_status));
  }
  std::printf("PASS: %zu steps, %zu snapshots, each with limit %s, total %s and limit cgroup %s; level rose to %s "
              "(%s); %.2f s%s\n",
              rows.size() - 1, r.records_seen(), mib(limit_bytes).c_str(), mib(total).c_str(), limit_path.c_str(),
              std::string(pnmem::to_string(highest)).c_str(),
              highest == pnmem::mem_level::critical ? "as expected" : "CRITICAL expected, TIGHT accepted", seconds,
              psi_seen ? "; PSI raised the published level on some steps" : "");
  return exit_pass;
}

}  // namespace

int main() { return run(); }
