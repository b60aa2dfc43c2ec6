// integration/c_global_state.cpp - the C ABI's process-wide state (c_global_state.hpp).
#include "c_global_state.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "c_boundary.hpp"
#include "c_conversions.hpp"
#include "pnmem/config.hpp"
#if defined(__linux__)
#include "pnmem/linux/box_ledger.hpp"
#endif

namespace pnmem::c_abi {

namespace {
// The sink until the engine sets one: standard error, one line each, as the C++ library reports a bad
// PN_* value. pnmem_set_log_sink(NULL, NULL) silences it.
void stderr_sink(void* /*user*/, const char* line) { std::fprintf(stderr, "%s\n", line); }
const log_sink default_sink{&stderr_sink, nullptr};
}  // namespace

global_state::global_state() {
  sink_.store(&default_sink, std::memory_order_release);
  // First: the library's defaults (watcher_options{}, the sampler's options, the gate's) would
  // report them on stderr. Analysis-free: no other thread sees the state yet.
  for (const config_error& e : take_env_errors()) pending_.push_back(e.log_line());
  if (!pending_.empty()) has_pending_.store(true, std::memory_order_release);
  // Last: fully built.
  detail::fork_registry::get().add(this, detail::fork_registry::rank_c_state,
                                   {[](void* s) noexcept { static_cast<global_state*>(s)->prepare_fork(); },
                                    [](void* s) noexcept { static_cast<global_state*>(s)->after_fork_parent(); },
                                    [](void* s) noexcept { static_cast<global_state*>(s)->after_fork_child(); }});
}

void global_state::prepare_fork() noexcept {
  res_mu_.lock();
  subs_mu_.lock();
  fleet_mu_.lock();
  shed_mu_.lock();
}

void global_state::after_fork_parent() noexcept {
  shed_mu_.unlock();
  fleet_mu_.unlock();
  subs_mu_.unlock();
  res_mu_.unlock();
}

void global_state::after_fork_child() noexcept {
  running_.clear();  // the threads that were calling subscribers are gone (no allocation: clear keeps capacity)
  // Waiters in the parent (an unsubscribe waiting for a callback) do not exist here: a fresh one.
  new (&subs_cv_) std::condition_variable();
  shed_running_ = std::thread::id();  // the hook's caller was the parent's poll thread
  new (&shed_cv_) std::condition_variable();
  shed_mu_.unlock();
  fleet_mu_.unlock();
  subs_mu_.unlock();
  res_mu_.unlock();
}

void global_state::note_fail_open() {
  const std::uint64_t generation = detail::fork_registry::get().generation();
  const platform_watcher* w = watcher();
  if (generation == 0 || w == nullptr || w->running()) return;
  std::uint64_t noted = fork_noted_.load(std::memory_order_relaxed);
  if (noted == generation || !fork_noted_.compare_exchange_strong(noted, generation)) return;
  log("pnmem: this process is a fork's child: the watcher's poll thread did not come along, so "
      "admissions fail open here until pnmem_watcher_start starts it in this process");
}

global_state::~global_state() {
  detail::fork_registry::get().remove(this);
  // At exit: a call still running on another thread finds no watcher rather than a
  // destroyed one (owner_ is destroyed after this body).
  watcher_.store(nullptr, std::memory_order_release);
}

// --- the watcher ---------------------------------------------------------------------------

namespace {
// Where the platform's sampler takes a log for its notes (Linux), `fn`; elsewhere nothing. A
// template, so that the branch a platform lacks is never compiled there.
template <class Options, class Fn>
void set_sampler_log(Options& o, Fn fn) {
  if constexpr (requires { o.log = fn; }) o.log = std::move(fn);
}
// Where the platform's sampler reads its files under a root directory (Linux), `root`.
template <class Options>
void set_sampler_root(Options& o, const std::string& root) {
  if constexpr (requires { o.root = root; }) o.root = root;
}
}  // namespace

platform_watcher& global_state::create_locked(watcher_options o, const std::string& root) {
  if (platform_watcher* w = watcher_.load(std::memory_order_acquire)) return *w;
  o.policy = load_policy();
  platform_sampler_options so;  // the environment's PSI source, where the platform's sampler has one
  set_sampler_root(so, root);
  root_ = root;
  // The sampler's notes (its PSI source falling back) come from the watcher's thread: a sink that
  // throws must not end it.
  set_sampler_log(so, [this](std::string_view line) {
    try {
      log("pnmem: " + std::string(line));
    } catch (...) {
    }
  });
  auto w = std::make_unique<platform_watcher>(platform_sampler{std::move(so)}, o);
  // The one subscriber of the watcher: every change goes to the C subscribers. It is never
  // unsubscribed (the watcher lives as long as this state).
  w->subscribe([this](const level_change& c) { dispatch(c); });
  owner_ = std::move(w);
  // Every sample below WATCH to the shed hook (pnmem_set_shed_hook): a shed that needs no loop of the
  // engine's. (Ended before the watcher goes: declared after it.)
  shed_sub_ = shed_on_every_sample(*owner_, ledger, [this](std::uint64_t want) { return call_shed_hook(want); },
                                   owner_->options().policy);
  watcher_.store(owner_.get(), std::memory_order_release);
  return *owner_;
}

platform_watcher& global_state::ensure_watcher() {
  if (platform_watcher* w = watcher()) return *w;
  detail::lock_guard lk(life_mu_);
  return create_locked(to_watcher_options(process_env_config().value), "/");
}

std::pair<platform_watcher*, bool> global_state::ensure_watcher(const watcher_options& o, const std::string& root) {
  detail::lock_guard lk(life_mu_);  // root_ is read under it; creating the watcher is rare
  if (platform_watcher* w = watcher()) {
    const watcher_options& have = w->options();
    return {w, have.poll_interval == o.poll_interval && have.pressure_poll_interval == o.pressure_poll_interval &&
                   have.step_down_dwell == o.step_down_dwell && root_ == root};
  }
  platform_watcher& w = create_locked(o, root);
  return {&w, true};
}

void global_state::join_box(const std::optional<std::string>& ledger_option) {
#if defined(__linux__)
  if (box_tried_.exchange(true, std::memory_order_acq_rel)) return;
  linux_os::box_options o = linux_os::box_options_from_env();
  if (ledger_option) o.ledger = *ledger_option;
  if (const platform_watcher* w = watcher()) {
    const mem_state s = w->read();
    o.limit_cgroup = std::string(s.provenance.limit_cgroup_path());
    o.box_total_bytes = s.provenance.meminfo_total_bytes;
  }
  o.log = [this](std::string_view line) {
    try {
      log(line);
    } catch (...) {  // a sink that throws loses its line, nothing else
    }
  };
  linux_os::box_join j = linux_os::join_box(o);
  if (!j.problem.empty()) log(j.problem);
  if (j.link != nullptr) ledger.attach_box(std::move(j.link));
#else
  (void)ledger_option;
#endif
}

// --- the policy ----------------------------------------------------------------------------

const pnmem::policy& global_state::load_policy() {
  if (const pnmem::policy* p = policy_.load(std::memory_order_acquire)) return *p;
  policy_storage_ = process_env_config().value.policy;  // its errors: taken by the constructor
  policy_.store(&policy_storage_, std::memory_order_release);
  return policy_storage_;
}

const pnmem::policy& global_state::policy() {
  if (const pnmem::policy* p = policy_.load(std::memory_order_acquire)) return *p;
  detail::lock_guard lk(life_mu_);
  return load_policy();
}

void global_state::flush() {
  if (!has_pending_.load(std::memory_order_acquire)) return;
  std::vector<std::string> lines;
  {
    detail::lock_guard lk(life_mu_);
    lines.swap(pending_);
    has_pending_.store(false, std::memory_order_relaxed);
  }
  for (const auto& l : lines) log(l);
}

// --- the log sink --------------------------------------------------------------------------

void global_state::log(std::string_view line) const {
  const log_sink* s = sink_.load(std::memory_order_acquire);
  if (s != nullptr && s->fn != nullptr) s->fn(s->user, std::string(line).c_str());
}

void global_state::set_sink(pnmem_log_fn fn, void* user) {
  auto s = std::make_unique<log_sink>(log_sink{fn, user});
  detail::lock_guard lk(sink_mu_);
  sinks_.reserve(sinks_.size() + 1);  // may throw: before anything is published
  sink_.store(s.get(), std::memory_order_release);
  sinks_.push_back(std::move(s));
}

// --- reservations --------------------------------------------------------------------------

void global_state::sweep_expired() {
  if (expiries_.empty()) return;
  const std::int64_t now = ledger.now_ns();
  const auto end = expiries_.upper_bound(now);
  for (auto it = expiries_.begin(); it != end; ++it) {
    // The ledger stopped counting it at its expiry; cancelling removes what is left of it.
    handles_.erase(it->second);
  }
  expiries_.erase(expiries_.begin(), end);
}

pnmem_reservation global_state::keep(host_ledger::reservation held, std::int64_t expires_ns) {
  if (!held) return 0;
  detail::lock_guard lk(res_mu_);
  sweep_expired();
  const pnmem_reservation id = ++last_handle_;
  handle h{std::move(held), std::nullopt};
  if (expires_ns > 0) h.expiry = expiries_.emplace(expires_ns, id);
  try {
    handles_.emplace(id, std::move(h));
  } catch (...) {
    if (h.expiry) expiries_.erase(*h.expiry);
    throw;  // h's reservation gives its bytes back as it goes
  }
  return id;
}

void global_state::settle(pnmem_reservation id) {
  detail::lock_guard lk(res_mu_);
  sweep_expired();
  const auto it = handles_.find(id);
  if (it == handles_.end()) return;
  it->second.held.settle();
  if (it->second.expiry) expiries_.erase(*it->second.expiry);
  handles_.erase(it);
}

void global_state::cancel(pnmem_reservation id) {
  detail::lock_guard lk(res_mu_);
  sweep_expired();
  const auto it = handles_.find(id);
  if (it == handles_.end()) return;
  if (it->second.expiry) expiries_.erase(*it->second.expiry);
  handles_.erase(it);  // the reservation's destructor gives the bytes back
}

// --- level subscriptions ---------------------------------------------------------------------

pnmem_subscription global_state::subscribe(pnmem_level_fn fn, void* user) {
  detail::lock_guard lk(subs_mu_);
  subs_.reserve(subs_.size() + 1);
  const pnmem_subscription id = ++last_sub_;
  subs_.push_back(c_subscriber{id, fn, user});
  return id;
}

bool global_state::subscribed(pnmem_subscription id) const {
  return std::any_of(subs_.begin(), subs_.end(), [id](const c_subscriber& s) { return s.id == id; });
}

bool global_state::running_elsewhere(pnmem_subscription id) const {
  const std::thread::id self = std::this_thread::get_id();
  return std::any_of(running_.begin(), running_.end(),
                     [&](const auto& r) { return r.first == id && r.second != self; });
}

void global_state::unsubscribe(pnmem_subscription id) {
  detail::unique_lock lk(subs_mu_);
  std::erase_if(subs_, [id](const c_subscriber& s) { return s.id == id; });
  while (running_elsewhere(id)) subs_cv_.wait(lk.native());
}

void global_state::dispatch(const level_change& c) noexcept {
  if (c.from != c.to) counters.count_transition(c.from, c.to);
  try {
    pnmem_state st{};
    const pnmem_level_change change = to_c(c, st);
    std::vector<c_subscriber> targets;
    {
      detail::lock_guard lk(subs_mu_);
      targets = subs_;
    }
    for (const c_subscriber& t : targets) {
      {
        detail::lock_guard lk(subs_mu_);
        if (!subscribed(t.id)) continue;  // unsubscribed since the copy: not called again
        running_.emplace_back(t.id, std::this_thread::get_id());
      }
      try {
        t.fn(t.user, &change);
      } catch (...) {
        report_current_exception("pnmem_subscribe");  // a C++ callback threw: the others still run
      }
      {
        detail::lock_guard lk(subs_mu_);
        const auto self = std::make_pair(t.id, std::this_thread::get_id());
        const auto it = std::find(running_.begin(), running_.end(), self);
        if (it != running_.end()) running_.erase(it);
      }
      subs_cv_.notify_all();
    }
  } catch (...) {
    // No memory for the copy (or a mutex failed): this change is not delivered to C, and
    // nothing unwinds into the watcher's thread.
    report_current_exception("pnmem_subscribe");
  }
}

void global_state::set_shed_hook(pnmem_free_fn fn, void* user) {
  detail::unique_lock lk(shed_mu_);
  shed_fn_ = fn;
  shed_user_ = user;
  // A call of the previous hook on another thread ends before this returns (the engine may then free
  // what the hook's user pointer points at); the hook setting itself is not waited for.
  while (shed_running_ != std::thread::id() && shed_running_ != std::this_thread::get_id()) shed_cv_.wait(lk.native());
}

std::uint64_t global_state::shed_bytes() {
  const platform_watcher* w = watcher();
  if (w == nullptr || !w->running()) return 0;
  return ledger.shed_bytes(live_watcher{w}, w->options().policy);  // the ledger's mutex
}

void global_state::add_gate(const backpressure_gate* g) {
  detail::lock_guard lk(fleet_mu_);
  gates_.push_back(g);
}

void global_state::remove_gate(const backpressure_gate* g) {
  detail::lock_guard lk(fleet_mu_);
  gates_.erase(std::remove(gates_.begin(), gates_.end(), g), gates_.end());
}

void global_state::set_fleet_load(const fleet_load& own) {
  detail::lock_guard lk(fleet_mu_);
  own_fleet_ = own;
}

std::optional<fleet_load> global_state::fleet() {
  detail::lock_guard lk(fleet_mu_);
  if (!own_fleet_ && gates_.empty()) return std::nullopt;
  fleet_load f = own_fleet_.value_or(fleet_load{});
  for (const backpressure_gate* g : gates_) {  // each gate's three reads under its own lock
    const fleet_load l = gate_load(*g);
    f.queued_requests += l.queued_requests;
    f.running_requests += l.running_requests;
    f.slot_capacity += l.slot_capacity;
  }
  return f;
}

std::uint64_t global_state::call_shed_hook(std::uint64_t want) noexcept {
  pnmem_free_fn fn = nullptr;
  void* user = nullptr;
  {
    detail::lock_guard lk(shed_mu_);
    if (shed_fn_ == nullptr) return 0;
    fn = shed_fn_;
    user = shed_user_;
    shed_running_ = std::this_thread::get_id();
  }
  std::uint64_t freed = 0;
  try {
    freed = fn(want, user);
  } catch (...) {
    report_current_exception("pnmem_set_shed_hook");  // a C++ hook threw: nothing credited
  }
  {
    detail::lock_guard lk(shed_mu_);
    shed_running_ = std::thread::id();
  }
  shed_cv_.notify_all();
  if (freed > 0) counters.count_shed(freed);
  return freed;  // credited by shed_on_every_sample
}

global_state& state() {
  static global_state s;
  return s;
}

}  // namespace pnmem::c_abi
