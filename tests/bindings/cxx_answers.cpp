// tests/bindings/cxx_answers.cpp - the C++ binding's side of bindings_agree.py.
//
//   cxx_answers defaults              the C++ defaults every binding must share, as one JSON object
//   cxx_answers answers CONFIG...     for each line on stdin, "TOTAL AVAIL SOME FULL DIE_FREE DIE_BUDGET
//                                     PROMPT MODEL RUNNING" (bytes, percents with two decimals, a die with
//                                     budget 0 is none, MODEL an index into the CONFIG files, RUNNING the
//                                     running slots' tokens, comma-separated), the answer an engine gets from
//                                     pnmem::admit_after_eviction on a watcher holding that snapshot, as one
//                                     JSON line: what the C, Python and tool sides print for the same line
//
// The model is each config.json read under the exact rule, with every request field at its default:
// the point is what each binding does when the engine does not say.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pnmem/config.hpp"
#include "pnmem/engine/admit_after_eviction.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/keep_set.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/retry_hint.hpp"
#include "pnmem/watcher.hpp"

namespace {

// A watcher that holds one snapshot: what pnmem::admit reads from a live one.
struct one_snapshot {
  pnmem::mem_state state;
  bool running() const { return true; }
  pnmem::mem_state read() const { return state; }
};

nlohmann::ordered_json defaults() {
  nlohmann::ordered_json j;
  const pnmem::model_desc m{};
  j["request"] = {{"kv", m.kv ? nlohmann::ordered_json(std::string(pnmem::to_string(*m.kv))) : nlohmann::ordered_json()},
                  {"gpu_resident", m.gpu_resident},
                  {"max_window", m.max_window},
                  {"die", m.die},
                  {"max_slots", m.max_slots},
                  {"zero_cost", m.zero_cost ? std::string(pnmem::to_string(*m.zero_cost)) : std::string("policy")}};
  const pnmem::request_spec rq{};
  j["request_spec"] = {{"kv", rq.kv ? nlohmann::ordered_json(std::string(pnmem::to_string(*rq.kv))) : nlohmann::ordered_json()},
                       {"max_window", rq.max_window},
                       {"prefill_window", rq.prefill_window},
                       {"encoder_items", rq.encoder_items}};
  const pnmem::eviction_limits l{};
  j["eviction_limits"] = {{"min_keep_tokens", l.min_keep_tokens}, {"min_keep_permille", l.min_keep_permille}};
  const pnmem::keep_window k{};
  j["keep_window"] = {{"sinks", k.sinks}, {"recent", k.recent}};
  j["observation_kernel"] = pnmem::default_observation_kernel;
  const pnmem::engine_rule e{};
  j["engine_rule"] = {{"engine", std::string(pnmem::to_string(e.engine))},
                      {"block_tokens", e.block_tokens},
                      {"max_batched_tokens", e.max_batched_tokens},
                      {"ubatch_tokens", e.ubatch_tokens},
                      {"seqs", e.seqs},
                      {"state_copies", e.state_copies},
                      {"ssm_state_fp32", e.ssm_state_fp32},
                      {"mtp", e.mtp},
                      {"hybrid_manager_off", e.hybrid_manager_off}};
  const pnmem::ladder_config c{};
  j["ladder_config"] = {{"max_slots", c.max_slots}, {"prefill_window", c.prefill_window}, {"kv_q4", c.kv_q4}};
  const pnmem::watcher_options w{};
  j["watcher"] = {{"poll_interval_ms", w.poll_interval.count()},
                  {"pressure_poll_interval_ms", w.pressure_poll_interval.count()},
                  {"step_down_dwell_ms", w.step_down_dwell.count()}};
  const pnmem::policy& p = pnmem::process_policy();
  j["policy"] = {{"host_reserve_min_bytes", p.host_reserve_min_bytes},
                 {"host_reserve_bp", p.host_reserve_bp},
                 {"psi_full_reject_bp", p.psi_full_reject_bp},
                 {"psi_some_tight_bp", p.psi_some_tight_bp},
                 {"psi_full_window_ms", p.psi_full_window_ms},
                 {"die_reserve_bytes", p.die_reserve_bytes},
                 {"load_spike_bytes", p.load_spike_bytes},
                 {"ladder_disabled", p.ladder_disabled},
                 {"evict_on_psi", p.evict_on_psi},
                 {"zero_cost", std::string(pnmem::to_string(p.zero_cost))}};
  nlohmann::ordered_json retry = nlohmann::ordered_json::object();
  for (const std::int64_t ms : {0, 1, 500, 999, 1000, 1001, 9999, 10000, 60000}) {
    retry[std::to_string(ms)] = pnmem::retry_after_seconds(ms);
  }
  j["retry_after_seconds"] = retry;
  return j;
}

int answers(int argc, char** argv) {
  std::vector<pnmem::model_desc> models;
  for (int i = 2; i < argc; ++i) {
    auto d = pnmem::model_files::read_hf_config_file(argv[i]);
    if (!d) {
      std::fprintf(stderr, "cxx_answers: %s\n", d.error.c_str());
      return 2;
    }
    pnmem::model_desc m;  // every request field at its default
    m.cost = d.value->cost;
    models.push_back(m);
  }
  const pnmem::policy& p = pnmem::process_policy();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::uint64_t total = 0, avail = 0, die_free = 0, die_budget = 0;
    std::string some, full, running_text;
    int prompt = 0;
    std::size_t model = 0;
    if (!(in >> total >> avail >> some >> full >> die_free >> die_budget >> prompt >> model >> running_text) ||
        model >= models.size()) {
      std::fprintf(stderr, "cxx_answers: bad line: %s\n", line.c_str());
      return 2;
    }
    std::vector<int> running;
    std::istringstream r(running_text);
    for (std::string t; std::getline(r, t, ',');) running.push_back(std::atoi(t.c_str()));
    one_snapshot w;
    pnmem::mem_state& s = w.state;
    s.host_total_bytes = total;
    s.host_avail_bytes = avail;
    s.host_psi_some_avg10 = std::strtod(some.c_str(), nullptr);
    s.host_psi_full_avg10 = std::strtod(full.c_str(), nullptr);
    if (die_budget != 0) {
      s.n_dies = 1;
      s.per_die_free_bytes[0] = die_free;
      s.per_die_budget_bytes[0] = die_budget;
    }
    s.seq = 1;
    s = pnmem::with_derived_level(s, p);
    const pnmem::admit_eviction_answer a =
        pnmem::admit_after_eviction(w, models[model], prompt, 0, running.data(), static_cast<int>(running.size()),
                                    pnmem::admit_options{.policy = p});
    nlohmann::ordered_json j;
    j["status"] = std::string(pnmem::to_string(a.answer.status));
    j["reason"] = std::string(pnmem::to_string(a.answer.reason));
    j["fit"] = a.answer.fit_tokens;
    j["need"] = a.answer.detail.need_bytes;
    j["limit"] = a.answer.detail.limit_bytes;
    j["level"] = std::string(pnmem::to_string(a.answer.level));
    j["kv"] = std::string(pnmem::to_string(pnmem::request_kv_format(models[model])));
    j["considered"] = a.eviction.considered;
    j["after_eviction"] = a.eviction.after_eviction;
    j["evict_bytes"] = a.eviction.considered ? a.eviction.evict_bytes : 0;
    j["cut_to"] = a.eviction.considered ? a.eviction.plan.cut_to : 0;
    j["freed"] = a.eviction.considered ? a.eviction.plan.freed_bytes : 0;
    std::cout << j.dump() << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "defaults") {
    std::cout << defaults().dump(2) << '\n';
    return 0;
  }
  if (mode == "answers") return answers(argc, argv);
  std::fprintf(stderr, "usage: cxx_answers defaults | answers CONFIG...\n");
  return 2;
}
