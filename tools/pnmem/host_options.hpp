// tools/pnmem/host_options.hpp - the host-memory flags that describe a state.
//
//   --host-total B   MemTotal (or the container limit); 0 = host not sampled
//   --host-avail B   MemAvailable; may not exceed --host-total
//   --container      --host-total is a container's memory limit: the container's reserve rule
//   --psi-some PCT   /proc/pressure/memory some avg10, 0..100   (with_psi)
//   --psi-full PCT   /proc/pressure/memory full avg10, 0..100   (with_psi)
#pragma once

#include <optional>
#include <string>

#include "pnmem/mem_state.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

class host_options {
 public:
  // required: --host-total/--host-avail must be given; otherwise both or neither.
  // with_psi: also register --psi-some and --psi-full.
  void add_to(CLI::App& app, bool required, bool with_psi);

  // Whether the host was described (both byte flags given). Throws usage_error
  // when only one of them was.
  bool given() const;

  // Puts the host numbers into `state`; throws usage_error on a bad value or
  // when the available memory exceeds the total.
  void put(pnmem::mem_state& state) const;

 private:
  std::optional<std::string> total_;
  std::optional<std::string> avail_;
  std::optional<std::string> psi_some_;
  std::optional<std::string> psi_full_;
  bool container_ = false;
};

}  // namespace pnmem_cli
