// Two engine processes on one box, each with its own view of the same two GPUs (the fake backend, with
// the devices' UUIDs in another order, as two CUDA_VISIBLE_DEVICES give them): through the box ledger,
// each counts the other's model loads on the same GPU, and none of a process killed holding one.
// Linux (the box ledger is a file in a temporary directory: nothing of the box's own is touched).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "pnmem/cuda/die_feed.hpp"
#include "pnmem/cuda/fake_backend.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/linux/box_ledger.hpp"
#include "pnmem/watcher.hpp"
#include "fixture_tree.hpp"

namespace pnmem::cuda {
namespace {

constexpr die_uuid gpu(const char* text) {
  die_uuid u;
  return parse_die_uuid(text, u) ? u : die_uuid{};
}
constexpr die_uuid gpu_x = gpu("GPU-0a0a0a0a-1111-2222-3333-444444444444");
constexpr die_uuid gpu_y = gpu("GPU-0b0b0b0b-5555-6666-7777-888888888888");
static_assert(!gpu_x.empty() && !gpu_y.empty() && gpu_x != gpu_y);

policy no_reserve() {
  policy p = default_policy;
  p.die_reserve_bytes = 0;
  p.die_scratch_bytes = 0;
  return p;
}

// One engine process: its GPUs (a fake backend whose devices are `order`), the die feed polled on every
// sample of its watcher, and a host ledger joined to the box book at `dir`, its dies named.
struct engine {
  std::shared_ptr<fake_host> host = std::make_shared<fake_host>();
  fake_backend gpus;
  die_feed feed;
  watcher<fake_sampler> w;
  scoped_subscription polled;
  host_ledger ledger;
  int named = 0;
  engine(std::vector<die_uuid> order, const std::string& dir)
      : gpus(fake_options{.devices = 2, .total_bytes_per_device = 40 * GiB, .uuids = std::move(order)}),
        feed(gpus, no_reserve()),
        w(make_sampler(host)),
        polled(feed_every_sample(feed, w)),
        ledger(join(dir)) {
    named = name_dies(feed, ledger);
    w.start();
  }
  static fake_sampler make_sampler(const std::shared_ptr<fake_host>& h) {
    h->next.total_bytes = 64 * GiB;
    h->next.avail_bytes = 32 * GiB;
    return fake_sampler{h};
  }
  static std::shared_ptr<box_link> join(const std::string& dir) {
    linux_os::box_options o;
    o.ledger = "dies";
    o.dir = dir;
    linux_os::box_join j = linux_os::join_box(o);
    REQUIRE_MESSAGE(j.link != nullptr, j.problem);
    j.link->reap_every_ns = 0;
    return j.link;
  }
  ~engine() { w.stop(); }
};

}  // namespace

TEST_CASE("two processes on one GPU, numbered differently: each counts the other's model loads, by the GPU's UUID") {
  const pnmem::test::temp_tree dir;
  const std::string where = dir.root.string();
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Worker 1 sees (x, y): loads 30 GiB onto x, its die 0, and holds it until killed.
    ::close(to_parent[0]);
    engine e({gpu_x, gpu_y}, where);
    host_ledger::reserve_options o;
    o.policy = no_reserve();
    auto r = e.ledger.reserve_model_load(e.w, model_load_spec{.weights_bytes = 30 * GiB, .kv_max_ctx_bytes = 0}, 0, o);
    const char* said = e.named == 2 && r.answer.status == admit_status::admitted && r.answer.die == 0 ? "y" : "n";
    (void)!::write(to_parent[1], said, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(to_parent[1]);
  char said = 0;
  REQUIRE(::read(to_parent[0], &said, 1) == 1);
  ::close(to_parent[0]);
  REQUIRE(said == 'y');

  // Worker 0 sees (y, x): x is its die 1.
  engine e({gpu_y, gpu_x}, where);
  REQUIRE(e.named == 2);
  CHECK(e.feed.uuid(0) == gpu_y);
  CHECK(e.feed.uuid(1) == gpu_x);
  const policy p = no_reserve();
  CHECK(e.ledger.die_pending_bytes(e.w, 1) == 30 * GiB);
  CHECK(e.ledger.die_pending_bytes(e.w, 0) == 0);
  const auto on_x = e.ledger.check_die_bytes(e.w, 1, 10 * GiB + 1, p);
  CHECK(on_x.answer.status == admit_status::denied);
  CHECK(on_x.answer.detail.limit_bytes == 10 * GiB);
  // A load with no die chosen goes to y, the roomiest once x's promise is counted.
  host_ledger::reserve_options o;
  o.policy = p;
  auto load = e.ledger.reserve_model_load(e.w, model_load_spec{.weights_bytes = 20 * GiB, .kv_max_ctx_bytes = 0},
                                          no_die, o);
  REQUIRE(load.answer.status == admit_status::admitted);
  CHECK(load.answer.die == 0);
  load.held.cancel();

  // The worker killed holding it (the OOM killer's way): the next answer counts none of it.
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  e.w.poll_now();
  CHECK(e.ledger.die_pending_bytes(e.w, 1) == 0);
  CHECK(e.ledger.check_die_bytes(e.w, 1, 40 * GiB, p).answer.status == admit_status::admitted);
}

TEST_CASE("a fake backend's UUIDs: as given, or one per device index that two fakes share") {
  fake_backend given(fake_options{.devices = 2, .uuids = {gpu_y, gpu_x}});
  fake_backend a(fake_options{.devices = 2});
  fake_backend b(fake_options{.devices = 2});
  die_uuid u;
  REQUIRE(given.device_uuid(1, u));
  CHECK(u == gpu_x);
  die_uuid ua;
  die_uuid ub;
  REQUIRE(a.device_uuid(1, ua));
  REQUIRE(b.device_uuid(1, ub));
  CHECK(ua == ub);
  CHECK_FALSE(ua.empty());
  REQUIRE(a.device_uuid(0, ub));
  CHECK(ua != ub);
  CHECK_FALSE(a.device_uuid(2, u));
  CHECK(u.empty());
  die_feed feed(a, no_reserve());
  CHECK(feed.uuid(1) == ua);
  CHECK(feed.uuid(2).empty());
  CHECK(feed.uuid(-1).empty());
}

}  // namespace pnmem::cuda
