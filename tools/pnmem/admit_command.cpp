// tools/pnmem/admit_command.cpp - `pnmem admit`.
#include "admit_command.hpp"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "eviction_output.hpp"
#include "usage_error.hpp"
#include "die_spec.hpp"
#include "host_options.hpp"
#include "model_options.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/eviction_admission.hpp"
#include "pnmem/format.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "policy_options.hpp"
#include "text_option.hpp"
#include "verdict_output.hpp"

namespace pnmem_cli {

namespace {

// Why rung 4b is off at this snapshot (ladder_plan_from_state said so): the words after "off at LEVEL".
std::string eviction_off_why(const pnmem::mem_state& s, const pnmem::policy& p) {
  if (p.ladder_disabled) return " (the ladder is disabled)";
  if (s.level < pnmem::mem_level::tight) return " (rung 4b engages at tight)";
  const pnmem::level_report r = pnmem::explain_level(s, p);
  return ": PSI alone raised the level, memory is at " + std::string(pnmem::to_string(pnmem::memory_level(r))) +
         ", and a stall does not empty the engine's cache (PN_EVICT_ON_PSI=1 evicts on PSI too)";
}

// Why eviction cannot help a request the library did not consider it for (eviction_admission.hpp).
std::string eviction_not_considered_why(const pnmem::admit_result& r, const pnmem::request_spec& rq,
                                        const pnmem::mem_state& s) {
  using R = pnmem::admit_reason;
  if (r.verdict == pnmem::verdict::admit) return "admitted as it is";
  if (rq.gpu_resident) return "GPU-resident: eviction frees host memory, which the request does not use";
  switch (r.reason) {
    case R::psi_stall: return "the box is stalled on memory (PSI full): evicting KV does not end the stall";
    case R::window: return "capped by the model's window, not by memory";
    case R::prefill_window: return "capped by the ladder's prefill window, not by memory";
    case R::die_vram: return "die " + std::to_string(r.die) + " binds: eviction frees host memory, not the die's";
    case R::bad_request: return "a bad request";
    default: break;
  }
  if (s.host_total_bytes == 0) return "host memory not described";
  return "die " + std::to_string(rq.die) + " cannot hold the whole request: eviction frees host memory, not the die's";
}

class admit_command final : public one_shot_command {
 public:
  admit_command() : one_shot_command("admit", "Admit, cap or reject one request against a described state") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  host_options host_;
  std::string prompt_;
  std::optional<std::string> kv_;
  bool gpu_resident_ = false;
  std::optional<std::string> die_;
  std::optional<std::string> max_window_;
  std::optional<std::string> prefill_window_;
  std::optional<std::string> encoder_items_;
  std::optional<std::string> running_tokens_;
  policy_options policy_;
  model_options model_;
};

void admit_command::add_options(CLI::App& app) {
  host_.add_to(app, /*required=*/true, /*with_psi=*/true);
  app.add_option("--prompt", prompt_, "Prompt tokens, at least 0")->type_name("N")->required();
  add_text_option(app, "--kv", kv_,
                  "KV cache format of the request: q4, fp32 (or f32), f16, bf16, fp8, q8_0 or q4_0 (default the "
                  "model's own format: fp32 for the seed's)")
      ->type_name("FORMAT");
  app.add_flag("--gpu-resident", gpu_resident_, "Model and KV live on the die(s): the host pays no per-token cost");
  add_text_option(app, "--die", die_,
                  "The request's die as FREE:BUDGET[:USED] bytes; its free VRAM also bounds the host path")
      ->type_name("FREE:BUDGET[:USED]");
  add_text_option(app, "--max-window", max_window_,
                  "Context window limit in tokens; 0 = none (default " +
                      std::to_string(pnmem::request_spec{}.max_window) + ")")
      ->type_name("W");
  add_text_option(app, "--prefill-window", prefill_window_,
                  "The ladder's prefill window in force (rung 3, `pnmem plan`'s prefill_window at TIGHT or worse): "
                  "the most prompt tokens admitted now; 0 = none (default " +
                      std::to_string(pnmem::request_spec{}.prefill_window) + ")")
      ->type_name("W");
  add_text_option(app, "--encoder-items,--images", encoder_items_,
                  "Encoder items (images) the request carries: each adds the model's cross-attention KV per "
                  "item (Mllama), whatever the prompt's length (default 0)")
      ->type_name("N");
  add_text_option(app, "--running-tokens", running_tokens_,
                  "Tokens each running slot holds, N[,N...]: at TIGHT and worse (rung 4b), whether evicting KV "
                  "from them makes room for a request host memory refuses or caps (needs a model flag)")
      ->type_name("N[,N...]");
  policy_.add_to(app, level_flags | flag_zero_cost);
  model_.add_to(app);
}

command_output admit_command::answer(const pnmem::policy& env_policy) const {
  pnmem::mem_state state;
  host_.put(state);
  pnmem::request_spec rq;
  rq.n_prompt = parse_int_arg("--prompt", prompt_, 0);
  const std::optional<pnmem::model_files::model_description> model = model_.resolve();
  rq.kv = request_kv_arg("--kv", kv_);
  rq.gpu_resident = gpu_resident_;
  if (die_) {
    put_dies(state, {parse_die_spec("--die", *die_)});
    rq.die = 0;
  }
  if (max_window_) rq.max_window = parse_int_arg("--max-window", *max_window_, 0);
  if (prefill_window_) rq.prefill_window = parse_int_arg("--prefill-window", *prefill_window_, 0);
  if (encoder_items_) rq.encoder_items = parse_int_arg("--encoder-items", *encoder_items_, 0);
  const pnmem::policy p = policy_.apply(env_policy);

  const pnmem::mem_level level = pnmem::derive_level(state, p);
  const pnmem::model_cost& cost = model ? model->cost : pnmem::seed_model_cost;
  const pnmem::kv_format kv = pnmem::request_kv_format(rq.kv, cost);
  const std::vector<int> running =
      running_tokens_ ? parse_running_tokens("--running-tokens", *running_tokens_) : std::vector<int>{};
  if (running_tokens_ && !model) {
    throw usage_error(std::string("--running-tokens: the bytes a token frees are the model's: give ") +
                      model_options::sources_words);
  }
  // Rung 4b as the library's live path decides it (ladder_plan_from_state): at TIGHT and worse, unless
  // the ladder is disabled, and following the memory levels, not PSI, unless PN_EVICT_ON_PSI. The
  // running slots' KV is in the request's format.
  state.level = level;
  const bool kv_evict = pnmem::ladder_plan_from_state(state, pnmem::ladder_config{}, p).kv_evict;
  const pnmem::eviction_limits limits{};
  std::vector<pnmem::keep_budget_answer> each(running.size());
  const pnmem::eviction_admission ea =
      pnmem::admit_after_eviction(cost, rq, state, p, kv_evict, kv, running.data(), static_cast<int>(running.size()),
                                  limits, each.data());
  const pnmem::admit_result& r = ea.decision;

  command_output out;
  out.json = verdict_json(r);
  nlohmann::ordered_json& j = out.json;
  j["fit_tokens"] = r.fit_tokens;
  j["level"] = std::string(pnmem::to_string(level));
  j["prompt_tokens"] = rq.n_prompt;
  j["kv"] = std::string(pnmem::to_string(kv));
  j["gpu_resident"] = rq.gpu_resident;
  j["max_window"] = rq.max_window;
  if (prefill_window_) j["prefill_window"] = rq.prefill_window;
  if (encoder_items_) j["encoder_items"] = rq.encoder_items;
  j["host_reserve_bytes"] = pnmem::host_reserve_bytes(state, p);
  // Only when a model was given: the seed's answers stay as they were, to the byte.
  if (model) j["model"] = model_brief_json(*model, kv);
  // Only when it applies: every other answer's JSON stays as it was.
  const bool held = pnmem::held_at_reserve(r, p);
  if (held) j["held"] = true;
  if (running_tokens_) {
    nlohmann::ordered_json e = {{"enabled", kv_evict}, {"considered", ea.considered}, {"after_eviction", ea.after_eviction},
                                {"evict_bytes", ea.evict_bytes}};
    put_eviction_plan(e, ea.plan, running, ea.considered ? each : std::vector<pnmem::keep_budget_answer>{});
    j["eviction"] = e;
  }

  std::ostringstream t;
  t << verdict_line("verdict", r, rq) << '\n';
  t << "fit_tokens: " << r.fit_tokens << " of " << pnmem::format_count(rq.n_prompt, "prompt token");
  if (rq.max_window > 0 && rq.prefill_window > 0) {
    t << " (window " << rq.max_window << ", prefill window " << rq.prefill_window << ")";
  } else if (rq.max_window > 0) {
    t << " (window " << rq.max_window << ")";
  } else if (rq.prefill_window > 0) {
    t << " (prefill window " << rq.prefill_window << ")";
  }
  if (rq.encoder_items > 0) t << ", " << rq.encoder_items << " encoder items";
  t << '\n';
  t << "level: " << pnmem::to_string(level) << '\n';
  if (held) {
    t << "held: the request needs no host bytes: an engine waiting for it (pnmem_admit_wait, a gate) holds it until "
         "host memory is above the reserve, not shed (zero-cost rule hold: PN_ZERO_COST, --zero-cost)\n";
  }
  if (model) t << model_brief_text(*model, kv) << '\n';
  if (running_tokens_) {
    if (!kv_evict) {
      t << "eviction: off at " << pnmem::to_string(level) << eviction_off_why(state, p) << '\n';
    } else if (!ea.considered) {
      t << "eviction: not considered (" << eviction_not_considered_why(r, rq, state) << ")\n";
    } else {
      print_eviction_rule(t, cost, kv, limits);
      if (ea.after_eviction) {
        t << "  admit after evicting " << pnmem::format_bytes(ea.evict_bytes) << " from " << ea.plan.slots_cut << " slot"
          << (ea.plan.slots_cut == 1 ? "" : "s") << " (each cut to " << pnmem::format_count(ea.plan.cut_to, "token") << " or its floor): all "
          << pnmem::format_count(rq.n_prompt, "prompt token") << (rq.n_prompt == 1 ? " fits\n" : " fit\n");
      } else {
        t << "  eviction cannot make room: short by " << pnmem::format_bytes(ea.evict_bytes)
          << ", the running slots give at most " << pnmem::format_bytes(ea.plan.freed_bytes) << '\n';
      }
      print_eviction_slots(t, running, each);
    }
  }
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_admit_command() { return std::make_unique<admit_command>(); }

}  // namespace pnmem_cli
