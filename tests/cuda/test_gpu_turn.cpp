// test_gpu_turn.cpp - the GPU turn (gpu_turn.hpp) is served first come, first served.
//
// Linked into test_cuda_buffer_owner (tests/cuda/meson.build): the owner's turn, in the
// binary the CI's ThreadSanitizer leg runs.
//
// The seed's GPU turn is a ticket system: a bind that asks while decode steps run
// back to back is served after the steps already queued, not when it happens to win
// a wake-up race. Each test below sets the queue up while the test thread holds the
// turn (nothing can move then) and waits for the queue's depth (waiting()) to say
// every thread has taken its place: the order under test is the one the turn saw.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "pnmem/cuda/gpu_turn.hpp"

using pnmem::cuda::gpu_turn;
using pnmem::cuda::turn_hold;

namespace {

using clock_type = gpu_turn::clock;
using namespace std::chrono_literals;

// Long enough never to pass on a loaded machine under TSan when the turn is fair.
constexpr auto patience = 10s;

clock_type::time_point far() { return clock_type::now() + patience; }

// Waits (polling) until pred() holds; false after `patience`.
bool eventually(const std::function<bool()>& pred) {
  const auto until = far();
  while (!pred()) {
    if (clock_type::now() >= until) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

}  // namespace

TEST_CASE("gpu turn: try_acquire, acquire_until, held, waiting; released from another thread") {
  gpu_turn turn;
  CHECK_FALSE(turn.held());
  CHECK(turn.waiting() == 0);
  REQUIRE(turn.try_acquire());
  CHECK(turn.held());
  CHECK_FALSE(turn.try_acquire());
  CHECK_FALSE(turn.acquire_until(clock_type::now() - 1ms));  // a deadline already past: no wait
  CHECK_FALSE(turn.acquire_until(clock_type::now() + 5ms));   // times out behind the holder
  CHECK(turn.waiting() == 0);                                  // a waiter that gave up is not counted

  // The hold travels to another thread, which releases it (a step polled to completion
  // on the engine's driver thread).
  turn_hold hold{turn};
  std::thread other([h = std::move(hold)]() mutable { h.reset(); });
  other.join();
  CHECK_FALSE(turn.held());
  REQUIRE(turn.acquire_until(clock_type::now()));  // free and nobody queued: taken even at the deadline
  turn.release();
  CHECK_FALSE(turn.held());
}

TEST_CASE("gpu turn: try_acquire never overtakes a queued waiter") {
  gpu_turn turn;
  REQUIRE(turn.try_acquire());
  std::atomic<bool> got{false};
  std::atomic<bool> let_go{false};
  std::thread waiter([&] {
    if (!turn.acquire_until(far())) return;
    got.store(true);
    while (!let_go.load()) std::this_thread::sleep_for(100us);
    turn.release();
  });
  REQUIRE(eventually([&] { return turn.waiting() == 1; }));
  turn.release();
  // The waiter's ticket is served now, whether or not its thread has woken yet: the turn
  // is not free for a newcomer.
  CHECK(turn.held());
  CHECK_FALSE(turn.try_acquire());
  CHECK(eventually([&] { return got.load(); }));
  CHECK_FALSE(turn.try_acquire());
  let_go.store(true);
  waiter.join();
  CHECK(got.load());
  CHECK(turn.try_acquire());
  turn.release();
}

TEST_CASE("gpu turn: waiters are served in the order they asked; those that gave up are skipped") {
  gpu_turn turn;
  REQUIRE(turn.try_acquire());

  // Five waiters queue in this order while the turn is held: patient, hasty, patient,
  // hasty, patient. The hasty ones give up (their deadline passes) before the turn is
  // released; the patient ones must then be served 1, 2, 3.
  std::atomic<int> served{0};
  int order[3] = {0, 0, 0};
  bool patient_got[3] = {false, false, false};
  bool hasty_got[2] = {true, true};
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    const std::size_t queued_before = turn.waiting();
    if (i % 2 == 0) {
      const int k = i / 2;
      threads.emplace_back([&, k] {
        patient_got[k] = turn.acquire_until(far());
        if (!patient_got[k]) return;
        order[k] = served.fetch_add(1) + 1;
        turn.release();
      });
    } else {
      const int k = i / 2;
      const auto deadline = clock_type::now() + 300ms;
      threads.emplace_back([&, k, deadline] { hasty_got[k] = turn.acquire_until(deadline); });
    }
    REQUIRE(eventually([&] { return turn.waiting() == queued_before + 1; }));
  }
  threads[1].join();
  threads[3].join();
  CHECK_FALSE(hasty_got[0]);
  CHECK_FALSE(hasty_got[1]);
  CHECK(turn.waiting() == 3);  // the two that gave up left the queue

  turn.release();
  threads[0].join();
  threads[2].join();
  threads[4].join();
  CHECK(patient_got[0]);
  CHECK(patient_got[1]);
  CHECK(patient_got[2]);
  CHECK(order[0] == 1);
  CHECK(order[1] == 2);
  CHECK(order[2] == 3);
  CHECK_FALSE(turn.held());
  CHECK(turn.try_acquire());
  turn.release();
}

TEST_CASE("gpu turn: a waiter that timed out at the head or the tail does not stall the turn") {
  gpu_turn turn;
  REQUIRE(turn.try_acquire());
  // At the tail: the only waiter gives up; once the holder lets go the turn is free.
  bool got = true;
  std::thread hasty([&] { got = turn.acquire_until(clock_type::now() + 50ms); });
  hasty.join();
  CHECK_FALSE(got);
  turn.release();
  CHECK_FALSE(turn.held());
  REQUIRE(turn.try_acquire());

  // At the head: a hasty waiter first, a patient one behind it. The hasty one gives up
  // while the turn is held; the release goes to the patient one.
  std::atomic<bool> patient_got{false};
  bool hasty_got = true;
  std::thread first([&] { hasty_got = turn.acquire_until(clock_type::now() + 200ms); });
  REQUIRE(eventually([&] { return turn.waiting() == 1; }));
  std::thread second([&] {
    if (turn.acquire_until(far())) {
      patient_got.store(true);
      turn.release();
    }
  });
  REQUIRE(eventually([&] { return turn.waiting() == 2; }));
  first.join();
  CHECK_FALSE(hasty_got);
  CHECK(turn.waiting() == 1);
  turn.release();
  second.join();
  CHECK(patient_got.load());
  CHECK_FALSE(turn.held());
}

// The case: decode steps re-acquire the turn back to back (each step thread asks
// again the moment it lets go), and a bind asks in between. With a flag and a condition
// variable the thread that just released wins the turn again before any waiter wakes,
// so the bind waits for as long as the steps keep coming. FIFO: the bind is served after
// at most one step per step thread already queued.
TEST_CASE("gpu turn: a bind behind back-to-back steps is served within one step per step thread") {
  constexpr std::size_t step_threads = 3;
  constexpr int rounds = 20;
  gpu_turn turn;
  std::atomic<int> steps{0};
  std::atomic<bool> stop{false};
  std::atomic<int> step_timeouts{0};

  REQUIRE(turn.try_acquire());  // the test thread holds the turn while the queue forms
  std::vector<std::thread> drivers;
  for (std::size_t k = 0; k < step_threads; ++k) {
    drivers.emplace_back([&] {
      while (!stop.load()) {
        if (!turn.acquire_until(far())) {
          step_timeouts.fetch_add(1);
          return;
        }
        steps.fetch_add(1);  // one decode step, under the turn
        std::atomic<int> work{0};  // a little work while holding it
        for (int i = 0; i < 200; ++i) work.fetch_add(1, std::memory_order_relaxed);
        turn.release();  // ... and the next step asks again at once
      }
    });
  }

  int worst = 0;
  int binds_served = 0;
  bool holding = true;
  for (int round = 0; round < rounds; ++round) {
    if (!holding) {
      if (!turn.acquire_until(far())) break;  // the test thread queues behind the steps too
      holding = true;
    }
    // Held: no step runs. Every step thread queues behind the test thread, then the bind.
    if (!eventually([&] { return turn.waiting() == step_threads; })) break;
    const int before = steps.load();
    std::atomic<int> seen{-1};
    std::thread bind([&] {
      if (!turn.acquire_until(far())) return;
      seen.store(steps.load() - before);  // steps served between the bind's ask and its turn
      turn.release();
    });
    const bool queued = eventually([&] { return turn.waiting() == step_threads + 1; });
    turn.release();  // the steps flow again, back to back
    holding = false;
    bind.join();
    if (!queued) break;
    const int n = seen.load();
    if (n < 0) break;  // the bind timed out
    ++binds_served;
    if (n > worst) worst = n;
  }
  stop.store(true);
  if (holding) turn.release();
  for (auto& d : drivers) d.join();
  INFO("steps served before a bind, worst of " << binds_served << " binds: " << worst);
  CHECK(binds_served == rounds);
  CHECK(worst <= static_cast<int>(step_threads));
  CHECK(step_timeouts.load() == 0);
  CHECK(steps.load() > 0);
}
