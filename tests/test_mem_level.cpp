#include "pnmem/mem_level.hpp"

#include <doctest/doctest.h>

using pnmem::mem_level;

TEST_CASE("levels are ordered so worst-of is max") {
  CHECK(mem_level::ok < mem_level::watch);
  CHECK(mem_level::watch < mem_level::tight);
  CHECK(mem_level::tight < mem_level::critical);
  CHECK(static_cast<int>(mem_level::ok) == 0);
  CHECK(static_cast<int>(mem_level::critical) == 3);
  for (int a = 0; a < pnmem::mem_level_count; ++a) {
    for (int b = 0; b < pnmem::mem_level_count; ++b) {
      const auto w = pnmem::worst_of(static_cast<mem_level>(a), static_cast<mem_level>(b));
      CHECK(static_cast<int>(w) == (a > b ? a : b));
    }
  }
}

TEST_CASE("level names are lower-case and round-trip") {
  CHECK(pnmem::to_string(mem_level::ok) == "ok");
  CHECK(pnmem::to_string(mem_level::watch) == "watch");
  CHECK(pnmem::to_string(mem_level::tight) == "tight");
  CHECK(pnmem::to_string(mem_level::critical) == "critical");
  for (int i = 0; i < pnmem::mem_level_count; ++i) {
    const auto l = static_cast<mem_level>(i);
    REQUIRE(pnmem::parse_mem_level(pnmem::to_string(l)).has_value());
    CHECK(*pnmem::parse_mem_level(pnmem::to_string(l)) == l);
  }
  CHECK(pnmem::to_string(static_cast<mem_level>(9)) == "invalid");
}

TEST_CASE("parse_mem_level accepts the seed's upper-case names and nothing else") {
  CHECK(pnmem::parse_mem_level("TIGHT") == mem_level::tight);
  CHECK(pnmem::parse_mem_level("Critical") == mem_level::critical);
  CHECK_FALSE(pnmem::parse_mem_level("").has_value());
  CHECK_FALSE(pnmem::parse_mem_level("okay").has_value());
  CHECK_FALSE(pnmem::parse_mem_level("2").has_value());
  CHECK_FALSE(pnmem::parse_mem_level(" ok").has_value());
}
