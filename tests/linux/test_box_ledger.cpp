// pnmem/linux/box_ledger.hpp and host_ledger's box mode: one ledger every pnmem process of a box shares.
//
// Each case makes its own scope in a temporary directory (box_options::dir), so cases and runs never meet.
// Other processes are fork()ed children that join the same file and do what the case says, talking to
// the test through a pipe; they are killed (SIGKILL, as the OOM killer does), stopped (SIGSTOP) or let
// exit. Sample times are the real CLOCK_MONOTONIC (steady_now_ns), as the box's processes share it.
#include "pnmem/linux/box_ledger.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fixture_tree.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/level.hpp"

using namespace pnmem;
using pnmem::linux_os::box_options;
using pnmem::linux_os::join_box;

namespace {

constexpr std::uint64_t total = 64 * GiB;

// A watcher whose snapshot the test sets: 64 GiB, `avail` available, sampled at `read_ns`.
struct fake_watcher {
  mutable std::mutex mu;
  mem_state state;
  bool running() const { return true; }
  mem_state read() const {
    std::lock_guard<std::mutex> lk(mu);
    return state;
  }
  void sample(std::uint64_t avail, std::int64_t read_ns = steady_now_ns()) {
    mem_state s;
    s.host_total_bytes = total;
    s.host_avail_bytes = avail;
    s.host_read_ns = read_ns;
    s.seq = static_cast<std::uint64_t>(read_ns);
    std::lock_guard<std::mutex> lk(mu);
    state = with_derived_level(s);
  }
  // Dies as this process numbers them: die i has free[i] free of 80 GiB and retiring[i] retiring, read at
  // read_ns (the host left as it was).
  void dies(const std::vector<std::uint64_t>& free, const std::vector<std::uint64_t>& retiring,
            std::int64_t read_ns = steady_now_ns()) {
    std::lock_guard<std::mutex> lk(mu);
    mem_state s = state;
    s.n_dies = static_cast<int>(free.size());
    for (std::size_t i = 0; i < free.size(); ++i) {
      s.per_die_budget_bytes[i] = 80 * GiB;
      s.per_die_free_bytes[i] = free[i];
      s.per_die_retiring_bytes[i] = i < retiring.size() ? retiring[i] : 0;
      s.per_die_read_ns[i] = read_ns;
    }
    ++s.seq;
    state = with_derived_level(s);
  }
};

die_uuid gpu(const char* text) {
  die_uuid u;
  REQUIRE(parse_die_uuid(text, u));
  return u;
}

// A scope of its own: a directory under /tmp, its log lines kept.
struct scope {
  pnmem::test::temp_tree dir;
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  box_options options(const std::string& name = "test") const {
    box_options o;
    o.ledger = name;
    o.dir = dir.root.string();
    o.lock_timeout = std::chrono::milliseconds(300);
    auto l = lines;
    o.log = [l](std::string_view line) { l->emplace_back(line); };
    return o;
  }
  std::string path(const std::string& name = "test") const { return dir.root.string() + "/pnmem-ledger-" + name; }
  std::shared_ptr<box_link> join(const std::string& name = "test") const {
    linux_os::box_join j = join_box(options(name));
    INFO("problem: ", j.problem);
    REQUIRE(j.link != nullptr);
    j.link->reap_every_ns = 0;  // every answer looks for the dead: the cases decide when a sample comes
    return j.link;
  }
};

// A child process: runs `body(write_fd)` and exits 0 (or is killed first). The parent reads its lines.
struct child {
  pid_t pid = -1;
  int from = -1;
  template <class F>
  explicit child(F body) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(p[0]);
      body(p[1]);
      ::_exit(0);
    }
    ::close(p[1]);
    from = p[0];
  }
  // The next line the child wrote ("" at its end).
  std::string line() const {
    std::string out;
    char c;
    while (::read(from, &c, 1) == 1 && c != '\n') out += c;
    return out;
  }
  int wait_status() {
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return st;
  }
  ~child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (from >= 0) ::close(from);
  }
};

void say(int fd, const std::string& s) {
  const std::string l = s + "\n";
  (void)!::write(fd, l.data(), l.size());
}

}  // namespace

TEST_CASE("two ledgers of one box: each admission counts what the other promised, settled and credited") {
  const scope sc;
  fake_watcher w;
  host_ledger a{sc.join()};
  host_ledger b{sc.join()};
  REQUIRE(a.box_joined());
  CHECK(a.box_processes() == 2);
  const std::uint64_t reserve = box_reserve_bytes(total);
  w.sample(reserve + 10 * GiB);
  // a takes 6 of the 10 GiB above the reserve: b is told 4 remain, not 10.
  auto ra = a.reserve_bytes(w, 6 * GiB);
  REQUIRE(ra.answer.status == admit_status::admitted);
  auto rb = b.reserve_bytes(w, 6 * GiB);
  CHECK(rb.answer.status == admit_status::capped);
  CHECK(rb.pending_bytes == 6 * GiB);
  CHECK(rb.answer.detail.limit_bytes == 4 * GiB);
  CHECK(b.pending_bytes(w) == 6 * GiB);
  // Settled: counted until a sample that began after the settle has it, in every process.
  ra.held.settle();
  CHECK(b.pending_bytes(w) == 6 * GiB);
  w.sample(reserve + 4 * GiB);  // the new sample sees the 6 GiB allocated
  CHECK(b.pending_bytes(w) == 0);
  CHECK(b.reserve_bytes(w, 4 * GiB).answer.status == admit_status::admitted);  // (held, then cancelled)
  // Cancelled: gone from every answer at once.
  auto rc = a.reserve_bytes(w, 3 * GiB);
  REQUIRE(rc.answer.status == admit_status::admitted);
  CHECK(b.pending_bytes(w) == 3 * GiB);
  rc.held.cancel();
  CHECK(b.pending_bytes(w) == 0);
  // Credited frees: available to the other at once, until a sample after them.
  a.credit_freed(2 * GiB);
  CHECK(b.credited_bytes(w) == 2 * GiB);
  CHECK(b.room(w).credited_bytes == 2 * GiB);
  w.sample(reserve + 6 * GiB);
  CHECK(b.credited_bytes(w) == 0);
}

TEST_CASE("processes: a child's reservations count in the parent's answers; killed, they stop counting") {
  const scope sc;
  fake_watcher w;
  host_ledger parent{sc.join()};
  const std::uint64_t reserve = box_reserve_bytes(total);
  child c([&](int out) {
    fake_watcher cw;
    cw.sample(reserve + 10 * GiB);
    host_ledger mine{sc.join()};
    auto r = mine.reserve_bytes(cw, 5 * GiB);
    say(out, r.answer.status == admit_status::admitted ? "held" : "refused");
    ::pause();  // holds it until killed
  });
  REQUIRE(c.line() == "held");
  w.sample(reserve + 10 * GiB);
  CHECK(parent.pending_bytes(w) == 5 * GiB);
  CHECK(parent.box_processes() == 2);
  CHECK(parent.reserve_bytes(w, 6 * GiB).answer.status == admit_status::capped);
  // SIGSTOP: a stopped process keeps what it holds (its liveness lock stays with it).
  ::kill(c.pid, SIGSTOP);
  w.sample(reserve + 10 * GiB);
  CHECK(parent.pending_bytes(w) == 5 * GiB);
  ::kill(c.pid, SIGCONT);
  // SIGKILL, the OOM killer's way: the next answer after it frees the child's holder and its bytes.
  ::kill(c.pid, SIGKILL);
  c.wait_status();
  w.sample(reserve + 10 * GiB);
  CHECK(parent.pending_bytes(w) == 0);
  CHECK(parent.box_processes() == 1);
  CHECK(parent.reserve_bytes(w, 6 * GiB).answer.status == admit_status::admitted);
  const linux_os::box_read view = linux_os::read_box(sc.options());
  REQUIRE(view.view.has_value());
  CHECK(view.view->holders.size() == 1);
  CHECK(view.view->holders[0].holder.pid == ::getpid());
}

TEST_CASE("a holder's pid reused by a live process is no proof of life: only its liveness lock is") {
  const scope sc;
  fake_watcher w;
  host_ledger ledger{sc.join()};
  const std::uint64_t reserve = box_reserve_bytes(total);
  // Forge a holder with this (live) process's pid, and bytes, whose liveness byte nobody holds: what a
  // process leaves behind when it dies and its pid is given to another.
  const int fd = ::open(sc.path().c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  auto* seg = static_cast<box_segment*>(::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(seg != MAP_FAILED);
  REQUIRE(::pthread_mutex_lock(reinterpret_cast<pthread_mutex_t*>(seg->lock)) == 0);
  const std::uint32_t forged = box_take_holder(*seg, static_cast<std::int32_t>(::getpid()), "forged", 1);
  REQUIRE(forged != box_no_holder);
  box_add(*seg, forged, 7 * GiB, 1);
  ::pthread_mutex_unlock(reinterpret_cast<pthread_mutex_t*>(seg->lock));
  ::munmap(seg, sizeof(box_segment));
  ::close(fd);
  w.sample(reserve + 10 * GiB);
  CHECK(ledger.pending_bytes(w) == 0);  // freed at once, though getpid() is alive
  CHECK(ledger.box_processes() == 1);
}

TEST_CASE("a process that dies holding the segment's lock does not wedge the others") {
  const scope sc;
  fake_watcher w;
  host_ledger ledger{sc.join()};
  const std::uint64_t reserve = box_reserve_bytes(total);
  child c([&](int out) {
    fake_watcher cw;
    cw.sample(reserve + 10 * GiB);
    host_ledger mine{sc.join()};
    (void)mine.reserve_bytes(cw, 3 * GiB).held;  // (cancelled at once: nothing left held)
    auto r = mine.reserve_bytes(cw, 2 * GiB);
    const int fd = ::open(sc.path().c_str(), O_RDWR);
    auto* seg = static_cast<box_segment*>(::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::pthread_mutex_lock(reinterpret_cast<pthread_mutex_t*>(seg->lock));
    say(out, "locked");
    ::pause();
  });
  REQUIRE(c.line() == "locked");
  ::kill(c.pid, SIGKILL);
  c.wait_status();
  w.sample(reserve + 10 * GiB);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(ledger.pending_bytes(w) == 0);  // the lock handed on, the dead freed, the totals counted again
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(250));
  CHECK(ledger.box_joined());
  bool said = false;
  for (const std::string& l : *sc.lines) said = said || l.find("a process died holding its lock") != std::string::npos;
  CHECK(said);
}

TEST_CASE("a lock a stopped process holds: the ledger leaves the box within the timeout, saying so, instead of waiting") {
  const scope sc;
  fake_watcher w;
  host_ledger ledger{sc.join()};
  const std::uint64_t reserve = box_reserve_bytes(total);
  child c([&](int out) {
    const int fd = ::open(sc.path().c_str(), O_RDWR);
    auto* seg = static_cast<box_segment*>(::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::pthread_mutex_lock(reinterpret_cast<pthread_mutex_t*>(seg->lock));
    say(out, "locked");
    ::raise(SIGSTOP);
  });
  REQUIRE(c.line() == "locked");
  w.sample(reserve + 10 * GiB);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = ledger.reserve_bytes(w, 1 * GiB);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(r.answer.status == admit_status::admitted);  // counted in its own ledger
  CHECK_FALSE(ledger.box_joined());
  REQUIRE_FALSE(sc.lines->empty());
  CHECK(sc.lines->back().find("its lock could not be had") != std::string::npos);
  CHECK(ledger.pending_bytes(w) == 1 * GiB);  // its own promise, still
}

// A ledger of another pnmem version (a box whose engines were upgraded; /dev/shm outlives them): another
// size or version, the magic. While a process of that version holds it, it is refused (two versions
// cannot count in one book); once none does, the first process to join replaces it, and processes that
// join at once all end in the one that replaced it.
TEST_CASE("a ledger of another pnmem version: refused while a process holds it, replaced once none does") {
  const scope sc;
  const std::string file = sc.path("old");
  // What the version before dies left: its size, its identity fields, a promise of 8 GiB.
  auto make_old = [&] {
    ::unlink(file.c_str());
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 272768) == 0);
    unsigned char head[offsetof(box_segment, owner_uid)] = {};
    const std::uint32_t version = 1;
    const std::uint64_t size = 272768;
    std::memcpy(head + offsetof(box_segment, magic), box_magic, sizeof box_magic);
    std::memcpy(head + offsetof(box_segment, version), &version, sizeof version);
    std::memcpy(head + offsetof(box_segment, size), &size, sizeof size);
    REQUIRE(::pwrite(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head));
    const std::uint64_t promised = 8 * GiB;
    REQUIRE(::pwrite(fd, &promised, sizeof promised, 256) == static_cast<ssize_t>(sizeof promised));
    return fd;
  };
  auto size_of = [&] {
    struct stat st {};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_size);
  };

  // A live holder of the old version: its liveness lock on a byte past its data.
  const int old_holder = make_old();
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 272768 + 1 + 5;
  fl.l_len = 1;
  REQUIRE(::fcntl(old_holder, F_OFD_SETLK, &fl) == 0);
  const linux_os::box_join held = join_box(sc.options("old"));
  CHECK(held.link == nullptr);
  CHECK(held.problem.find("its size is 272768 bytes") != std::string::npos);
  CHECK(held.problem.find("a live process of that version holds it") != std::string::npos);
  CHECK(size_of() == 272768);  // left as it was

  // It exits: the next process to join replaces the file, and counts nothing of the dead's.
  ::close(old_holder);
  {
    fake_watcher w;
    w.sample(total / 2);
    host_ledger ledger{sc.join("old")};
    CHECK(size_of() == sizeof(box_segment));
    CHECK(ledger.box_processes() == 1);
    CHECK(ledger.pending_bytes(w) == 0);
  }

  // Not a ledger (no magic), of another size: refused, never replaced (it is someone's file).
  {
    ::unlink(file.c_str());
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(::write(fd, "not a pnmem ledger", 18) == 18);
    ::close(fd);
    const linux_os::box_join junk = join_box(sc.options("old"));
    CHECK(junk.link == nullptr);
    CHECK(junk.problem.find("its size is 18 bytes") != std::string::npos);
    CHECK(size_of() == 18);
  }
  // An old ledger others may open: refused as any such file is, not replaced.
  ::close(make_old());
  REQUIRE(::chmod(file.c_str(), 0644) == 0);
  CHECK(join_box(sc.options("old")).problem.find("other users may open it") != std::string::npos);
  CHECK(size_of() == 272768);

  // Six processes join an old ledger at once: one replaces it, and all six are holders of that one.
  ::close(make_old());
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<std::unique_ptr<child>> joiners;
  for (int i = 0; i < 6; ++i) {
    joiners.push_back(std::make_unique<child>([&](int out) {
      ::close(go[1]);
      char c;
      (void)!::read(go[0], &c, 1);  // all start together
      const linux_os::box_join j = join_box(sc.options("old"));
      say(out, j.link != nullptr ? "joined" : j.problem);
      ::pause();
    }));
  }
  ::close(go[0]);
  ::close(go[1]);  // EOF: go
  for (auto& j : joiners) CHECK(j->line() == "joined");
  const linux_os::box_read r = linux_os::read_box(sc.options("old"));
  REQUIRE(r.view);
  CHECK(r.view->holders.size() == 6);
}

TEST_CASE("untrusted segments: each is refused with one line naming it, and nothing is joined") {
  const scope sc;
  const std::string file = sc.path("bad");
  auto refused = [&](const std::string& why) {
    const linux_os::box_join j = join_box(sc.options("bad"));
    CHECK(j.link == nullptr);
    CHECK(j.problem.find("pnmem: box ledger " + file + " refused: ") == 0);
    CHECK(j.problem.find(why) != std::string::npos);
    CHECK(j.problem.find('\n') == std::string::npos);
    return j.problem;
  };
  auto make = [&](std::size_t size, mode_t mode) {
    ::unlink(file.c_str());
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, mode);
    REQUIRE(fd >= 0);
    REQUIRE(::fchmod(fd, mode) == 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
    return fd;
  };
  // Another size (another version, or not a ledger at all).
  ::close(make(4096, 0600));
  refused("its size is 4096 bytes");
  // The right size, no magic.
  ::close(make(sizeof(box_segment), 0600));
  refused("no magic");
  // A good segment, then broken one field at a time.
  ::unlink(file.c_str());
  { REQUIRE(sc.join("bad") != nullptr); }  // made, joined and left
  auto edit = [&](auto change) {
    const int fd = ::open(file.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    auto* seg = static_cast<box_segment*>(::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE(seg != MAP_FAILED);
    change(*seg);
    ::munmap(seg, sizeof(box_segment));
    ::close(fd);
  };
  edit([](box_segment& s) { s.layout ^= 1; });  // another build's layout, held by a live process of it
  {
    const int held = ::open(file.c_str(), O_RDWR);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(sizeof(box_segment)) + 1;
    fl.l_len = 1;
    REQUIRE(::fcntl(held, F_OFD_SETLK, &fl) == 0);
    refused("its layout is another build's (another pnmem version); a live process of that version holds it");
    ::close(held);
  }
  edit([](box_segment& s) { s.layout = box_layout(); s.holders_live = 7; });
  refused("its count of holders is 7");
  edit([](box_segment& s) {
    s.holders_live = 0;
    s.holders[3].state = box_holder_state::live;
    s.holders[3].reservations = 1;
    s.holders[3].unsettled_bytes = 1ull << 60;
    s.unsettled_total = 1ull << 60;
    s.holders_live = 1;
  });
  {
    box_options o = sc.options("bad");
    o.box_total_bytes = total;
    const linux_os::box_join j = join_box(o);
    CHECK(j.link == nullptr);
    CHECK(j.problem.find("more than the box's") != std::string::npos);
  }
  edit([](box_segment& s) { s.holders[3].state = static_cast<box_holder_state>(5); });
  refused("holder 3 has state 5");
  // Another user's file (we are root here: give it away), and one others may read.
  ::unlink(file.c_str());
  { REQUIRE(sc.join("bad") != nullptr); }
  if (::geteuid() == 0) {
    REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
    refused("belongs to uid 65534");
    REQUIRE(::chown(file.c_str(), 0, 0) == 0);
  }
  REQUIRE(::chmod(file.c_str(), 0644) == 0);
  refused("other users may open it (mode 0644)");
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  // A symbolic link where the file should be.
  const std::string target = sc.path("bad") + ".target";
  REQUIRE(::rename(file.c_str(), target.c_str()) == 0);
  REQUIRE(::symlink(target.c_str(), file.c_str()) == 0);
  refused("symbolic link");
  ::unlink(file.c_str());
  // PN_LEDGER values that are no scope.
  for (const char* bad : {"a b", "../x", ".hidden", "x/y", "/dir/"}) {
    box_options o = sc.options(bad);
    const linux_os::box_join j = join_box(o);
    CAPTURE(bad);
    CHECK(j.link == nullptr);
    CHECK(j.problem.find("PN_LEDGER=\"") != std::string::npos);
  }
  box_options off = sc.options("off");
  CHECK(join_box(off).off);
}

TEST_CASE("the segment's totals are exact sums near 2^64: a grant stops at 2^64-1, never clamps a total") {
  // A clamped total cannot be taken apart: 2^64-1 less one holder's bytes is below the others' sum, and
  // the next process to open the segment would refuse it (found by fuzz_box_segment).
  constexpr std::uint64_t max = ~std::uint64_t{0};
  const auto seg = std::make_unique<box_segment>();
  box_segment& s = *seg;
  box_init(s, "t", 0, 0, 1);
  const std::uint32_t a = box_take_holder(s, 10, "a", 1);
  const std::uint32_t b = box_take_holder(s, 11, "b", 1);
  box_add(s, a, max - 100, 2);
  box_add(s, b, 1000, 2);  // 100 bytes of room: granted 100 (the total stops at 2^64-1)
  CHECK(s.holders[b].unsettled_bytes == 100);
  CHECK(s.unsettled_total == max);
  CHECK(box_segment_problem(&s, sizeof s).empty());
  box_add(s, b, 5, 3);  // none: not a reservation of nothing
  CHECK(s.holders[b].reservations == 1);
  box_settle(s, b, 1000, 4);  // what b asked, more than it was granted
  CHECK(s.holders[b].unsettled_bytes == 0);
  CHECK(s.unsettled_total == max - 100);
  CHECK(box_segment_problem(&s, sizeof s).empty());
  box_remove(s, a, max - 100);
  CHECK(s.unsettled_total == 0);
  CHECK(box_segment_problem(&s, sizeof s).empty());
  // Dies and their retiring bytes likewise.
  die_uuid id;
  id.bytes[0] = 7;
  const std::uint32_t d = box_die_index(s, id, true);
  box_die_add(s, a, d, max - 10);
  box_die_add(s, b, d, 20);
  CHECK(s.holder_die_bytes[b][d] == 10);
  box_die_set_retiring(s, a, d, max);
  box_die_set_retiring(s, b, d, 50);
  CHECK(s.holder_die_retiring[b][d] == 0);
  CHECK(box_segment_problem(&s, sizeof s).empty());
  box_die_remove(s, a, d, max - 10);
  CHECK(s.dies[d].unsettled_total == 10);
  CHECK(box_segment_problem(&s, sizeof s).empty());
  // Figures another process left that add up past 2^64: refused, naming why; counted again (a death under
  // the lock), the later holder gets what room is left and the segment is taken.
  s.holders[b].unsettled_bytes = 200;
  s.holders[b].reservations = 1;
  s.holders[a].unsettled_bytes = max - 100;
  s.holders[a].reservations = 1;
  s.unsettled_total = max;
  CHECK(box_segment_problem(&s, sizeof s) == "its holders' unsettled bytes add up past 2^64");
  box_recount(s);
  CHECK(s.holders[b].unsettled_bytes == 100);
  CHECK(s.unsettled_total == max);
  CHECK(box_segment_problem(&s, sizeof s).empty());
}

TEST_CASE("a ledger on an untrusted segment counts its own promises and answers as a ledger alone does") {
  const scope sc;
  fake_watcher w;
  const std::string file = sc.path("junk");
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 100) == 0);
  ::close(fd);
  const linux_os::box_join j = join_box(sc.options("junk"));
  REQUIRE(j.link == nullptr);
  host_ledger ledger{j.link};
  CHECK_FALSE(ledger.box_joined());
  w.sample(box_reserve_bytes(total) + 10 * GiB);
  auto r = ledger.reserve_bytes(w, 4 * GiB);
  CHECK(r.answer.status == admit_status::admitted);
  CHECK(ledger.pending_bytes(w) == 4 * GiB);
}

TEST_CASE("fork: the child leaves its parent's place and joins as a holder of its own") {
  const scope sc;
  fake_watcher w;
  host_ledger ledger{sc.join()};
  const std::uint64_t reserve = box_reserve_bytes(total);
  w.sample(reserve + 10 * GiB);
  auto mine = ledger.reserve_bytes(w, 2 * GiB);
  REQUIRE(mine.answer.status == admit_status::admitted);
  child c([&](int out) {
    // The inherited reservation is the parent's: the child neither counts it twice nor cancels it.
    fake_watcher cw;
    cw.sample(reserve + 10 * GiB);
    const std::uint64_t pending = ledger.pending_bytes(cw);
    auto r = ledger.reserve_bytes(cw, 1 * GiB);
    say(out, std::to_string(pending) + " " + std::to_string(ledger.box_processes()) + " " +
                 (r.answer.status == admit_status::admitted ? "held" : "refused"));
    mine.held.cancel();  // a copy of the parent's handle: does nothing
    say(out, std::to_string(ledger.pending_bytes(cw)));
    ::pause();
  });
  CHECK(c.line() == std::to_string(2 * GiB) + " 2 held");
  CHECK(c.line() == std::to_string(3 * GiB));
  CHECK(ledger.pending_bytes(w) == 3 * GiB);
  ::kill(c.pid, SIGKILL);
  c.wait_status();
  w.sample(reserve + 10 * GiB);
  CHECK(ledger.pending_bytes(w) == 2 * GiB);  // the parent's own, still held
}

TEST_CASE("the default scope: one file per user and memory cgroup limit, under the directory given") {
  box_options o;
  o.dir = "/dev/shm";
  const linux_os::box_path a = linux_os::box_path_for(o);
  CHECK(a.path == "/dev/shm/pnmem-ledger-" + std::to_string(::geteuid()) + "-box");
  o.limit_cgroup = "/kubepods/pod1";
  const linux_os::box_path b = linux_os::box_path_for(o);
  CHECK(b.path.rfind("/dev/shm/pnmem-ledger-" + std::to_string(::geteuid()) + "-cg", 0) == 0);
  o.limit_cgroup = "/kubepods/pod2";
  CHECK(linux_os::box_path_for(o).path != b.path);
  o.ledger = "engines";
  CHECK(linux_os::box_path_for(o).path == "/dev/shm/pnmem-ledger-engines");
  o.ledger = "/run/pnmem/ledger";
  CHECK(linux_os::box_path_for(o).path == "/run/pnmem/ledger");
}

TEST_CASE("dies: processes that number one GPU differently count each other's reservations on it, by its UUID") {
  const scope sc;
  const die_uuid x = gpu("GPU-11111111-2222-3333-4444-555555555555");
  const die_uuid y = gpu("GPU-66666666-7777-8888-9999-aaaaaaaaaaaa");
  policy p = default_policy;
  p.die_reserve_bytes = 0;
  p.die_scratch_bytes = 0;
  host_ledger::reserve_options o;
  o.policy = p;
  // Worker a sees (x, y) as dies 0 and 1; worker b, with another CUDA_VISIBLE_DEVICES, (y, x).
  fake_watcher wa;
  fake_watcher wb;
  wa.sample(total / 2);
  wb.sample(total / 2);
  wa.dies({40 * GiB, 40 * GiB}, {});
  wb.dies({40 * GiB, 40 * GiB}, {});
  host_ledger a{sc.join()};
  host_ledger b{sc.join()};
  REQUIRE(a.name_die(0, x));
  REQUIRE(a.name_die(1, y));
  REQUIRE(b.name_die(0, y));
  REQUIRE(b.name_die(1, x));

  // a loads 30 GiB onto x (its die 0): b's die 1 has 10 GiB left, its die 0 (y) all 40.
  auto load = a.reserve_model_load(wa, model_load_spec{.weights_bytes = 30 * GiB, .kv_max_ctx_bytes = 0}, 0, o);
  REQUIRE(load.answer.status == admit_status::admitted);
  const auto bx = b.check_die_bytes(wb, 1, 11 * GiB, p);
  CHECK(bx.answer.status == admit_status::denied);
  CHECK(bx.answer.detail.limit_bytes == 10 * GiB);
  CHECK(bx.pending_bytes == 30 * GiB);
  CHECK(b.figures_for_die(wb, 1).box);
  CHECK(b.die_pending_bytes(wb, 0) == 0);
  // b's roomiest die is now y (its die 0): a model load with no die goes there.
  auto lb = b.reserve_model_load(wb, model_load_spec{.weights_bytes = 20 * GiB, .kv_max_ctx_bytes = 0}, no_die, o);
  REQUIRE(lb.answer.status == admit_status::admitted);
  CHECK(lb.answer.die == 0);
  CHECK(a.die_pending_bytes(wa, 1) == 20 * GiB);  // a sees it on its die 1: y

  // A ledger that does not name its dies counts only its own there.
  host_ledger c{sc.join()};
  CHECK(c.die_pending_bytes(wa, 0) == 0);
  CHECK_FALSE(c.figures_for_die(wa, 0).box);

  // Settled: counted in b until a sample of x that began after the settle.
  const std::int64_t before = steady_now_ns();
  load.held.settle();
  wb.dies({40 * GiB, 40 * GiB}, {}, before);
  CHECK(b.die_pending_bytes(wb, 1) == 30 * GiB);
  wb.dies({40 * GiB, 10 * GiB}, {});
  CHECK(b.die_pending_bytes(wb, 1) == 0);
  CHECK(b.check_die_bytes(wb, 1, 10 * GiB, p).answer.status == admit_status::admitted);

  // Retiring bytes are the GPU's: a has 6 GiB retiring on x, b 2 GiB on x; each sees 8.
  wa.dies({10 * GiB, 20 * GiB}, {6 * GiB, 0});
  wb.dies({20 * GiB, 10 * GiB}, {0, 2 * GiB});
  CHECK(a.figures_for_die(wa, 0).retiring_bytes == 6 * GiB);  // b has not published yet
  CHECK(b.figures_for_die(wb, 1).retiring_bytes == 8 * GiB);
  CHECK(a.figures_for_die(wa, 0).retiring_bytes == 8 * GiB);
  wa.dies({10 * GiB, 20 * GiB}, {1 * GiB, 0});
  CHECK(a.figures_for_die(wa, 0).retiring_bytes == 3 * GiB);
  CHECK(b.figures_for_die(wb, 1).retiring_bytes == 3 * GiB);
  lb.held.cancel();
  CHECK(a.die_pending_bytes(wa, 1) == 0);
}

TEST_CASE("dies: a process killed holding a model load's reservation holds nothing on the GPU") {
  const scope sc;
  const die_uuid x = gpu("GPU-11111111-2222-3333-4444-555555555555");
  policy p = default_policy;
  p.die_reserve_bytes = 0;
  p.die_scratch_bytes = 0;
  child c([&](int out) {
    fake_watcher cw;
    cw.sample(total / 2);
    cw.dies({40 * GiB, 40 * GiB}, {0, 4 * GiB});
    host_ledger mine{sc.join()};
    mine.name_die(1, x);
    host_ledger::reserve_options o;
    o.policy = p;
    auto r = mine.reserve_die_bytes(cw, 1, 25 * GiB, o);
    (void)mine.figures_for_die(cw, 1);  // publishes its retiring bytes
    say(out, r.answer.status == admit_status::admitted ? "held" : "refused");
    ::pause();
  });
  REQUIRE(c.line() == "held");
  fake_watcher w;
  w.sample(total / 2);
  w.dies({40 * GiB}, {});
  host_ledger parent{sc.join()};
  REQUIRE(parent.name_die(0, x));
  CHECK(parent.die_pending_bytes(w, 0) == 25 * GiB);
  CHECK(parent.figures_for_die(w, 0).retiring_bytes == 4 * GiB);
  CHECK(parent.check_die_bytes(w, 0, 16 * GiB, p).answer.status == admit_status::denied);
  ::kill(c.pid, SIGKILL);
  c.wait_status();
  w.sample(total / 2);
  w.dies({40 * GiB}, {});
  CHECK(parent.die_pending_bytes(w, 0) == 0);
  CHECK(parent.figures_for_die(w, 0).retiring_bytes == 0);
  CHECK(parent.check_die_bytes(w, 0, 40 * GiB, p).answer.status == admit_status::admitted);
}
