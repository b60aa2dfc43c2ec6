// examples/survival/main.cpp - survive a memory cgroup's limit, with and without pnmem.
//
//   build/examples/survival_run                      # 1 GiB limit, policy off then on
//   build/examples/survival_run --limit 768M --svg /tmp/t.svg --verbose
//   build/examples/survival_run --processes 4 --policy all   # four engine processes share each burst
//
// For each run (policy off, policy on) the supervisor creates a memory cgroup
// (v1: a child of its own; v2: a sibling of its own, in a parent that delegates
// the memory controller, or a child of the root cgroup) with the limit,
// starts the workload (workload.hpp: a batched decoder whose bursts need more than
// the limit) inside it, samples the cgroup's usage every 10 ms, and afterwards
// reads the peak, the kernel's OOM-kill count and the workload's event lines.
// It prints a table (peak against the limit, time at each level, requests by
// outcome and reason, lost requests, OOM kills) and writes the level timeline as
// an SVG picture.
//
// With --processes N the cgroup holds N workload processes (engines side by side: a worker per GPU, a
// runner per model) that share the load: each gets burst-size / N of every burst and slots / N decode
// slots (at least 1 of each), its own prompts (seed + its number). With the policy on they count each
// other's promises in one box ledger (a scope of the run's own, PN_LEDGER=/tmp/pnmem-survive-ledger-...);
// `--policy per-process` runs them with PN_LEDGER=off: each orders only its own admitters.
//
// The workload's policy: PN_* environment variables as usual, so its reserve is pnmem's
// container rule for the limit (policy.hpp container_reserve_bytes: 256 MiB of 1 GiB)
// unless PN_HOST_RESERVE_BYTES or --reserve sets one.
//
// Exit: 0 when the policy-on run lost nothing and was not killed, and the
// policy-off run was OOM-killed (each checked only when run); 1 when one of those
// did not hold (a line says which); 2 on a bad argument; 77 when no memory cgroup
// can be created here (not root, no memory controller), with one line saying why.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pnmem/clock_ns.hpp>
#include <pnmem/config.hpp>
#include <pnmem/format.hpp>
#include <pnmem/linux/procfs.hpp>
#include <pnmem/mem_level.hpp>
#include <pnmem/parse.hpp>
#include <pnmem/policy.hpp>

#include "cgroup_sandbox.hpp"
#include "events.hpp"
#include "timeline_svg.hpp"
#include "workload.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using pnmem::test::cgroup_sandbox;
using pnmem::test::cgroup_version;

constexpr std::uint64_t MiB = 1024ULL * 1024ULL;

enum class mode { off, on, no_ledger, per_process };

const char* mode_name(mode m) {
  switch (m) {
    case mode::off: return "policy off";
    case mode::on: return "policy on";
    case mode::no_ledger: return "on, no ledger";
    case mode::per_process: return "on, ledger per process";
  }
  return "?";
}

const char* mode_arg(mode m) {
  switch (m) {
    case mode::off: return "off";
    case mode::on: return "on";
    case mode::no_ledger: return "no-ledger";
    case mode::per_process: return "on";  // the workload's policy; PN_LEDGER=off makes its ledger its own
  }
  return "?";
}

struct options {
  std::uint64_t limit = 1024 * MiB;
  std::uint64_t reserve = 0;  // --reserve (PN_HOST_RESERVE_BYTES for the workload); 0: pnmem's own
  bool reserve_given = false;
  std::vector<mode> modes{mode::on, mode::off};  // in run order (policy on first: see wait_for_quiet_psi)
  std::string svg = "survival.svg";
  std::string keep_events;  // a directory: keep each run's raw event lines there
  survival::workload_options work;
  int timeout_s = 120;
  int processes = 1;  // workload processes in the cgroup, sharing the load
  bool expect_per_process_killed = false;  // --expect-per-process-killed: a ledger per process must fail
  int psi_settle_s = 150;  // longest wait for the box's PSI to read 0 before the policy-on run
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "survival_run: %s\n", what.c_str());
  std::fprintf(stderr,
               "usage: survival_run [--limit BYTES] [--reserve BYTES] [--policy on|off|both|no-ledger|all] [--svg PATH]\n"
               "                    [--slots N] [--bursts N] [--burst-size N] [--patience-ms N] [--seed N]\n"
               "                    [--processes N] (--policy per-process: each process's ledger its own)\n"
               "                    [--timeout-s N] [--psi-settle-s N]\n                    [--keep-events DIR] [--verbose]\n");
  std::exit(2);
}

std::uint64_t bytes_arg(const char* flag, const char* text) {
  const auto r = pnmem::parse_bytes(text);
  if (!r) usage_error(std::string(flag) + " " + text + ": " + std::string(pnmem::to_string(r.error)));
  return r.value;
}

int int_arg(const char* flag, const char* text, int min_value, int max_value) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min_value || v > max_value) {
    usage_error(std::string(flag) + " " + text + ": expected an integer in [" + std::to_string(min_value) + ", " +
                std::to_string(max_value) + "]");
  }
  return static_cast<int>(v);
}

// The workload's own arguments (after --workload), also used to pass them on.
bool workload_flag(survival::workload_options& w, std::string_view a, const char* v) {
  if (a == "--slots") w.slots = int_arg("--slots", v, 1, 64);
  else if (a == "--bursts") w.bursts = int_arg("--bursts", v, 1, 100);
  else if (a == "--burst-size") w.burst_size = int_arg("--burst-size", v, 1, 256);
  else if (a == "--patience-ms") w.patience_ms = int_arg("--patience-ms", v, 0, 600000);
  else if (a == "--seed") w.seed = static_cast<std::uint64_t>(int_arg("--seed", v, 0, 1 << 30));
  else if (a == "--id-base") w.id_base = int_arg("--id-base", v, 0, 1 << 30);
  else if (a == "--timeline") w.timeline = std::string_view(v) != "no";
  else return false;
  return true;
}

std::vector<std::string> workload_argv(const survival::workload_options& w) {
  return {"--slots", std::to_string(w.slots), "--bursts", std::to_string(w.bursts), "--burst-size",
          std::to_string(w.burst_size), "--patience-ms", std::to_string(w.patience_ms), "--seed",
          std::to_string(w.seed)};
}

// survival_run --workload [--policy on|off] --events PATH --t0-ns N [workload flags] [--verbose]
int workload_main(int argc, char** argv) {
  survival::workload_options w;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--verbose") {
      w.verbose = true;
      continue;
    }
    if (i + 1 >= argc) usage_error("--workload: " + std::string(a) + " needs a value");
    const char* v = argv[++i];
    if (a == "--policy") {
      const std::string_view p = v;
      w.policy_on = p != "off";
      w.use_ledger = p != "no-ledger";
    }
    else if (a == "--events") w.events_path = v;
    else if (a == "--t0-ns") w.t0_ns = std::strtoll(v, nullptr, 10);
    else if (!workload_flag(w, a, v)) usage_error("--workload: unknown argument " + std::string(a));
  }
  if (w.events_path.empty()) usage_error("--workload needs --events PATH");
  return survival::run_workload(w);
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--verbose") {
      o.work.verbose = true;
      continue;
    }
    if (a == "--help" || a == "-h") usage_error("survive a memory cgroup's limit with and without pnmem");
    if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
    const char* v = argv[++i];
    if (a == "--limit") {
      o.limit = bytes_arg("--limit", v);
      if (o.limit < 256 * MiB) usage_error(std::string("--limit ") + v + ": at least 256 MiB (the workload's own)");
    } else if (a == "--reserve") {
      o.reserve = bytes_arg("--reserve", v);
      if (o.reserve == 0) usage_error("--reserve 0: give a reserve above 0, or leave it out for pnmem's own");
      o.reserve_given = true;
    } else if (a == "--policy") {
      const std::string_view p = v;
      if (p == "on") o.modes = {mode::on};
      else if (p == "off") o.modes = {mode::off};
      else if (p == "both") o.modes = {mode::on, mode::off};
      else if (p == "no-ledger") o.modes = {mode::no_ledger};
      else if (p == "all") o.modes = {mode::on, mode::no_ledger, mode::off};
      else if (p == "per-process") o.modes = {mode::per_process};
      else if (p == "processes") o.modes = {mode::on, mode::per_process, mode::off};
      else usage_error(std::string("--policy ") + v + ": on, off, both, no-ledger, per-process, processes or all");
    } else if (a == "--svg") {
      o.svg = v;
    } else if (a == "--keep-events") {
      o.keep_events = v;
    } else if (a == "--psi-settle-s") {
      o.psi_settle_s = int_arg("--psi-settle-s", v, 0, 3600);
    } else if (a == "--timeout-s") {
      o.timeout_s = int_arg("--timeout-s", v, 1, 3600);
    } else if (a == "--processes") {
      o.processes = int_arg("--processes", v, 1, 64);
    } else if (a == "--expect-per-process-killed") {
      o.expect_per_process_killed = std::string_view(v) == "yes";
    } else if (!workload_flag(o.work, a, v)) {
      usage_error("unknown argument " + std::string(a));
    }
  }
  // The reserve the workload's pnmem will keep: the container rule for the limit, under the PN_*
  // variables it inherits (shown in the table and the picture; the workload computes its own).
  if (!o.reserve_given) o.reserve = pnmem::container_reserve_bytes(o.limit, pnmem::process_policy());
  if (o.reserve >= o.limit) usage_error("--reserve must be below --limit");
  return o;
}

// Where runs can get a memory cgroup: v1, a child of this process's own cgroup; v2, a
// sibling of it (cgroup_sandbox.hpp's v2_memory_parent).
struct cgroup_home {
  cgroup_version version;
  pnmem::test::fs::path parent;
};

std::optional<cgroup_home> find_cgroup_home(std::string& why) {
  if (::geteuid() != 0) {
    why = "creating a memory cgroup needs root";
    return std::nullopt;
  }
  if (const auto v1 = pnmem::test::own_cgroup_dir("cgroup", "memory")) {
    if (::access((*v1 / "memory.limit_in_bytes").c_str(), W_OK) == 0 || ::access(v1->c_str(), W_OK) == 0) {
      return cgroup_home{cgroup_version::v1, *v1};
    }
    why = "cgroup v1 memory directory " + v1->string() + " is not writable";
    return std::nullopt;
  }
  if (const auto v2 = pnmem::test::own_cgroup(pnmem::cgroup_mode::v2)) {
    // v2 lets no process sit in a cgroup that enables controllers for its children: unless this
    // process is in the root cgroup, the runs' cgroups are made next to its own, in its parent.
    if (const auto parent = pnmem::test::v2_memory_parent(*v2, &why)) return cgroup_home{cgroup_version::v2, *parent};
    return std::nullopt;
  }
  why = "no cgroup v1 memory controller and no cgroup2 mount for this process";
  return std::nullopt;
}

// A one-number cgroup file, through the sampler's own strict parser; 0 when it is
// missing or does not parse (the supervisor's samples then show no usage, never a wrong one).
std::uint64_t read_u64(const pnmem::test::fs::path& p) {
  const auto t = pnmem::test::read_file(p);
  if (!t) return 0;
  const auto v = pnmem::procfs::parse_cgroup_bytes(*t);
  return v.ok() ? v.value : 0;
}

// "name value" lines (memory.oom_control, memory.events).
std::uint64_t keyed_u64(const pnmem::test::fs::path& p, std::string_view key) {
  const auto t = pnmem::test::read_file(p);
  if (!t) return 0;
  for (const auto& line : pnmem::test::split(*t, '\n')) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ' ') {
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
    }
  }
  return 0;
}

struct run_result {
  mode what = mode::on;
  bool started = false;
  std::string error;
  std::vector<survival::usage_point> usage;
  survival::event_log events;
  std::uint64_t peak_bytes = 0;
  std::uint64_t oom_kills = 0;
  int status = 0;                 // waitpid status (the first process killed, else the last to end)
  std::vector<int> statuses;      // each process's
  double end_ms = 0;
  bool killed = false;            // any process killed by SIGKILL (the OOM killer's)
  bool timed_out = false;
  int lost = 0;
  std::array<double, 4> level_ms{};
};

int lost_requests(const survival::event_log& ev) {
  std::set<int> ended;
  for (const auto& e : ev.ended) ended.insert(e.id);
  int lost = 0;
  for (const auto& q : ev.queued) lost += ended.count(q.id) == 0 ? 1 : 0;
  return lost;
}

run_result run_once(const cgroup_home& home, const options& o, mode what, const char* self) {
  run_result r;
  r.what = what;
  cgroup_sandbox box;
  if (!box.create(home.parent, "pnmem-survive-")) {
    r.error = "mkdir " + box.dir().string() + ": " + pnmem::test::errno_text();
    return r;
  }
  if (!box.set_memory_limit(home.version, o.limit)) {
    r.error = std::string("setting ") + pnmem::test::memory_limit_file(home.version) + ": " + pnmem::test::errno_text();
    return r;
  }
  char events_path[] = "/tmp/pnmem-survive-events-XXXXXX";
  const int events_fd = ::mkstemp(events_path);
  if (events_fd < 0) {
    r.error = std::string("mkstemp: ") + pnmem::test::errno_text();
    return r;
  }
  ::close(events_fd);

  const auto t0 = clock_type::now();
  const std::int64_t t0_ns = pnmem::to_ns(t0);
  // The processes share the load: a part of each burst and of the slots each, their own prompts.
  const int n = o.processes;
  survival::workload_options per = o.work;
  per.burst_size = std::max(1, o.work.burst_size / n);
  per.slots = std::max(1, o.work.slots / n);
  // The box ledger of the run's own (policy on), or none (ledger per process): never another run's.
  const std::string ledger = what == mode::per_process
                                 ? std::string("off")
                                 : "/tmp/pnmem-survive-ledger-" + std::to_string(::getpid()) + "-" + mode_arg(what);
  ::unlink(ledger.c_str());
  const std::string reserve = std::to_string(o.reserve);
  const std::string procs = (box.dir() / "cgroup.procs").string();
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int k = 0; k < n; ++k) {
    survival::workload_options mine = per;
    mine.seed = o.work.seed + static_cast<std::uint64_t>(k);
    std::vector<std::string> args = {self, "--workload", "--policy", mode_arg(what), "--events", events_path,
                                     "--t0-ns", std::to_string(t0_ns), "--id-base", std::to_string(k * 100000),
                                     "--timeline", k == 0 ? "yes" : "no"};
    for (auto& a : workload_argv(mine)) args.push_back(std::move(a));
    if (o.work.verbose) args.emplace_back("--verbose");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      r.error = std::string("fork: ") + pnmem::test::errno_text();
      break;
    }
    if (pid == 0) {
      pnmem::test::prepare_child(parent);
      if (!pnmem::test::move_into_cgroup(box.dir(), ::getpid())) ::_exit(126);
      if (o.reserve_given) ::setenv("PN_HOST_RESERVE_BYTES", reserve.c_str(), 1);
      ::setenv("PN_LEDGER", ledger.c_str(), 1);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
    box.adopt(pid);
    pids.push_back(pid);
  }
  if (pids.empty()) {
    ::unlink(events_path);
    return r;
  }
  r.started = true;

  const pnmem::test::fs::path usage_file =
      box.dir() / (home.version == cgroup_version::v1 ? "memory.usage_in_bytes" : "memory.current");
  const auto deadline = t0 + std::chrono::seconds(o.timeout_s);
  std::vector<bool> done(pids.size(), false);
  r.statuses.assign(pids.size(), 0);
  std::size_t running = pids.size();
  for (;;) {
    const double t_ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    const std::uint64_t used = read_u64(usage_file);
    r.usage.push_back({t_ms, used});
    r.peak_bytes = std::max(r.peak_bytes, used);
    for (std::size_t k = 0; k < pids.size(); ++k) {
      if (done[k]) continue;
      if (::waitpid(pids[k], &r.statuses[k], WNOHANG) == pids[k]) {
        done[k] = true;
        --running;
        const bool k_killed = WIFSIGNALED(r.statuses[k]) && WTERMSIG(r.statuses[k]) == SIGKILL;
        if (k_killed && !r.killed) r.status = r.statuses[k];
        r.killed = r.killed || k_killed;
        if (!r.killed) r.status = r.statuses[k];
      }
    }
    if (running == 0) {
      r.end_ms = t_ms;
      break;
    }
    if (clock_type::now() > deadline) {
      for (std::size_t k = 0; k < pids.size(); ++k) {
        if (done[k]) continue;
        ::kill(pids[k], SIGKILL);
        ::waitpid(pids[k], &r.statuses[k], 0);
      }
      r.timed_out = true;
      r.end_ms = t_ms;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  for (const pid_t pid : pids) box.disown(pid);
  if (what != mode::per_process) ::unlink(ledger.c_str());
  r.killed = r.killed && !r.timed_out;
  if (home.version == cgroup_version::v1) {
    r.peak_bytes = std::max(r.peak_bytes, read_u64(box.dir() / "memory.max_usage_in_bytes"));
    r.oom_kills = keyed_u64(box.dir() / "memory.oom_control", "oom_kill");
  } else {
    r.peak_bytes = std::max(r.peak_bytes, read_u64(box.dir() / "memory.peak"));
    r.oom_kills = keyed_u64(box.dir() / "memory.events", "oom_kill");
  }
  if (const auto text = pnmem::test::read_file(events_path)) r.events = survival::parse_events(*text);
  if (o.keep_events.empty()) {
    ::unlink(events_path);
  } else {
    const auto kept = pnmem::test::fs::path(o.keep_events) / (std::string("events-") + mode_arg(what) + ".txt");
    std::error_code ec;
    pnmem::test::fs::copy_file(events_path, kept, pnmem::test::fs::copy_options::overwrite_existing, ec);
    ::unlink(events_path);
    if (ec) std::printf("warning: could not keep the events in %s: %s\n", kept.c_str(), ec.message().c_str());
  }

  r.lost = lost_requests(r.events);
  const auto& lv = r.events.levels;
  for (std::size_t k = 0; k < lv.size(); ++k) {
    const double to = k + 1 < lv.size() ? lv[k + 1].t_ms : r.end_ms;
    if (to > lv[k].t_ms) r.level_ms[static_cast<std::size_t>(lv[k].level)] += to - lv[k].t_ms;
  }
  return r;
}

// The box's memory PSI (a v1 cgroup has none of its own): the workload's watcher
// reads it, and a full avg10 above 0 is TIGHT. An earlier OOM (the policy-off
// run, another test) leaves avg10 above 0 for a minute or more while it decays,
// so a run starting then would begin at TIGHT for reasons not its own. Waits for
// both averages to read 0.00, at most max_s; says what it saw.
void wait_for_quiet_psi(int max_s) {
  const auto start = clock_type::now();
  bool announced = false;
  for (;;) {
    const auto text = pnmem::test::read_file("/proc/pressure/memory");
    if (!text) return;  // no PSI: nothing to wait for
    const auto p = pnmem::procfs::parse_psi(*text);
    if (!p.ok()) return;
    const double full = p.value.has_full ? p.value.full.avg10_pct : 0.0;
    const double waited = std::chrono::duration<double>(clock_type::now() - start).count();
    if (p.value.some.avg10_pct == 0.0 && full == 0.0) {
      if (announced) std::printf("box memory PSI quiet after %.0f s\n", waited);
      return;
    }
    if (waited >= max_s) {
      std::printf("box memory PSI still some avg10 %.2f %%, full avg10 %.2f %% after %d s: running anyway\n",
                  p.value.some.avg10_pct, full, max_s);
      return;
    }
    if (!announced) {
      std::printf("waiting for the box's memory PSI to decay (some avg10 %.2f %%, full avg10 %.2f %%)...\n",
                  p.value.some.avg10_pct, full);
      std::fflush(stdout);
      announced = true;
    }
    std::this_thread::sleep_for(1s);
  }
}

std::string mib(std::uint64_t b) { return std::to_string(b / MiB) + " MiB"; }

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by ") + (WTERMSIG(status) == SIGKILL ? "SIGKILL" : strsignal(WTERMSIG(status)));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

std::string describe_exit(const run_result& r) {
  if (!r.started) return "not started";
  if (r.timed_out) return "timed out (killed)";
  if (r.statuses.size() <= 1) return describe_status(r.status);
  // Several processes: how many ended each way ("2 killed by SIGKILL, 2 exit 0").
  std::map<std::string, int> ways;
  for (const int st : r.statuses) ++ways[describe_status(st)];
  std::string out;
  for (const auto& [way, count] : ways) out += (out.empty() ? "" : ", ") + std::to_string(count) + " " + way;
  return out;
}

void print_table(const std::vector<run_result>& runs, const options& o, const cgroup_home& home) {
  std::printf("survival run: memory cgroup %s under %s, limit %s, pnmem host reserve %s%s\n",
              pnmem::test::to_string(home.version), home.parent.c_str(), mib(o.limit).c_str(), mib(o.reserve).c_str(),
              o.processes > 1 ? (", " + std::to_string(o.processes) + " processes").c_str() : "");
  if (o.processes > 1) {
    std::printf("workload: %d processes, each %d bursts of %d requests %.1f s apart + a trickle, %d decode slots, "
                "prompts %d-%d tokens (fp32 KV 40 KiB/token + the activation peak), seeds %llu-%llu\n\n",
                o.processes, o.work.bursts, std::max(1, o.work.burst_size / o.processes), o.work.burst_gap_ms / 1000.0,
                std::max(1, o.work.slots / o.processes), o.work.min_prompt, o.work.max_prompt,
                static_cast<unsigned long long>(o.work.seed), static_cast<unsigned long long>(o.work.seed) + static_cast<unsigned long long>(o.processes) - 1);
  } else {
    std::printf("workload: %d bursts of %d requests %.1f s apart + a trickle, %d decode slots, prompts %d-%d tokens "
                "(fp32 KV 40 KiB/token + the activation peak), seed %llu\n\n",
                o.work.bursts, o.work.burst_size, o.work.burst_gap_ms / 1000.0, o.work.slots, o.work.min_prompt,
                o.work.max_prompt, static_cast<unsigned long long>(o.work.seed));
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  const auto add = [&](const std::string& name, auto&& value) {
    std::vector<std::string> cells;
    for (const auto& r : runs) cells.push_back(value(r));
    rows.emplace_back(name, std::move(cells));
  };
  const auto pct = [&](std::uint64_t b) {
    char t[64];
    std::snprintf(t, sizeof t, "%s (%.0f %%)", mib(b).c_str(), 100.0 * static_cast<double>(b) / static_cast<double>(o.limit));
    return std::string(t);
  };
  const auto secs = [](double ms) {
    char t[32];
    std::snprintf(t, sizeof t, "%.1f s", ms / 1000.0);
    return std::string(t);
  };
  add("peak usage / limit", [&](const run_result& r) { return pct(r.peak_bytes); });
  add("run time", [&](const run_result& r) { return secs(r.end_ms); });
  for (const auto l : {pnmem::mem_level::ok, pnmem::mem_level::watch, pnmem::mem_level::tight, pnmem::mem_level::critical}) {
    add("time at " + std::string(pnmem::to_string(l)),
        [&](const run_result& r) { return secs(r.level_ms[static_cast<std::size_t>(l)]); });
  }
  add("requests queued", [](const run_result& r) { return std::to_string(r.events.queued.size()); });
  // Outcomes with their reasons, e.g. "rejected: host_budget".
  std::set<std::string> keys;
  for (const auto& r : runs) {
    for (const auto& e : r.events.ended) keys.insert(std::string(survival::to_string(e.result)) + ": " + e.reason);
  }
  for (const auto& o2 : {survival::outcome::admitted, survival::outcome::capped, survival::outcome::rejected}) {
    const std::string prefix = std::string(survival::to_string(o2)) + ": ";
    add("  " + std::string(survival::to_string(o2)), [&](const run_result& r) {
      return std::to_string(std::count_if(r.events.ended.begin(), r.events.ended.end(),
                                          [&](const auto& e) { return e.result == o2; }));
    });
    for (const auto& k : keys) {
      if (k.rfind(prefix, 0) != 0) continue;
      add("    " + k.substr(prefix.size()), [&](const run_result& r) {
        return std::to_string(std::count_if(r.events.ended.begin(), r.events.ended.end(), [&](const auto& e) {
          return std::string(survival::to_string(e.result)) + ": " + e.reason == k;
        }));
      });
    }
  }
  add("  lost (never ended)", [](const run_result& r) { return std::to_string(r.lost); });
  add("OOM kills", [](const run_result& r) { return std::to_string(r.oom_kills); });
  add(o.processes > 1 ? "workloads" : "workload", [](const run_result& r) { return describe_exit(r); });
  if (o.processes > 1) {
    for (int k = 0; k < o.processes; ++k) {
      add("  process " + std::to_string(k + 1), [k](const run_result& r) {
        if (static_cast<std::size_t>(k) >= r.statuses.size()) return std::string("not started");
        const int base = k * 100000;
        const auto mine = [&](int id) { return id >= base && id < base + 100000; };
        const auto queued = std::count_if(r.events.queued.begin(), r.events.queued.end(), [&](const auto& q) { return mine(q.id); });
        const auto ended = std::count_if(r.events.ended.begin(), r.events.ended.end(), [&](const auto& e) { return mine(e.id); });
        return std::to_string(ended) + " of " + std::to_string(queued) + " ended, " + describe_status(r.statuses[static_cast<std::size_t>(k)]);
      });
    }
  }

  std::size_t w0 = 0;
  for (const auto& row : rows) w0 = std::max(w0, row.first.size());
  std::vector<std::size_t> w(runs.size(), 0);
  for (std::size_t c = 0; c < runs.size(); ++c) {
    w[c] = std::string(mode_name(runs[c].what)).size();
    for (const auto& row : rows) w[c] = std::max(w[c], row.second[c].size());
  }
  std::printf("%-*s", static_cast<int>(w0), "");
  for (std::size_t c = 0; c < runs.size(); ++c) std::printf("  %*s", static_cast<int>(w[c]), mode_name(runs[c].what));
  std::printf("\n");
  for (const auto& row : rows) {
    std::printf("%-*s", static_cast<int>(w0), row.first.c_str());
    for (std::size_t c = 0; c < runs.size(); ++c) std::printf("  %*s", static_cast<int>(w[c]), row.second[c].c_str());
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--workload") return workload_main(argc, argv);
  const options o = parse_args(argc, argv);

  std::string why;
  const auto home = find_cgroup_home(why);
  if (!home) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  pnmem::test::remove_stale_cgroups(home->parent, "pnmem-survive-");

  // Policy on runs first: the policy-off run's OOM leaves the box's PSI averages
  // raised for tens of seconds, and the policy-on run would start under them.
  std::vector<run_result> runs;
  for (const mode m : o.modes) {
    if (m != mode::off) wait_for_quiet_psi(o.psi_settle_s);
    run_result r = run_once(*home, o, m, argv[0]);
    if (!r.error.empty()) {
      std::printf("SKIP: cannot run in a memory cgroup here: %s\n", r.error.c_str());
      return 77;
    }
    if (cgroup_sandbox::stop_requested()) return 130;
    runs.push_back(std::move(r));
  }
  // Shown as: policy off, on without the ledger, policy on.
  const auto rank = [](mode m) { return m == mode::off ? 0 : (m == mode::no_ledger ? 1 : (m == mode::per_process ? 2 : 3)); };
  std::stable_sort(runs.begin(), runs.end(), [&](const run_result& a, const run_result& b) { return rank(a.what) < rank(b.what); });
  print_table(runs, o, *home);

  std::vector<survival::timeline_panel> panels;
  for (const auto& r : runs) {
    survival::timeline_panel p;
    const int ended = static_cast<int>(r.events.ended.size());
    p.title = std::string(mode_name(r.what)) + ": " + std::to_string(r.oom_kills) +
              " OOM kills, " + std::to_string(ended) + " of " + std::to_string(r.events.queued.size()) +
              " requests ended, peak " + mib(r.peak_bytes) + " of " + mib(o.limit);
    p.usage = r.usage;
    p.levels = r.events.levels;
    p.ended = r.events.ended;
    p.end_ms = r.end_ms;
    if (r.killed) p.kill_ms = r.end_ms;
    p.lost = r.lost;
    p.limit_bytes = o.limit;
    p.reserve_bytes = o.reserve;
    panels.push_back(std::move(p));
  }
  if (std::FILE* f = std::fopen(o.svg.c_str(), "w")) {
    const std::string svg = survival::render_timeline_svg(panels);
    const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
    if (std::fclose(f) != 0 || !ok) std::printf("\nwarning: could not write %s\n", o.svg.c_str());
    else std::printf("\nlevel timeline: %s\n", o.svg.c_str());
  } else {
    std::printf("\nwarning: could not write %s: %s\n", o.svg.c_str(), std::strerror(errno));
  }

  int failures = 0;
  for (const auto& r : runs) {
    if (r.what == mode::on && (r.oom_kills > 0 || r.killed || r.timed_out || r.lost > 0 || r.events.queued.empty())) {
      std::printf("FAIL: with the policy on the workload %s, %llu OOM kills, %d requests lost\n",
                  describe_exit(r).c_str(), static_cast<unsigned long long>(r.oom_kills), r.lost);
      ++failures;
    }
    if (r.what == mode::per_process && r.oom_kills == 0 && !r.killed && o.expect_per_process_killed) {
      std::printf("FAIL: with a ledger per process the workloads were not OOM-killed (%s): the box ledger is not what "
                  "saved the policy-on run here; raise --burst-size or --processes\n",
                  describe_exit(r).c_str());
      ++failures;
    }
    if (r.what == mode::off && r.oom_kills == 0 && !r.killed) {
      std::printf("FAIL: with the policy off the workload was not OOM-killed (%s): the bursts did not pass the "
                  "limit; lower --limit or raise --burst-size\n",
                  describe_exit(r).c_str());
      ++failures;
    }
  }
  if (failures == 0) {
    std::string what;
    for (const auto& r : runs) {
      if (r.what == mode::on) what += std::string(what.empty() ? "" : "; ") + "policy on survived and lost nothing";
      if (r.what == mode::off) what += std::string(what.empty() ? "" : "; ") + "policy off was OOM-killed";
      if (r.what == mode::per_process && (r.oom_kills > 0 || r.killed)) {
        what += std::string(what.empty() ? "" : "; ") + "a ledger per process was OOM-killed";
      }
    }
    std::printf("OK: %s\n", what.empty() ? "nothing to check (a run without the ledger is shown, not judged)" : what.c_str());
  }
  return failures == 0 ? 0 : 1;
}
