// tools/pnmem/admit_command.cpp - `pnmem admit`.
#include "admit_command.hpp"

#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "die_spec.hpp"
#include "host_options.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/level.hpp"
#include "policy_options.hpp"
#include "text_option.hpp"
#include "verdict_output.hpp"

namespace pnmem_cli {

namespace {

class admit_command final : public one_shot_command {
 public:
  admit_command() : one_shot_command("admit", "Admit, cap or reject one request against a described state") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  host_options host_;
  std::string prompt_;
  std::string kv_{pnmem::to_string(pnmem::request_spec{}.kv)};
  bool gpu_resident_ = false;
  std::optional<std::string> die_;
  std::optional<std::string> max_window_;
  policy_options policy_;
};

void admit_command::add_options(CLI::App& app) {
  host_.add_to(app, /*required=*/true, /*with_psi=*/true);
  app.add_option("--prompt", prompt_, "Prompt tokens, at least 0")->type_name("N")->required();
  app.add_option("--kv", kv_, "KV cache format: q4 or fp32")->type_name("q4|fp32")->capture_default_str();
  app.add_flag("--gpu-resident", gpu_resident_, "Model and KV live on the die(s): the host pays no per-token cost");
  add_text_option(app, "--die", die_,
                  "The request's die as FREE:BUDGET[:USED] bytes; its free VRAM also bounds the host path")
      ->type_name("FREE:BUDGET[:USED]");
  add_text_option(app, "--max-window", max_window_,
                  "Context window limit in tokens; 0 = none (default " +
                      std::to_string(pnmem::request_spec{}.max_window) + ")")
      ->type_name("W");
  policy_.add_to(app, level_flags);
}

command_output admit_command::answer(const pnmem::policy& env_policy) const {
  pnmem::mem_state state;
  host_.put(state);
  pnmem::request_spec rq;
  rq.n_prompt = parse_int_arg("--prompt", prompt_, 0);
  rq.kv = parse_kv_arg("--kv", kv_);
  rq.gpu_resident = gpu_resident_;
  if (die_) {
    put_dies(state, {parse_die_spec("--die", *die_)});
    rq.die = 0;
  }
  if (max_window_) rq.max_window = parse_int_arg("--max-window", *max_window_, 0);
  const pnmem::policy p = policy_.apply(env_policy);

  const pnmem::mem_level level = pnmem::derive_level(state, p);
  const pnmem::admit_result r = pnmem::admit_request(rq, state, p);

  command_output out;
  out.json = verdict_json(r);
  nlohmann::ordered_json& j = out.json;
  j["fit_tokens"] = r.fit_tokens;
  j["level"] = std::string(pnmem::to_string(level));
  j["prompt_tokens"] = rq.n_prompt;
  j["kv"] = std::string(pnmem::to_string(rq.kv));
  j["gpu_resident"] = rq.gpu_resident;
  j["max_window"] = rq.max_window;
  j["host_reserve_bytes"] = pnmem::host_reserve_bytes(state.host_total_bytes, p);

  std::ostringstream t;
  t << verdict_line("verdict", r) << '\n';
  t << "fit_tokens: " << r.fit_tokens << " of " << rq.n_prompt << " prompt tokens";
  if (rq.max_window > 0) t << " (window " << rq.max_window << ")";
  t << '\n';
  t << "level: " << pnmem::to_string(level) << '\n';
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_admit_command() { return std::make_unique<admit_command>(); }

}  // namespace pnmem_cli
