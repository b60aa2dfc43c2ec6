// tools/pnmem/load_command.cpp - `pnmem load`.
#include "load_command.hpp"

#include <cstddef>
#include <sstream>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "die_spec.hpp"
#include "pnmem/admission.hpp"
#include "verdict_output.hpp"

namespace pnmem_cli {

void load_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand("load", "Admit or reject a model upload onto the dies (and its host burst)");
  app_->add_option("--weights", weights_, "Model weight bytes")->type_name("BYTES")->required();
  app_->add_option("--kv-max-ctx", kv_max_ctx_, "KV cache bytes at the maximum context")
      ->type_name("BYTES")
      ->required();
  app_->add_option("--die", dies_,
                   "A die as FREE:BUDGET[:USED] bytes; repeat for up to 16 dies, index = order given")
      ->type_name("FREE:BUDGET[:USED]")
      ->allow_extra_args(false);
  host_.add_to(*app_, /*required=*/false, /*with_psi=*/false);
  policy_.add_to(*app_, flag_die_reserve | flag_load_spike | flag_host_reserve);
}


command_output load_command::run(const pnmem::policy& env_policy) const {
  pnmem::model_load_spec model;
  model.weights_bytes = parse_bytes_arg("--weights", weights_);
  model.kv_max_ctx_bytes = parse_bytes_arg("--kv-max-ctx", kv_max_ctx_);
  const std::vector<die_spec> dies = parse_die_specs("--die", dies_);
  const bool host_given = host_.given();
  pnmem::mem_state state;
  host_.put(state);
  put_dies(state, dies);
  const pnmem::policy p = policy_.apply(env_policy);

  const pnmem::admit_result whole = pnmem::admit_model_load(model, state, pnmem::no_die, p);
  std::vector<pnmem::admit_result> per_die;
  if (!dies.empty()) {
    const std::uint64_t n = dies.size();
    const std::uint64_t weights_slice = split_round_up(model.weights_bytes, n);
    const std::uint64_t kv_slice = split_round_up(model.kv_max_ctx_bytes, n);
    for (std::size_t i = 0; i < dies.size(); ++i) {
      per_die.push_back(pnmem::admit_model_load_die(weights_slice, kv_slice, state, static_cast<int>(i), p));
    }
  }

  command_output out;
  nlohmann::ordered_json& j = out.json;
  j["model_load"] = verdict_json(whole);
  j["per_die"] = nlohmann::ordered_json::array();
  for (const auto& r : per_die) j["per_die"].push_back(verdict_json(r));
  j["load_spike"] = host_given ? verdict_json(pnmem::admit_load_spike(state, p)) : nlohmann::ordered_json(nullptr);
  j["weights_bytes"] = model.weights_bytes;
  j["kv_max_ctx_bytes"] = model.kv_max_ctx_bytes;
  j["die_reserve_bytes"] = p.die_reserve_bytes;
  j["die_scratch_bytes"] = p.die_scratch_bytes;

  std::ostringstream t;
  t << verdict_line("model_load", whole) << '\n';
  for (std::size_t i = 0; i < per_die.size(); ++i) {
    t << verdict_line("per_die", per_die[i]) << '\n';
  }
  if (host_given) {
    t << verdict_line("load_spike", pnmem::admit_load_spike(state, p)) << '\n';
  } else {
    t << "load_spike: not checked (give --host-total and --host-avail)\n";
  }
  out.text = t.str();
  return out;
}

}  // namespace pnmem_cli
