/* Prints the layout of every struct in pnmem/pnmem_c.h as the C compiler sees it, one line a
 * field: "struct field offset size", and "struct - 0 sizeof" for the whole struct.
 * tests/python/test_layout.py compares it with the ctypes mirrors in python/pnmem/_ffi.py. */
#include <stddef.h>
#include <stdio.h>

#include "pnmem/pnmem_c.h"

#define S(type) printf("%s - 0 %zu\n", #type, sizeof(type))
#define F(type, field) printf("%s %s %zu %zu\n", #type, #field, offsetof(type, field), sizeof(((type*)0)->field))

int main(void) {
  S(pnmem_state);
  F(pnmem_state, host_total_bytes);
  F(pnmem_state, host_avail_bytes);
  F(pnmem_state, host_psi_some_avg10);
  F(pnmem_state, host_psi_full_avg10);
  F(pnmem_state, host_psi_some_rate);
  F(pnmem_state, host_psi_full_rate);
  F(pnmem_state, cgroup_current_bytes);
  F(pnmem_state, cgroup_high_bytes);
  F(pnmem_state, cgroup_max_bytes);
  F(pnmem_state, n_dies);
  F(pnmem_state, per_die_free);
  F(pnmem_state, per_die_budget);
  F(pnmem_state, per_die_used);
  F(pnmem_state, per_die_retiring);
  F(pnmem_state, level);
  F(pnmem_state, raw_level);
  F(pnmem_state, seq);
  F(pnmem_state, sample_time_ns);

  S(pnmem_snapshot);
  F(pnmem_snapshot, struct_size);
  F(pnmem_snapshot, state);
  F(pnmem_snapshot, sources_read);
  F(pnmem_snapshot, sources_failed);
  F(pnmem_snapshot, cgroup_mode);
  F(pnmem_snapshot, psi_mode);
  F(pnmem_snapshot, meminfo_total_bytes);
  F(pnmem_snapshot, meminfo_avail_bytes);
  F(pnmem_snapshot, cgroup_limit_bytes);
  F(pnmem_snapshot, cgroup_working_set_bytes);
  F(pnmem_snapshot, limit_cgroup);
  F(pnmem_snapshot, host_level);
  F(pnmem_snapshot, psi_level);
  F(pnmem_snapshot, die_level);
  F(pnmem_snapshot, os_level);
  F(pnmem_snapshot, memory_level);

  S(pnmem_watcher_options);
  F(pnmem_watcher_options, struct_size);
  F(pnmem_watcher_options, poll_interval_ms);
  F(pnmem_watcher_options, pressure_poll_interval_ms);
  F(pnmem_watcher_options, step_down_dwell_ms);
  F(pnmem_watcher_options, root);
  F(pnmem_watcher_options, ledger);

  S(pnmem_activation_anchor);
  F(pnmem_activation_anchor, tokens);
  F(pnmem_activation_anchor, peak_bytes);

  S(pnmem_model);
  F(pnmem_model, struct_size);
  F(pnmem_model, kv);
  F(pnmem_model, gpu_resident);
  F(pnmem_model, max_window);
  F(pnmem_model, die);
  F(pnmem_model, max_slots);
  F(pnmem_model, full_kv_bytes_per_token);
  F(pnmem_model, sliding_kv_bytes_per_token);
  F(pnmem_model, sliding_window);
  F(pnmem_model, state_bytes_per_seq);
  F(pnmem_model, normal_kv);
  F(pnmem_model, compact_kv);
  F(pnmem_model, n_anchors);
  F(pnmem_model, anchors);
  F(pnmem_model, activation_fixed_bytes);
  F(pnmem_model, activation_per_token_bytes);
  F(pnmem_model, activation_per_token_sq_bytes);
  F(pnmem_model, n_more_windows);
  F(pnmem_model, more_windows);
  F(pnmem_model, kv_bytes_per_encoder_item);
  F(pnmem_model, kv_block_tokens);
  F(pnmem_model, zero_cost);

  S(pnmem_kv_window);
  F(pnmem_kv_window, window);
  F(pnmem_kv_window, bytes_per_token);

  S(pnmem_engine_rule);
  F(pnmem_engine_rule, struct_size);
  F(pnmem_engine_rule, engine);
  F(pnmem_engine_rule, block_tokens);
  F(pnmem_engine_rule, max_batched_tokens);
  F(pnmem_engine_rule, ubatch_tokens);
  F(pnmem_engine_rule, seqs);
  F(pnmem_engine_rule, state_copies);
  F(pnmem_engine_rule, ssm_state_fp32);
  F(pnmem_engine_rule, mtp);
  F(pnmem_engine_rule, hybrid_manager_off);

  S(pnmem_layer_group);
  F(pnmem_layer_group, kind);
  F(pnmem_layer_group, layers);
  F(pnmem_layer_group, kv_heads);
  F(pnmem_layer_group, key_dim);
  F(pnmem_layer_group, value_dim);
  F(pnmem_layer_group, k_only);
  F(pnmem_layer_group, span);
  F(pnmem_layer_group, conv_state_values);
  F(pnmem_layer_group, ssm_state_values);

  S(pnmem_model_shape);
  F(pnmem_model_shape, struct_size);
  F(pnmem_model_shape, n_groups);
  F(pnmem_model_shape, groups);
  F(pnmem_model_shape, query_heads);
  F(pnmem_model_shape, hidden_size);
  F(pnmem_model_shape, fixed_activation_bytes);
  F(pnmem_model_shape, normal_kv);
  F(pnmem_model_shape, compact_kv);
  F(pnmem_model_shape, state_format);
  F(pnmem_model_shape, ssm_state_format);
  F(pnmem_model_shape, side_bytes);

  S(pnmem_request);
  F(pnmem_request, struct_size);
  F(pnmem_request, n_tokens);
  F(pnmem_request, encoder_items);

  S(pnmem_admit_answer);
  F(pnmem_admit_answer, status);
  F(pnmem_admit_answer, fit_tokens);
  F(pnmem_admit_answer, reason);
  F(pnmem_admit_answer, level);
  F(pnmem_admit_answer, die);
  F(pnmem_admit_answer, window);
  F(pnmem_admit_answer, need_bytes);
  F(pnmem_admit_answer, limit_bytes);
  F(pnmem_admit_answer, pending_bytes);

  S(pnmem_model_load);
  F(pnmem_model_load, struct_size);
  F(pnmem_model_load, weights_bytes);
  F(pnmem_model_load, kv_bytes);
  F(pnmem_model_load, die);

  S(pnmem_policy);
  F(pnmem_policy, host_reserve_min_bytes);
  F(pnmem_policy, host_reserve_bp);
  F(pnmem_policy, psi_full_reject_bp);
  F(pnmem_policy, psi_some_tight_bp);
  F(pnmem_policy, psi_full_window_ms);
  F(pnmem_policy, die_tight_divisor);
  F(pnmem_policy, die_watch_divisor);
  F(pnmem_policy, die_reserve_bytes);
  F(pnmem_policy, die_scratch_bytes);
  F(pnmem_policy, load_spike_bytes);
  F(pnmem_policy, ladder_disabled);
  F(pnmem_policy, host_total_bytes);
  F(pnmem_policy, host_reserve_bytes);

  S(pnmem_budget);
  F(pnmem_budget, total_bytes);
  F(pnmem_budget, avail_bytes);
  F(pnmem_budget, reserve_bytes);
  F(pnmem_budget, headroom_bytes);
  F(pnmem_budget, pending_bytes);
  F(pnmem_budget, unpromised_bytes);
  F(pnmem_budget, level);
  F(pnmem_budget, seq);

  S(pnmem_room);
  F(pnmem_room, struct_size);
  F(pnmem_room, sampled);
  F(pnmem_room, level);
  F(pnmem_room, avail_bytes);
  F(pnmem_room, reserve_bytes);
  F(pnmem_room, pending_bytes);
  F(pnmem_room, credited_bytes);
  F(pnmem_room, take_bytes);
  F(pnmem_room, free_bytes);
  F(pnmem_room, seq);

  S(pnmem_level_change);
  F(pnmem_level_change, from);
  F(pnmem_level_change, to);
  F(pnmem_level_change, seq);
  F(pnmem_level_change, sample_time_ns);
  F(pnmem_level_change, state);

  S(pnmem_ladder_plan);
  F(pnmem_ladder_plan, level);
  F(pnmem_ladder_plan, max_slots);
  F(pnmem_ladder_plan, force_kv_q4);
  F(pnmem_ladder_plan, kv_evict);
  F(pnmem_ladder_plan, prefill_window);
  F(pnmem_ladder_plan, degraded);
  F(pnmem_ladder_plan, note);

  S(pnmem_kv_allocation);
  F(pnmem_kv_allocation, format);
  F(pnmem_kv_allocation, bytes);
  S(pnmem_eviction_limits);
  F(pnmem_eviction_limits, min_keep_tokens);
  F(pnmem_eviction_limits, min_keep_permille);

  S(pnmem_keep_answer);
  F(pnmem_keep_answer, tokens);
  F(pnmem_keep_answer, keep_tokens);
  F(pnmem_keep_answer, freed_bytes);

  S(pnmem_eviction);
  F(pnmem_eviction, considered);
  F(pnmem_eviction, after_eviction);
  F(pnmem_eviction, enough);
  F(pnmem_eviction, cut_to_tokens);
  F(pnmem_eviction, slots_cut);
  F(pnmem_eviction, evict_bytes);
  F(pnmem_eviction, freed_bytes);
  return 0;
}
