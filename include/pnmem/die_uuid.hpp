// pnmem/die_uuid.hpp - which GPU a die is, whatever index a process gives it.
//
// A die's index is the process's own: CUDA numbers the devices a process may see (CUDA_VISIBLE_DEVICES
// picks and orders them), so die 0 of one worker is die 3 of another. What every process of a box
// agrees on is the device's UUID (cudaDeviceProp::uuid, NVML's and nvidia-smi's "GPU-..."): the box
// ledger keys a die's reservations by it (engine/box_book.hpp, host_ledger::name_die).
//
//   pnmem::die_uuid id;
//   if (!pnmem::parse_die_uuid("GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c", id)) ...;  // or 32 hex digits
//   std::string text = pnmem::to_string(id);   // "GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c"
//
// All zero is no UUID (a die not named). C++17 and C++20; no allocation but to_string's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace pnmem {

struct die_uuid {
  std::array<std::uint8_t, 16> bytes{};

  constexpr bool empty() const noexcept {
    for (std::uint8_t b : bytes) {
      if (b != 0) return false;
    }
    return true;
  }
  friend constexpr bool operator==(const die_uuid& a, const die_uuid& b) noexcept {
    for (std::size_t i = 0; i < 16; ++i) {
      if (a.bytes[i] != b.bytes[i]) return false;
    }
    return true;
  }
  friend constexpr bool operator!=(const die_uuid& a, const die_uuid& b) noexcept { return !(a == b); }
};

namespace detail {
constexpr int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace detail

// A UUID as nvidia-smi prints it ("GPU-" then 8-4-4-4-12 hex digits), or the same without the prefix,
// or 32 hex digits with no dashes. False (and `out` untouched) for anything else, and for all zeros.
constexpr bool parse_die_uuid(std::string_view text, die_uuid& out) noexcept {
  if (text.size() >= 4 && text.substr(0, 4) == std::string_view("GPU-")) text.remove_prefix(4);
  const bool dashed = text.size() == 36;
  if (!dashed && text.size() != 32) return false;
  die_uuid u;
  std::size_t at = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    if (dashed && (at == 8 || at == 13 || at == 18 || at == 23)) {
      if (text[at] != '-') return false;
      ++at;
    }
    const int hi = detail::hex_digit(text[at]);
    const int lo = detail::hex_digit(text[at + 1]);
    if (hi < 0 || lo < 0) return false;
    u.bytes[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    at += 2;
  }
  if (u.empty()) return false;
  out = u;
  return true;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower case); "" for an empty UUID.
inline std::string to_string(const die_uuid& u) {
  if (u.empty()) return {};
  constexpr char digits[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += digits[u.bytes[i] >> 4];
    out += digits[u.bytes[i] & 0xf];
  }
  return out;
}

}  // namespace pnmem
