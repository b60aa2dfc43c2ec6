// The survival run's event lines: what the supervisor counts as ended and lost
// comes from here, so a parse that dropped lines would hide lost requests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "events.hpp"

using namespace survival;

TEST_CASE("every event kind round-trips through its line") {
  const std::string text = format_queued({12.5, 3, 2048, 100}) + format_ended({40.0, 3, outcome::capped, "host_budget", 1500}) +
                           format_level({41.2, pnmem::mem_level::tight, 123456789, 42});
  const event_log log = parse_events(text);
  REQUIRE(log.queued.size() == 1);
  REQUIRE(log.ended.size() == 1);
  REQUIRE(log.levels.size() == 1);
  CHECK(log.bad_lines == 0);
  CHECK(log.queued[0].id == 3);
  CHECK(log.queued[0].prompt == 2048);
  CHECK(log.ended[0].result == outcome::capped);
  CHECK(log.ended[0].reason == "host_budget");
  CHECK(log.ended[0].tokens == 1500);
  CHECK(log.levels[0].level == pnmem::mem_level::tight);
  CHECK(log.levels[0].avail_bytes == 123456789);
  CHECK(log.levels[0].seq == 42);
}

TEST_CASE("a line torn by a kill, or one that does not parse, is counted and not trusted") {
  const std::string text = format_queued({1, 0, 300, 64}) + format_queued({2, 1, 400, 64}) +
                           "E 5.0 0 admitted fits 300\n"
                           "E 6.0 1 exploded fits 400\n"  // unknown outcome
                           "L 7.0 dire 1 1\n"             // unknown level
                           "Q 8.0 2 50";                  // torn: a field missing
  const event_log log = parse_events(text);
  CHECK(log.queued.size() == 2);
  CHECK(log.ended.size() == 1);
  CHECK(log.levels.empty());
  CHECK(log.bad_lines == 3);
}

TEST_CASE("outcome names") {
  CHECK(parse_outcome("admitted") == outcome::admitted);
  CHECK(parse_outcome("rejected") == outcome::rejected);
  CHECK_FALSE(parse_outcome("lost").has_value());
}
