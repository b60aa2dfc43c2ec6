// tests/linux/fixture_sampler.hpp - a linux_sampler over a fixture tree, and the
// small helpers its tests share. Test code only, header-only.
//
//   fixture_sampler(root)         a sampler whose monotonic clock the test sets (or stands at 0)
//   sample_fixture("v1_limit")    one sample of a checked-in fixture tree
//   bits({...})                   a provenance bit set
//   psi_text(some_us, full_us)    a /proc/pressure/memory with those total= counters
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "fixture_tree.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/linux/linux_sampler.hpp"

namespace pnmem::test {

// A clock the test moves by hand.
struct monotonic_clock {
  std::int64_t now_ns = 1'000'000'000;
};

enum class psi_triggers : std::uint8_t {
  armed_by_default,  // linux_sampler_options' default (poll mode on a fixture: not procfs)
  none,              // for tests that are not about triggers
};

inline pnmem::linux_sampler fixture_sampler(const std::filesystem::path& root, monotonic_clock* clock = nullptr,
                                            psi_triggers triggers = psi_triggers::armed_by_default) {
  pnmem::linux_sampler_options o;
  o.root = root.string();
  if (triggers == psi_triggers::none) o.psi_triggers.clear();
  if (clock != nullptr) {
    o.monotonic_ns = [clock] { return clock->now_ns; };
  } else {
    o.monotonic_ns = [] { return std::int64_t{0}; };
  }
  return pnmem::linux_sampler(std::move(o));
}

inline pnmem::host_sample sample_fixture(std::string_view name,
                                         psi_triggers triggers = psi_triggers::armed_by_default) {
  pnmem::linux_sampler s = fixture_sampler(fixtures_dir() / name, nullptr, triggers);
  return s.sample();
}

constexpr std::uint32_t bits(std::initializer_list<pnmem::host_source> sources) {
  std::uint32_t b = 0;
  for (const pnmem::host_source s : sources) b |= static_cast<std::uint32_t>(s);
  return b;
}

inline std::string psi_text(std::uint64_t some_total_us, std::uint64_t full_total_us) {
  return "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + std::to_string(some_total_us) +
         "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=" + std::to_string(full_total_us) + "\n";
}

}  // namespace pnmem::test
