// integration/c_conversions.cpp - the C ABI's conversions (c_conversions.hpp), and the
// compile-time proof that every constant pnmem_c.h mirrors agrees with the C++ one.
#include "c_conversions.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "pnmem/admission.hpp"
#include "pnmem/config.hpp"
#include "pnmem/engine/explain.hpp"
#include "pnmem/format.hpp"
#include "pnmem/level.hpp"

namespace pnmem::c_abi {

// --- What pnmem_c.h mirrors ------------------------------------------------------
// A C++ enum that gains a value makes its to_string(next value) stop being
// "invalid", and the assert on it fails: the C header needs the value too.

static_assert(PNMEM_MAX_DIES == max_dies);
static_assert(no_die == -1, "pnmem_c.h documents die -1 as 'the tightest measured die' / 'none'");

static_assert(PNMEM_LEVEL_OK == static_cast<int>(mem_level::ok));
static_assert(PNMEM_LEVEL_WATCH == static_cast<int>(mem_level::watch));
static_assert(PNMEM_LEVEL_TIGHT == static_cast<int>(mem_level::tight));
static_assert(PNMEM_LEVEL_CRITICAL == static_cast<int>(mem_level::critical));
static_assert(PNMEM_LEVEL_CRITICAL + 1 == mem_level_count);
static_assert(to_string(static_cast<mem_level>(mem_level_count)) == "invalid");
// level_from_c reads a pnmem_level's bytes as its underlying type.
static_assert(sizeof(pnmem_level) == sizeof(int));

static_assert(PNMEM_ADMITTED == static_cast<int>(admit_status::admitted));
static_assert(PNMEM_CAPPED == static_cast<int>(admit_status::capped));
static_assert(PNMEM_DENIED == static_cast<int>(admit_status::denied));
static_assert(PNMEM_FAIL_OPEN == static_cast<int>(admit_status::fail_open));
static_assert(to_string(static_cast<admit_status>(PNMEM_FAIL_OPEN + 1)) == "invalid");

// pnmem_admit_answer.reason: the strings pnmem_c.h lists, in admit_reason's order.
namespace {
constexpr std::array<std::string_view, 10> documented_reasons = {
    "fits",        "window",         "psi_stall",    "host_reserve", "host_budget",
    "die_vram",    "bad_request",    "prefill_window", "not_watching", "not_sampled"};
constexpr bool reasons_as_documented() noexcept {
  for (std::size_t i = 0; i < documented_reasons.size(); ++i) {
    if (to_string(static_cast<admit_reason>(i)) != documented_reasons[i]) return false;
  }
  return to_string(static_cast<admit_reason>(documented_reasons.size())) == "invalid";
}

// The reason strings answers carry: one copy of documented_reasons per answer_kind, each string its
// own object (a char array, never merged with another), so an answer's reason pointer says both the
// reason and what kind of answer it is (pnmem_explain words each kind its own way) without a field
// that pnmem_admit_answer, an unversioned struct, does not have.
struct reason_row {
  char text[documented_reasons.size()][16];
};
constexpr std::array<reason_row, answer_kinds> make_reason_rows() noexcept {
  std::array<reason_row, answer_kinds> rows{};
  for (reason_row& row : rows) {
    for (std::size_t r = 0; r < documented_reasons.size(); ++r) {
      for (std::size_t i = 0; i < documented_reasons[r].size(); ++i) row.text[r][i] = documented_reasons[r][i];
    }
  }
  return rows;
}
constexpr std::array<reason_row, answer_kinds> reason_rows = make_reason_rows();

// The kind and reason of a pointer pnmem wrote, or false: never read through a pointer that is not one of them.
bool reason_of(const char* p, answer_kind& kind, admit_reason& reason) noexcept {
  for (std::size_t k = 0; k < reason_rows.size(); ++k) {
    for (std::size_t r = 0; r < documented_reasons.size(); ++r) {
      if (p == reason_rows[k].text[r]) {
        kind = static_cast<answer_kind>(k);
        reason = static_cast<admit_reason>(r);
        return true;
      }
    }
  }
  return false;
}
}  // namespace
static_assert(reasons_as_documented());
static_assert(static_cast<int>(answer_kind::host_load) + 1 == answer_kinds);

// pnmem_kv_format: kv_format's values, and its count.
static_assert(PNMEM_KV_Q4 == static_cast<int>(kv_format::q4));
static_assert(PNMEM_KV_FP32 == static_cast<int>(kv_format::fp32));
static_assert(PNMEM_KV_F16 == static_cast<int>(kv_format::f16));
static_assert(PNMEM_KV_BF16 == static_cast<int>(kv_format::bf16));
static_assert(PNMEM_KV_FP8 == static_cast<int>(kv_format::fp8));
static_assert(PNMEM_KV_Q8_0 == static_cast<int>(kv_format::q8_0));
static_assert(PNMEM_KV_Q4_0 == static_cast<int>(kv_format::q4_0));
static_assert(PNMEM_KV_FORMATS == kv_format_count);
static_assert(PNMEM_KV_Q4_0 + 1 == PNMEM_KV_FORMATS);
static_assert(to_string(static_cast<kv_format>(PNMEM_KV_FORMATS)) == "invalid");
static_assert(sizeof(pnmem_kv_format) == sizeof(int));
static_assert(PNMEM_MAX_ACTIVATION_ANCHORS == max_activation_anchors);
static_assert(PNMEM_MAX_KV_WINDOWS == max_kv_windows);
static_assert(PNMEM_MAX_LAYER_GROUPS == max_layer_groups);
static_assert(PNMEM_ENGINE_EXACT == static_cast<int>(kv_engine::exact));
static_assert(PNMEM_ENGINE_VLLM == static_cast<int>(kv_engine::vllm));
static_assert(PNMEM_ENGINE_LLAMA_CPP == static_cast<int>(kv_engine::llama_cpp));
static_assert(PNMEM_LAYERS_FULL == static_cast<int>(layer_kind::full));
static_assert(PNMEM_LAYERS_SLIDING == static_cast<int>(layer_kind::sliding));
static_assert(PNMEM_LAYERS_CHUNKED == static_cast<int>(layer_kind::chunked));
static_assert(PNMEM_LAYERS_CROSS == static_cast<int>(layer_kind::cross));
static_assert(PNMEM_LAYERS_RECURRENT == static_cast<int>(layer_kind::recurrent));

// The structs pnmem_c.h mirrors field by field: a field added to the C++ one breaks the
// structured binding below (its count must match), and the C struct and its
// conversions (cost_to_c, model_from_c, to_c(policy), watcher_options_from_c) need it too.
namespace {
constexpr bool mirrored_field_counts() noexcept {
  [[maybe_unused]] const auto [full, windows, n_windows, block, state, per_item, normal, compact, activation] = model_cost{};
  [[maybe_unused]] const auto [window_bytes, window] = kv_window{};
  [[maybe_unused]] const auto [engine, block_tokens, batched, ubatch, seqs, copies, ssm_fp32, mtp, hybrid_off] =
      engine_rule{};
  [[maybe_unused]] const auto [kind, layers, kv_heads, key_dim, value_dim, k_only, span, conv, ssm, side] = layer_group{};
  [[maybe_unused]] const auto [groups, n_groups, query_heads, hidden, fixed_act, normal_kv, compact_kv, state_f, ssm_f] =
      model_shape{};
  [[maybe_unused]] const auto [anchors, n_anchors, fixed, per_token, per_token_sq] = activation_model{};
  // evict_on_psi and zero_cost are not in pnmem_policy: that struct has no struct_size, so a field added to
  // it would overflow an older caller's; C sets them with PN_EVICT_ON_PSI (read through the plan it changes)
  // and PN_ZERO_COST or pnmem_model's zero_cost.
  [[maybe_unused]] const auto [reserve_min, reserve_bp, psi_full, psi_some, psi_window, die_reserve, tight_div,
                               watch_div, scratch, spike, ladder_off, evict_on_psi, zero_cost] = policy{};
  [[maybe_unused]] const auto [poll, pressure_poll, dwell, pol] = seed_watcher_options;
  [[maybe_unused]] const auto [tokens, peak] = activation_anchor{};
  [[maybe_unused]] const auto [weights, kv] = model_load_spec{};  // pnmem_model_load (with its die)
  [[maybe_unused]] const auto [format, bytes] = kv_allocation{};  // pnmem_kv_allocation
  return true;
}
}  // namespace
static_assert(mirrored_field_counts());
// The C default intervals fit the C fields (uint32_t milliseconds): the seed's, and whatever the
// PN_* variables may set (config.hpp bounds them).
static_assert(seed_watcher_options.poll_interval.count() > 0 &&
              seed_watcher_options.poll_interval.count() <= std::numeric_limits<std::uint32_t>::max());
static_assert(seed_watcher_options.pressure_poll_interval.count() > 0 &&
              seed_watcher_options.pressure_poll_interval.count() <= std::numeric_limits<std::uint32_t>::max());
static_assert(seed_watcher_options.step_down_dwell.count() >= 0 &&
              seed_watcher_options.step_down_dwell.count() <= std::numeric_limits<std::uint32_t>::max());
static_assert(max_poll_interval_ms <= std::numeric_limits<std::uint32_t>::max() &&
              max_step_down_dwell_ms <= std::numeric_limits<std::uint32_t>::max());

// The snapshot's provenance: PNMEM_SOURCE_* are pnmem::host_source's bits, every one of them, and
// the modes and the cgroup path's capacity are provenance.hpp's.
static_assert(PNMEM_SOURCE_MEMINFO == static_cast<std::uint32_t>(host_source::meminfo));
static_assert(PNMEM_SOURCE_PSI == static_cast<std::uint32_t>(host_source::psi));
static_assert(PNMEM_SOURCE_CGROUP_USAGE == static_cast<std::uint32_t>(host_source::cgroup_usage));
static_assert(PNMEM_SOURCE_CGROUP_LIMIT == static_cast<std::uint32_t>(host_source::cgroup_limit));
static_assert(PNMEM_SOURCE_CGROUP_STAT == static_cast<std::uint32_t>(host_source::cgroup_stat));
static_assert(PNMEM_SOURCE_CGROUP_PRESSURE == static_cast<std::uint32_t>(host_source::cgroup_pressure));
static_assert(PNMEM_SOURCE_MACOS_VM == static_cast<std::uint32_t>(host_source::macos_vm));
static_assert(PNMEM_SOURCE_MACOS_PRESSURE == static_cast<std::uint32_t>(host_source::macos_pressure));
static_assert(PNMEM_SOURCES == host_source_count);
static_assert(to_string(static_cast<host_source>(1U << PNMEM_SOURCES)) == "invalid");
static_assert(PNMEM_CGROUP_NONE == static_cast<int>(cgroup_mode::none));
static_assert(PNMEM_CGROUP_V1 == static_cast<int>(cgroup_mode::v1));
static_assert(PNMEM_CGROUP_V2 == static_cast<int>(cgroup_mode::v2));
static_assert(PNMEM_PSI_NONE == static_cast<int>(psi_mode::none));
static_assert(PNMEM_PSI_POLL == static_cast<int>(psi_mode::poll));
static_assert(PNMEM_PSI_TRIGGER == static_cast<int>(psi_mode::trigger));
static_assert(sizeof(pnmem_cgroup_mode) == sizeof(int) && sizeof(pnmem_psi_mode) == sizeof(int));
static_assert(PNMEM_CGROUP_PATH_MAX == cgroup_path_capacity);
static_assert(sizeof(pnmem_snapshot::limit_cgroup) == sizeof(sample_provenance::limit_cgroup));
namespace {
// A field added to sample_provenance breaks this binding: pnmem_snapshot and snapshot_to_c need it too.
constexpr bool provenance_field_count() noexcept {
  [[maybe_unused]] const auto [read, failed, cgroup, psi, total, avail, limit, working_set, path] = sample_provenance{};
  return true;
}
}  // namespace
static_assert(provenance_field_count());

// pnmem_gate_status is not numbered as gate_status (no cancelled; an ERROR value):
// to_c(gate_status) maps each one by name, and a new gate_status must be added there.
static_assert(to_string(gate_status::queue_full) == "queue_full");
static_assert(to_string(static_cast<gate_status>(static_cast<int>(gate_status::queue_full) + 1)) == "invalid");

// --- C++ -> C ------------------------------------------------------------------
namespace {

// The per-die arrays: the C array's length is PNMEM_MAX_DIES, the C++ one's max_dies.
template <std::size_t N, std::size_t M>
void copy_dies(std::uint64_t (&to)[N], const std::array<std::uint64_t, M>& from) noexcept {
  static_assert(N == M, "PNMEM_MAX_DIES and pnmem::max_dies disagree");
  std::copy(from.begin(), from.end(), to);
}

}  // namespace

pnmem_level to_c(mem_level l) noexcept { return static_cast<pnmem_level>(static_cast<int>(l)); }

pnmem_admit_status to_c(admit_status s) noexcept { return static_cast<pnmem_admit_status>(static_cast<int>(s)); }

pnmem_gate_status to_c(gate_status s) noexcept {
  switch (s) {
    case gate_status::acquired: return PNMEM_GATE_ACQUIRED;
    case gate_status::overloaded: return PNMEM_GATE_OVERLOADED;
    case gate_status::timed_out: return PNMEM_GATE_TIMED_OUT;
    case gate_status::queue_full: return PNMEM_GATE_QUEUE_FULL;
    case gate_status::cancelled: return PNMEM_GATE_TIMED_OUT;  // no stop token from C
  }
  return PNMEM_GATE_ERROR;
}

pnmem_state to_c(const mem_state& m) noexcept {
  pnmem_state out{};
  for_each_host_number([&](std::string_view, auto field) { field(out) = field(m); });
  out.n_dies = die_count(m);
  copy_dies(out.per_die_free, m.per_die_free_bytes);
  copy_dies(out.per_die_budget, m.per_die_budget_bytes);
  copy_dies(out.per_die_used, m.per_die_used_bytes);
  copy_dies(out.per_die_retiring, m.per_die_retiring_bytes);
  out.level = to_c(m.level);
  out.raw_level = to_c(m.raw_level);
  out.seq = m.seq;
  out.sample_time_ns = m.sample_time_ns;
  return out;
}

pnmem_cgroup_mode to_c(cgroup_mode m) noexcept { return static_cast<pnmem_cgroup_mode>(static_cast<int>(m)); }

pnmem_psi_mode to_c(psi_mode m) noexcept { return static_cast<pnmem_psi_mode>(static_cast<int>(m)); }

pnmem_snapshot snapshot_to_c(const mem_state& m, const policy& pol) noexcept {
  pnmem_snapshot out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_snapshot));
  out.state = to_c(m);
  const sample_provenance& p = m.provenance;
  out.sources_read = p.sources_read;
  out.sources_failed = p.sources_failed;
  out.cgroup_mode = to_c(p.cgroup);
  out.psi_mode = to_c(p.psi);
  out.meminfo_total_bytes = p.meminfo_total_bytes;
  out.meminfo_avail_bytes = p.meminfo_avail_bytes;
  out.cgroup_limit_bytes = p.cgroup_limit_bytes;
  out.cgroup_working_set_bytes = p.cgroup_working_set_bytes;
  // Through limit_cgroup_path(): NUL-terminated even if the C++ array were full.
  const std::string_view path = p.limit_cgroup_path();
  const std::size_t n = std::min(path.size(), sizeof out.limit_cgroup - 1);
  std::memcpy(out.limit_cgroup, path.data(), n);
  out.limit_cgroup[n] = '\0';
  const level_report r = explain_level(m, pol);
  out.host_level = to_c(r.host_level);
  out.psi_level = to_c(r.psi_level);
  out.die_level = to_c(r.worst_die_level);
  out.os_level = to_c(r.os_level);
  out.memory_level = to_c(memory_level(r));
  return out;
}

pnmem_admit_answer to_c(const admit_answer& a, std::uint64_t pending_bytes) noexcept {
  pnmem_admit_answer out{};
  out.status = to_c(a.status);
  out.fit_tokens = a.fit_tokens;
  // From this file's table (the same strings as to_string, asserted above), so pnmem_explain
  // can tell a reason pnmem wrote, and the answer's kind, by its address without reading a caller's pointer.
  const auto r = static_cast<std::size_t>(a.reason);
  const auto k = static_cast<std::size_t>(a.kind);
  out.reason = r < documented_reasons.size() && k < reason_rows.size() ? reason_rows[k].text[r] : "invalid";
  out.level = to_c(a.level);
  out.die = a.die;
  out.window = a.window;
  out.need_bytes = a.detail.need_bytes;
  out.limit_bytes = a.detail.limit_bytes;
  out.pending_bytes = pending_bytes;
  return out;
}

pnmem_ladder_plan to_c(const ladder_plan& p) noexcept {
  pnmem_ladder_plan out{};
  out.level = to_c(p.level);
  out.max_slots = p.max_slots;
  out.force_kv_q4 = p.force_kv_q4;
  out.kv_evict = p.kv_evict;
  out.prefill_window = p.prefill_window;
  out.degraded = p.degraded;
  out.note = p.note;
  return out;
}

pnmem_kv_format to_c(kv_format f) noexcept { return static_cast<pnmem_kv_format>(static_cast<int>(f)); }

pnmem_zero_cost to_c(zero_cost_rule r) noexcept {
  switch (r) {
    case zero_cost_rule::hold: return PNMEM_ZERO_COST_HOLD;
    case zero_cost_rule::admit: return PNMEM_ZERO_COST_ADMIT;
    case zero_cost_rule::reject: return PNMEM_ZERO_COST_REJECT;
  }
  return PNMEM_ZERO_COST_POLICY;
}

pnmem_admit_answer to_c(const admit_result& r, answer_kind kind, mem_level level) noexcept {
  return to_c(answer_from(r, kind, level), 0);
}

pnmem_kv_allocation to_c(const kv_allocation& a) noexcept {
  pnmem_kv_allocation out{};
  out.format = to_c(a.format);
  out.bytes = a.bytes;
  return out;
}

pnmem_policy to_c(const policy& p, const mem_state& s) noexcept {
  pnmem_policy out{};
  out.host_reserve_min_bytes = p.host_reserve_min_bytes;
  out.host_reserve_bp = p.host_reserve_bp;
  out.psi_full_reject_bp = p.psi_full_reject_bp;
  out.psi_some_tight_bp = p.psi_some_tight_bp;
  out.psi_full_window_ms = p.psi_full_window_ms;
  out.die_tight_divisor = p.die_tight_divisor;
  out.die_watch_divisor = p.die_watch_divisor;
  out.die_reserve_bytes = p.die_reserve_bytes;
  out.die_scratch_bytes = p.die_scratch_bytes;
  out.load_spike_bytes = p.load_spike_bytes;
  out.ladder_disabled = p.ladder_disabled;
  out.host_total_bytes = s.host_total_bytes;
  out.host_reserve_bytes = host_reserve_bytes(s, p);
  return out;
}

pnmem_budget budget_to_c(const mem_state& s, const policy& p, std::uint64_t pending_bytes) noexcept {
  pnmem_budget out{};
  out.total_bytes = s.host_total_bytes;
  out.avail_bytes = s.host_avail_bytes;
  out.reserve_bytes = host_reserve_bytes(s, p);
  out.headroom_bytes = s.host_total_bytes == 0 ? 0 : detail::sat_sub(s.host_avail_bytes, out.reserve_bytes);
  out.pending_bytes = pending_bytes;
  out.unpromised_bytes = detail::sat_sub(out.headroom_bytes, pending_bytes);
  out.level = to_c(s.level);
  out.seq = s.seq;
  return out;
}

pnmem_room to_c(const host_room& r, std::uint64_t seq) noexcept {
  pnmem_room out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof out);
  if (!r.sampled) return out;
  out.sampled = 1;
  out.level = to_c(r.level);
  out.avail_bytes = r.avail_bytes;
  out.reserve_bytes = r.reserve_bytes;
  out.pending_bytes = r.pending_bytes;
  out.credited_bytes = r.credited_bytes;
  for (std::size_t i = 0; i < host_room::levels; ++i) {
    out.take_bytes[i] = r.take[i];
    out.free_bytes[i] = r.give_back[i];
  }
  out.seq = seq;
  return out;
}

pnmem_level_change to_c(const level_change& c, pnmem_state& state_out) noexcept {
  state_out = to_c(c.state);
  pnmem_level_change out{};
  out.from = to_c(c.from);
  out.to = to_c(c.to);
  out.seq = c.state.seq;
  out.sample_time_ns = c.state.sample_time_ns;
  out.state = &state_out;
  return out;
}

void cost_to_c(const model_cost& m, pnmem_model& out) noexcept {
  std::copy(m.full_kv_bytes_per_token.begin(), m.full_kv_bytes_per_token.end(), out.full_kv_bytes_per_token);
  // The first window is the version-1 fields' sliding term, the others more_windows.
  const std::size_t windows = m.n_windows < max_kv_windows ? m.n_windows : max_kv_windows;
  const kv_window none{};
  const kv_window& first = windows > 0 ? m.windows[0] : none;
  std::copy(first.bytes_per_token.begin(), first.bytes_per_token.end(), out.sliding_kv_bytes_per_token);
  out.sliding_window = first.window;
  out.n_more_windows = static_cast<std::uint32_t>(windows > 0 ? windows - 1 : 0);
  for (std::size_t i = 0; i + 1 < max_kv_windows; ++i) {
    const kv_window& w = i + 1 < windows ? m.windows[i + 1] : none;
    out.more_windows[i].window = w.window;
    std::copy(w.bytes_per_token.begin(), w.bytes_per_token.end(), out.more_windows[i].bytes_per_token);
  }
  std::copy(m.kv_bytes_per_encoder_item.begin(), m.kv_bytes_per_encoder_item.end(), out.kv_bytes_per_encoder_item);
  out.kv_block_tokens = m.kv_block_tokens;
  out.state_bytes_per_seq = m.state_bytes_per_seq;
  out.normal_kv = to_c(m.normal_kv);
  out.compact_kv = to_c(m.compact_kv);
  out.n_anchors = m.activation.n_anchors;
  for (std::size_t i = 0; i < max_activation_anchors; ++i) {
    out.anchors[i].tokens = m.activation.anchors[i].tokens;
    out.anchors[i].peak_bytes = m.activation.anchors[i].peak_bytes;
  }
  out.activation_fixed_bytes = m.activation.fixed_bytes;
  out.activation_per_token_bytes = m.activation.per_token_bytes;
  out.activation_per_token_sq_bytes = m.activation.per_token_sq_bytes;
}

// --- Versioned structs -------------------------------------------------------------

pnmem_model default_model() noexcept {
  const model_desc d{};  // the C++ defaults: the model's own KV format, host path, no window, tightest die,
                         // 1 slot, the seed's model
  pnmem_model out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_model));
  if (d.kv) {
    out.kv = to_c(*d.kv);
  } else {
    // PNMEM_KV_UNSET: the model's normal_kv (see unset_model for why the bytes are copied).
    const int unset = kv_unset_raw;
    static_assert(sizeof out.kv == sizeof unset);
    std::memcpy(&out.kv, &unset, sizeof unset);
  }
  out.gpu_resident = d.gpu_resident ? 1 : 0;
  out.max_window = d.max_window;
  out.die = d.die;
  out.max_slots = d.max_slots;
  out.zero_cost = d.zero_cost ? to_c(*d.zero_cost) : PNMEM_ZERO_COST_POLICY;
  cost_to_c(d.cost, out);
  return out;
}

pnmem_model unset_model() noexcept {
  pnmem_model out = default_model();
  cost_to_c(preallocated_model_cost, out);
  // PNMEM_KV_UNSET is C's (pnmem_kv_format)-1; in C++ that value is outside the enum's range, so the
  // field gets the int's bytes, as a C caller's store would leave them.
  const int unset = kv_unset_raw;
  static_assert(sizeof out.normal_kv == sizeof unset);
  std::memcpy(&out.normal_kv, &unset, sizeof unset);
  return out;
}

pnmem_model preallocated_model() noexcept {
  pnmem_model out = default_model();
  cost_to_c(preallocated_model_cost, out);
  return out;
}

pnmem_model_load default_model_load() noexcept {
  const model_load_spec d{};
  pnmem_model_load out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_model_load));
  out.weights_bytes = d.weights_bytes;
  out.kv_bytes = d.kv_max_ctx_bytes;
  out.die = no_die;
  return out;
}

pnmem_engine_rule default_engine_rule() noexcept {
  const engine_rule d{};
  pnmem_engine_rule out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_engine_rule));
  out.engine = static_cast<pnmem_engine>(d.engine);
  out.block_tokens = d.block_tokens;
  out.max_batched_tokens = d.max_batched_tokens;
  out.ubatch_tokens = d.ubatch_tokens;
  out.seqs = d.seqs;
  out.state_copies = d.state_copies;
  out.ssm_state_fp32 = d.ssm_state_fp32 ? 1 : 0;
  out.mtp = d.mtp ? 1 : 0;
  out.hybrid_manager_off = d.hybrid_manager_off ? 1 : 0;
  return out;
}

void shape_to_c(const model_shape& s, pnmem_model_shape& out) noexcept {
  out.n_groups = s.n_groups;
  for (std::size_t i = 0; i < max_layer_groups; ++i) {
    const layer_group& g = s.groups[i];
    pnmem_layer_group& c = out.groups[i];
    c.kind = static_cast<pnmem_layer_kind>(g.kind);
    c.layers = g.layers;
    c.kv_heads = g.kv_heads;
    c.key_dim = g.key_dim;
    c.value_dim = g.value_dim;
    c.k_only = g.k_only ? 1 : 0;
    out.side_bytes[i] = g.side_bytes;
    c.span = g.span;
    c.conv_state_values = g.conv_state_values;
    c.ssm_state_values = g.ssm_state_values;
  }
  out.query_heads = s.query_heads;
  out.hidden_size = s.hidden_size;
  out.fixed_activation_bytes = s.fixed_activation_bytes;
  out.normal_kv = to_c(s.normal_kv);
  out.compact_kv = to_c(s.compact_kv);
  out.state_format = to_c(s.state_format);
  out.ssm_state_format = to_c(s.ssm_state_format);
}

pnmem_model_shape default_model_shape() noexcept {
  pnmem_model_shape out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_model_shape));
  shape_to_c(model_shape{}, out);
  return out;
}

pnmem_request default_request() noexcept {
  pnmem_request out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_request));
  return out;
}

pnmem_watcher_options default_watcher_options() {
  // The environment's, read without reporting: the state logs its errors through the sink.
  const watcher_options d = to_watcher_options(process_env_config().value);
  pnmem_watcher_options out{};
  out.struct_size = static_cast<std::uint32_t>(sizeof(pnmem_watcher_options));
  out.poll_interval_ms = static_cast<std::uint32_t>(d.poll_interval.count());
  out.pressure_poll_interval_ms = static_cast<std::uint32_t>(d.pressure_poll_interval.count());
  out.step_down_dwell_ms = static_cast<std::uint32_t>(d.step_down_dwell.count());
  return out;
}

std::string struct_size_problem(std::uint32_t struct_size, std::size_t size_v1, const char* what, const char* init) {
  if (struct_size == 0) return std::string(what) + "->struct_size is 0: initialise it with " + init;
  if (struct_size < size_v1) {
    return std::string(what) + "->struct_size is " + std::to_string(struct_size) + ", smaller than the first version's " +
           std::to_string(size_v1) + ": initialise it with " + init;
  }
  return {};
}

namespace {
template <class T>
T read_versioned(const T& in, T defaults) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(&defaults, &in, std::min<std::size_t>(in.struct_size, sizeof(T)));
  return defaults;
}

// A C enum's value as the int the caller stored (never loaded as the C++ enum type).
template <class E>
int raw_int(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &e, sizeof raw);
  return raw;
}

// A valid pnmem_zero_cost as the model's own rule; PNMEM_ZERO_COST_POLICY: none (the policy's).
std::optional<zero_cost_rule> zero_cost_from_c(int raw) noexcept {
  switch (raw) {
    case PNMEM_ZERO_COST_HOLD: return zero_cost_rule::hold;
    case PNMEM_ZERO_COST_ADMIT: return zero_cost_rule::admit;
    case PNMEM_ZERO_COST_REJECT: return zero_cost_rule::reject;
    default: return std::nullopt;
  }
}

std::string not_a_format(const char* field, const pnmem_kv_format& f) {
  return std::string("model->") + field + " is " + std::to_string(raw_int(f)) + ": not a pnmem_kv_format (0 to " +
         std::to_string(PNMEM_KV_FORMATS - 1) + ")";
}
}  // namespace

pnmem_model read_model(const pnmem_model& in) noexcept { return read_versioned(in, default_model()); }

pnmem_watcher_options read_watcher_options(const pnmem_watcher_options& in) {
  return read_versioned(in, default_watcher_options());
}

pnmem_model_load read_model_load(const pnmem_model_load& in) noexcept { return read_versioned(in, default_model_load()); }

// --- C -> C++ --------------------------------------------------------------------

std::optional<mem_level> level_from_c(const pnmem_level& l) noexcept {
  // The bytes, not the enum: C passes any int as a pnmem_level, and in C++ loading
  // an enum object that holds a value outside its enumerators' range is undefined
  // (UBSan's -fsanitize=enum reports it). Hence also the reference parameter.
  std::underlying_type_t<pnmem_level> raw{};
  std::memcpy(&raw, &l, sizeof raw);
  if (!std::in_range<int>(raw)) return std::nullopt;
  const int v = static_cast<int>(raw);
  if (v < PNMEM_LEVEL_OK || v > PNMEM_LEVEL_CRITICAL) return std::nullopt;
  return static_cast<mem_level>(v);
}

std::optional<kv_format> kv_format_from_c(const pnmem_kv_format& f) noexcept {
  const int v = raw_int(f);
  if (v < 0 || v >= PNMEM_KV_FORMATS) return std::nullopt;
  return static_cast<kv_format>(v);
}

std::optional<model_desc> model_from_c(const pnmem_model& in, std::string& why) {
  why = struct_size_problem(in.struct_size, model_size_v1, "model", "pnmem_model_init");
  if (!why.empty()) return std::nullopt;
  const pnmem_model c = read_model(in);

  model_desc m;
  const std::optional<kv_format> kv = kv_format_from_c(c.kv);
  const std::optional<kv_format> normal = kv_format_from_c(c.normal_kv);
  const std::optional<kv_format> compact = kv_format_from_c(c.compact_kv);
  if (raw_int(c.normal_kv) == kv_unset_raw) {
    why = "model->normal_kv is PNMEM_KV_UNSET: the model's cost was never set (pnmem_model_init leaves it to "
          "the engine): fill it with pnmem_model_cost_from_json, _from_hf_config or _from_shape, or set the "
          "cost fields and normal_kv, or start from pnmem_model_init_reference (the seed's model) or "
          "pnmem_model_init_preallocated";
  } else if (!kv && raw_int(c.kv) != kv_unset_raw) {
    why = not_a_format("kv", c.kv) + " or PNMEM_KV_UNSET (the model's normal_kv)";
  } else if (!normal) why = not_a_format("normal_kv", c.normal_kv);
  else if (!compact) why = not_a_format("compact_kv", c.compact_kv);
  else if (c.die < no_die || c.die >= max_dies) {
    why = "model->die is " + std::to_string(c.die) + ": outside [-1, " + std::to_string(PNMEM_MAX_DIES) + ")";
  } else if (c.n_anchors > max_activation_anchors) {
    why = "model->n_anchors is " + std::to_string(c.n_anchors) + ": at most " + std::to_string(max_activation_anchors) +
          " (PNMEM_MAX_ACTIVATION_ANCHORS)";
  }
  for (std::uint32_t i = 1; why.empty() && i < c.n_anchors; ++i) {
    const pnmem_activation_anchor& a = c.anchors[i - 1];
    const pnmem_activation_anchor& b = c.anchors[i];
    const std::string at = "model->anchors[" + std::to_string(i) + "]";
    const std::string before = "anchors[" + std::to_string(i - 1) + "]";
    if (b.tokens <= a.tokens) {
      why = at + ".tokens is " + std::to_string(b.tokens) + ": not above " + before + ".tokens (" +
            std::to_string(a.tokens) + "): tokens must increase";
    } else if (b.peak_bytes < a.peak_bytes) {
      why = at + ".peak_bytes is " + std::to_string(b.peak_bytes) + ": below " + before + ".peak_bytes (" +
            std::to_string(a.peak_bytes) + "): peaks must not decrease";
    }
  }
  if (why.empty() && c.n_more_windows > max_kv_windows - 1) {
    why = "model->n_more_windows is " + std::to_string(c.n_more_windows) + ": at most " +
          std::to_string(max_kv_windows - 1) + " (PNMEM_MAX_KV_WINDOWS - 1)";
  }
  for (std::uint32_t i = 0; why.empty() && i < c.n_more_windows; ++i) {
    const std::uint64_t w = c.more_windows[i].window;
    const std::uint64_t before = i == 0 ? c.sliding_window : c.more_windows[i - 1].window;
    const std::string at = "model->more_windows[" + std::to_string(i) + "].window is " + std::to_string(w);
    if (w == 0) {
      why = at + ": a window keeps at least one token (layers that keep every token are full_kv_bytes_per_token)";
    } else if (w <= before) {
      why = at + ": not above " + (i == 0 ? std::string("sliding_window") : "more_windows[" + std::to_string(i - 1) + "].window") +
            " (" + std::to_string(before) + "): windows must increase";
    }
  }
  if (why.empty() && c.n_anchors > 0 &&
      (c.activation_fixed_bytes != 0 || c.activation_per_token_bytes != 0 || c.activation_per_token_sq_bytes != 0)) {
    why = "model->activation_fixed_bytes, activation_per_token_bytes, activation_per_token_sq_bytes: not 0 with "
          "n_anchors " + std::to_string(c.n_anchors) + ": the activation is an anchor table or coefficients, not both";
  }
  const int zero_cost = raw_int(c.zero_cost);
  if (why.empty() && (zero_cost < PNMEM_ZERO_COST_POLICY || zero_cost > PNMEM_ZERO_COST_REJECT)) {
    why = "model->zero_cost is " + std::to_string(zero_cost) + ": not a pnmem_zero_cost (PNMEM_ZERO_COST_POLICY, " +
          "_HOLD, _ADMIT or _REJECT: 0 to 3)";
  }
  if (!why.empty()) return std::nullopt;

  m.kv = kv;  // unset: the model's normal_kv
  m.zero_cost = zero_cost_from_c(zero_cost);
  m.gpu_resident = c.gpu_resident != 0;
  m.max_window = c.max_window;
  m.die = c.die;
  m.max_slots = c.max_slots;
  model_cost& cost = m.cost;
  std::copy(std::begin(c.full_kv_bytes_per_token), std::end(c.full_kv_bytes_per_token), cost.full_kv_bytes_per_token.begin());
  // sliding_window 0: the sliding layers grow as full ones (version 1's rule).
  std::array<std::uint64_t, kv_format_count> sliding{};
  std::copy(std::begin(c.sliding_kv_bytes_per_token), std::end(c.sliding_kv_bytes_per_token), sliding.begin());
  add_kv_term(cost, sliding, c.sliding_window);
  for (std::uint32_t i = 0; i < c.n_more_windows; ++i) {
    kv_window& w = cost.windows[cost.n_windows++];
    w.window = c.more_windows[i].window;
    std::copy(std::begin(c.more_windows[i].bytes_per_token), std::end(c.more_windows[i].bytes_per_token),
              w.bytes_per_token.begin());
  }
  std::copy(std::begin(c.kv_bytes_per_encoder_item), std::end(c.kv_bytes_per_encoder_item),
            cost.kv_bytes_per_encoder_item.begin());
  cost.kv_block_tokens = c.kv_block_tokens;
  cost.state_bytes_per_seq = c.state_bytes_per_seq;
  cost.normal_kv = *normal;
  cost.compact_kv = *compact;
  cost.activation = activation_model{};
  cost.activation.n_anchors = c.n_anchors;
  for (std::size_t i = 0; i < max_activation_anchors; ++i) {
    // Anchors past n_anchors are not read by the model (kept as given, so a round trip is exact).
    cost.activation.anchors[i] = activation_anchor{c.anchors[i].tokens, c.anchors[i].peak_bytes};
  }
  cost.activation.fixed_bytes = c.activation_fixed_bytes;
  cost.activation.per_token_bytes = c.activation_per_token_bytes;
  cost.activation.per_token_sq_bytes = c.activation_per_token_sq_bytes;
  // The checks above are pnmem::validate's, naming the C field; this one catches a rule
  // validate gains that the C side has not spelled out yet.
  if (const std::string_view v = validate(cost); !v.empty()) {
    why = "model: " + std::string(v);
    return std::nullopt;
  }
  return m;
}

std::optional<model_load_request> model_load_from_c(const pnmem_model_load& in, std::string& why) {
  why = struct_size_problem(in.struct_size, model_load_size_v1, "load", "pnmem_model_load_init");
  if (!why.empty()) return std::nullopt;
  const pnmem_model_load c = read_model_load(in);
  if (c.die < no_die || c.die >= max_dies) {
    why = "load->die is " + std::to_string(c.die) + ": outside [-1, " + std::to_string(PNMEM_MAX_DIES) + ")";
    return std::nullopt;
  }
  model_load_request r;
  r.spec.weights_bytes = c.weights_bytes;
  r.spec.kv_max_ctx_bytes = c.kv_bytes;
  r.die = c.die;
  return r;
}

std::optional<engine_rule> engine_rule_from_c(const pnmem_engine_rule& in, std::string& why) {
  why = struct_size_problem(in.struct_size, engine_rule_size_v1, "engine", "pnmem_engine_rule_init");
  if (!why.empty()) return std::nullopt;
  const pnmem_engine_rule c = read_versioned(in, default_engine_rule());
  const int e = raw_int(c.engine);
  if (e < PNMEM_ENGINE_EXACT || e > PNMEM_ENGINE_LLAMA_CPP) {
    why = "engine->engine is " + std::to_string(e) + ": not a pnmem_engine (0 to 2)";
    return std::nullopt;
  }
  engine_rule r;
  r.engine = static_cast<kv_engine>(e);
  r.block_tokens = c.block_tokens;
  r.max_batched_tokens = c.max_batched_tokens;
  r.ubatch_tokens = c.ubatch_tokens;
  r.seqs = c.seqs;
  r.state_copies = c.state_copies;
  r.ssm_state_fp32 = c.ssm_state_fp32 != 0;
  r.mtp = c.mtp != 0;
  r.hybrid_manager_off = c.hybrid_manager_off != 0;
  if (const std::string_view v = validate(r); !v.empty()) {
    why = "engine: " + std::string(v);
    return std::nullopt;
  }
  return r;
}

std::optional<model_shape> model_shape_from_c(const pnmem_model_shape& in, std::string& why) {
  why = struct_size_problem(in.struct_size, model_shape_size_v1, "shape", "pnmem_model_shape_init");
  if (!why.empty()) return std::nullopt;
  const pnmem_model_shape c = read_versioned(in, default_model_shape());
  if (c.n_groups > max_layer_groups) {
    why = "shape->n_groups is " + std::to_string(c.n_groups) + ": at most " + std::to_string(max_layer_groups) +
          " (PNMEM_MAX_LAYER_GROUPS)";
    return std::nullopt;
  }
  model_shape s;
  for (std::uint32_t i = 0; i < c.n_groups; ++i) {
    const pnmem_layer_group& g = c.groups[i];
    const int kind = raw_int(g.kind);
    if (kind < PNMEM_LAYERS_FULL || kind > PNMEM_LAYERS_RECURRENT) {
      why = "shape->groups[" + std::to_string(i) + "].kind is " + std::to_string(kind) + ": not a pnmem_layer_kind (0 to 4)";
      return std::nullopt;
    }
    layer_group x;
    x.kind = static_cast<layer_kind>(kind);
    x.layers = g.layers;
    x.kv_heads = g.kv_heads;
    x.key_dim = g.key_dim;
    x.value_dim = g.value_dim;
    x.k_only = g.k_only != 0;
    x.side_bytes = c.side_bytes[i];
    x.span = g.span;
    x.conv_state_values = g.conv_state_values;
    x.ssm_state_values = g.ssm_state_values;
    s.add(x);
  }
  s.query_heads = c.query_heads;
  s.hidden_size = c.hidden_size;
  s.fixed_activation_bytes = c.fixed_activation_bytes;
  const std::pair<const char*, const pnmem_kv_format*> formats[] = {{"normal_kv", &c.normal_kv},
                                                                     {"compact_kv", &c.compact_kv},
                                                                     {"state_format", &c.state_format},
                                                                     {"ssm_state_format", &c.ssm_state_format}};
  for (const auto& [name, f] : formats) {
    if (!kv_format_from_c(*f)) {
      why = std::string("shape->") + name + " is " + std::to_string(raw_int(*f)) + ": not a pnmem_kv_format (0 to " +
            std::to_string(PNMEM_KV_FORMATS - 1) + ")";
      return std::nullopt;
    }
  }
  s.normal_kv = *kv_format_from_c(c.normal_kv);
  s.compact_kv = *kv_format_from_c(c.compact_kv);
  s.state_format = *kv_format_from_c(c.state_format);
  s.ssm_state_format = *kv_format_from_c(c.ssm_state_format);
  if (const std::string_view v = validate(s); !v.empty()) {
    why = "shape: " + std::string(v);
    return std::nullopt;
  }
  return s;
}

std::optional<pnmem_request> request_from_c(const pnmem_request& in, std::string& why) {
  why = struct_size_problem(in.struct_size, request_size_v1, "request", "pnmem_request_init");
  if (!why.empty()) return std::nullopt;
  return read_versioned(in, default_request());
}

bool flag_from_c(const bool& b) noexcept {
  unsigned char raw = 0;
  static_assert(sizeof b == sizeof raw);
  std::memcpy(&raw, &b, sizeof raw);
  return raw != 0;
}

std::optional<watcher_options> watcher_options_from_c(const pnmem_watcher_options& in, std::string& why) {
  why = struct_size_problem(in.struct_size, watcher_options_size_v1, "options", "pnmem_watcher_options_init");
  if (!why.empty()) return std::nullopt;
  const pnmem_watcher_options c = read_watcher_options(in);
  if (c.poll_interval_ms == 0) why = "options->poll_interval_ms is 0: at least 1";
  else if (c.pressure_poll_interval_ms == 0) why = "options->pressure_poll_interval_ms is 0: at least 1";
  if (!why.empty()) return std::nullopt;
  watcher_options o = seed_watcher_options;  // every field set below, the policy by the state
  o.poll_interval = std::chrono::milliseconds{c.poll_interval_ms};
  o.pressure_poll_interval = std::chrono::milliseconds{c.pressure_poll_interval_ms};
  o.step_down_dwell = std::chrono::milliseconds{c.step_down_dwell_ms};
  return o;
}

std::optional<std::string> watcher_ledger_from_c(const pnmem_watcher_options& in, std::string& why) {
  const pnmem_watcher_options c = read_watcher_options(in);  // a caller before 0.3: NULL, the environment's
  if (c.ledger == nullptr) return std::nullopt;
  const std::size_t n = strnlen(c.ledger, max_root_bytes + 1);
  if (n > max_root_bytes) {
    why = "options->ledger is longer than " + std::to_string(max_root_bytes) + " bytes";
    return std::string();
  }
  return std::string(c.ledger, n);
}

std::optional<std::string> watcher_root_from_c(const pnmem_watcher_options& in, std::string& why) {
  const pnmem_watcher_options c = read_watcher_options(in);  // a first-version caller's root is the default
  if (c.root == nullptr) return std::string("/");
  const std::size_t n = strnlen(c.root, max_root_bytes + 1);
  if (n == 0) {
    why = "options->root is empty: NULL or \"/\" for the real /proc and /sys";
    return std::nullopt;
  }
  if (n > max_root_bytes) {
    why = "options->root is longer than " + std::to_string(max_root_bytes) + " bytes";
    return std::nullopt;
  }
  return std::string(c.root, n);
}

std::chrono::nanoseconds ttl_from_c(std::int64_t ttl_ms) noexcept {
  if (ttl_ms <= 0) return std::chrono::nanoseconds{0};
  constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max() / 1'000'000;
  if (ttl_ms > max_ms) return std::chrono::nanoseconds{std::numeric_limits<std::int64_t>::max()};
  return std::chrono::milliseconds{ttl_ms};
}

std::chrono::milliseconds gate_timeout_from_c(std::int64_t timeout_ms) noexcept {
  if (timeout_ms < 0) return std::chrono::milliseconds{0};
  if (timeout_ms > max_gate_wait.count()) return max_gate_wait;
  return std::chrono::milliseconds{timeout_ms};
}

pnmem_ladder_plan error_plan(int max_slots, int prefill_window, bool kv_q4) noexcept {
  pnmem_ladder_plan out = to_c(ladder_plan_for(mem_level::ok, ladder_config{max_slots, prefill_window, kv_q4}));
  out.note = "error: operator config";
  return out;
}

namespace {
const char* status_name(const pnmem_admit_status& s) noexcept {
  switch (raw_int(s)) {
    case PNMEM_ADMITTED: return "admitted";
    case PNMEM_CAPPED: return "capped";
    case PNMEM_DENIED: return "denied";
    case PNMEM_FAIL_OPEN: return "fail_open";
    default: return "invalid";
  }
}

// A reason pnmem wrote (one of reason_rows' addresses), never read through a pointer that is not one of them.
const char* reason_name(const char* reason) noexcept {
  if (reason == nullptr) return "none";
  answer_kind k{};
  admit_reason r{};
  return reason_of(reason, k, r) ? reason : "?";
}

// "1.50 GiB (1610612736 B)"; 2^64-1 in its meaning: a need that saturated, or no limit.
std::string bytes_text(std::uint64_t b, bool is_limit = false) { return detail::exact_bytes(b, is_limit); }
}  // namespace

std::optional<admit_answer> answer_from_c(const pnmem_admit_answer& a, std::string& why) {
  admit_answer out;
  switch (raw_int(a.status)) {
    case PNMEM_ADMITTED: out.status = admit_status::admitted; out.detail.verdict = verdict::admit; break;
    case PNMEM_CAPPED: out.status = admit_status::capped; out.detail.verdict = verdict::cap; break;
    case PNMEM_DENIED: out.status = admit_status::denied; out.detail.verdict = verdict::reject; break;
    case PNMEM_FAIL_OPEN: out.status = admit_status::fail_open; out.detail.verdict = verdict::admit; break;
    default:
      why = "status " + std::to_string(raw_int(a.status)) + " is not a pnmem_admit_status";
      return std::nullopt;
  }
  if (!reason_of(a.reason, out.kind, out.reason)) {
    why = "reason is not a string pnmem wrote (pass an answer as pnmem returned it)";
    return std::nullopt;
  }
  out.detail.reason = out.reason;
  out.die = a.die;
  out.detail.die = a.die;
  out.fit_tokens = a.fit_tokens;
  out.detail.fit_tokens = a.fit_tokens;
  out.detail.need_bytes = a.need_bytes;
  out.detail.limit_bytes = a.limit_bytes;
  out.window = a.window;
  if (const std::optional<mem_level> l = level_from_c(a.level)) out.level = *l;
  // Below TIGHT the ladder never clamps the window (rung 3): the window used is the model's own, and
  // explain may say "the model's window". At TIGHT and worse it may be the clamp: explain says only
  // what is sure.
  if (out.level < mem_level::tight) out.request.max_window = a.window;
  return out;
}

int explain(const pnmem_admit_answer& a, char* buf, std::size_t len) {
  if (buf == nullptr && len > 0) return -1;
  const std::optional<mem_level> level = level_from_c(a.level);
  std::string ignored;
  const std::optional<admit_answer> answer = answer_from_c(a, ignored);
  std::string line;
  if (answer && level) {  // in the words of its kind (engine/explain.hpp)
    line = pnmem::explain(*answer, a.pending_bytes);
  } else {  // not an answer as pnmem wrote it: every field as it is, out-of-range ones named so
    line = std::string(status_name(a.status)) + " (" + reason_name(a.reason) + "): need " + bytes_text(a.need_bytes) +
           ", limit " + bytes_text(a.limit_bytes, true) + ", fit " + format_count(a.fit_tokens, "token") + ", level " +
           std::string(level ? to_string(*level) : std::string_view("invalid")) + ", die " + std::to_string(a.die);
    if (a.pending_bytes != 0) line += ", pending " + bytes_text(a.pending_bytes);
  }
  if (len > 0) {
    const std::size_t n = std::min(line.size(), len - 1);
    std::memcpy(buf, line.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int>(std::min<std::size_t>(line.size(), static_cast<std::size_t>(std::numeric_limits<int>::max())));
}

}  // namespace pnmem::c_abi
