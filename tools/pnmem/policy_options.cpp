// tools/pnmem/policy_options.cpp - the policy override flags.
#include "policy_options.hpp"

#include <cstddef>
#include <iterator>
#include <string_view>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/config.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

// The PN_* variable a flag overrides; not finding it is a compile error.
constexpr const pnmem::env_variable* variable(std::string_view name) {
  for (const auto& v : pnmem::env_variables) {
    if (name == v.name) return &v;
  }
  throw "not a PN_* variable";
}

struct flag_spec {
  policy_flag bit;
  const char* flag;
  const char* type_name;  // nullptr: a switch, given as the variable set to 1
  const pnmem::env_variable* variable;
};

// In policy_flag bit order: values_[i] belongs to flag_specs[i].
constexpr flag_spec flag_specs[] = {
    {flag_host_reserve, "--host-reserve", "BYTES", variable("PN_HOST_RESERVE_BYTES")},
    {flag_psi_full_reject, "--psi-full-reject", "PCT", variable("PN_PSI_FULL_REJECT")},
    {flag_die_reserve, "--die-reserve", "BYTES", variable("PN_DIE_RESERVE_BYTES")},
    {flag_load_spike, "--load-spike", "BYTES", variable("PN_LOAD_SPIKE_BYTES")},
    {flag_ladder_disable, "--ladder-disable", nullptr, variable("PN_LADDER_DISABLE")},
    {flag_interval, "--interval", "MS", variable("PN_MEMWATCH_POLL_MS")},
    {flag_pressure_interval, "--pressure-interval", "MS", variable("PN_PRESSURE_POLL_MS")},
    {flag_dwell, "--dwell", "MS", variable("PN_STEP_DOWN_DWELL_MS")},
    {flag_zero_cost, "--zero-cost", "RULE", variable("PN_ZERO_COST")},
};
static_assert(std::size(flag_specs) == policy_flag_count);

constexpr bool in_bit_order() {
  for (std::size_t i = 0; i < policy_flag_count; ++i) {
    if (flag_specs[i].bit != 1U << i) return false;
  }
  return true;
}
static_assert(in_bit_order());

}  // namespace

void policy_options::add_to(CLI::App& app, unsigned which) {
  for (std::size_t i = 0; i < policy_flag_count; ++i) {
    const flag_spec& f = flag_specs[i];
    if ((which & f.bit) == 0U) continue;
    const pnmem::env_variable& v = *f.variable;
    std::optional<std::string>& value = values_[i];
    if (f.type_name == nullptr) {
      app.add_flag_callback(f.flag, [&value] { value = "1"; },
                            std::string(v.meaning) + " (as " + v.name + "=1)");
    } else {
      // The default is what applies without the flag: the variable's value where it is set.
      add_text_option(app, f.flag, value,
                      std::string(v.meaning) + " (overrides " + v.name + "; default " +
                          v.setting(pnmem::process_env_config().value) + ")")
          ->type_name(f.type_name);
    }
  }
}

pnmem::env_settings policy_options::apply(pnmem::env_settings s) const {
  for (std::size_t i = 0; i < policy_flag_count; ++i) {
    if (!values_[i]) continue;
    const std::string problem = flag_specs[i].variable->apply(s, values_[i]->c_str());
    if (!problem.empty()) throw usage_error(describe_bad_value(flag_specs[i].flag, *values_[i], problem));
  }
  return s;
}

pnmem::policy policy_options::apply(const pnmem::policy& base) const {
  pnmem::env_settings s = pnmem::default_env_settings;  // the variables set env_settings; these, its policy
  s.policy = base;
  return apply(s).policy;
}

}  // namespace pnmem_cli
