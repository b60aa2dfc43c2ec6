// Byte sizes, percentages and switches: every accepted form and every refusal.
#include "pnmem/detail/printable.hpp"
#include "pnmem/parse.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace pnmem;

TEST_CASE("bytes: plain integers and binary units") {
  CHECK(parse_bytes("0").value == 0);
  CHECK(parse_bytes("1073741824").value == 1 * GiB);
  CHECK(parse_bytes("18446744073709551615").value == UINT64_MAX);
  CHECK(parse_bytes("512KiB").value == 512 * KiB);
  CHECK(parse_bytes("64MiB").value == 64 * MiB);
  CHECK(parse_bytes("8GiB").value == 8 * GiB);
  CHECK(parse_bytes("2TiB").value == 2 * TiB);
  CHECK(parse_bytes("100B").value == 100);
  CHECK(parse_bytes("2G").value == 2 * GiB);
  CHECK(parse_bytes("3k").value == 3 * KiB);
  CHECK(parse_bytes("7m").value == 7 * MiB);
  CHECK(parse_bytes("1T").value == 1 * TiB);
  CHECK(parse_bytes("8gib").value == 8 * GiB);
  CHECK(parse_bytes("8 GiB").value == 8 * GiB);
  CHECK(parse_bytes("  8GiB\n").value == 8 * GiB);
  CHECK(parse_bytes("007").value == 7);
}

TEST_CASE("bytes: fractions need a unit and are floored") {
  CHECK(parse_bytes("1.5GiB").value == 3 * GiB / 2);
  CHECK(parse_bytes("2.4GiB").value == 2576980377);  // the seed's load spike
  CHECK(parse_bytes("0.5KiB").value == 512);
  CHECK(parse_bytes(".5KiB").value == 512);
  CHECK(parse_bytes("0.001KiB").value == 1);  // 1.024 floored
  CHECK(parse_bytes("1.999999999TiB").value == 2 * TiB - 1100);  // 9 decimals, exact floor
  CHECK(parse_bytes("1.5").error == parse_errc::fraction_needs_unit);
  CHECK(parse_bytes("1.5B").error == parse_errc::fraction_needs_unit);
  CHECK(parse_bytes("1.0000000001GiB").error == parse_errc::too_many_decimals);
}

TEST_CASE("bytes: every refusal names what is wrong") {
  CHECK(parse_bytes("").error == parse_errc::empty);
  CHECK(parse_bytes("   ").error == parse_errc::empty);
  CHECK(parse_bytes("-1").error == parse_errc::negative);
  CHECK(parse_bytes("-1GiB").error == parse_errc::negative);
  CHECK(parse_bytes("+1").error == parse_errc::not_a_number);
  CHECK(parse_bytes("abc").error == parse_errc::not_a_number);
  CHECK(parse_bytes("GiB").error == parse_errc::not_a_number);
  CHECK(parse_bytes(".").error == parse_errc::not_a_number);
  CHECK(parse_bytes("1.").error == parse_errc::not_a_number);
  CHECK(parse_bytes("1.GiB").error == parse_errc::not_a_number);
  CHECK(parse_bytes("12x").error == parse_errc::bad_unit);
  CHECK(parse_bytes("1e9").error == parse_errc::bad_unit);
  CHECK(parse_bytes("1,5GiB").error == parse_errc::bad_unit);
  CHECK(parse_bytes("1GiBs").error == parse_errc::bad_unit);
  CHECK(parse_bytes("1 2").error == parse_errc::not_a_number);
  // One space may stand between the number and its unit; a tab, a newline or a second space may not.
  CHECK(parse_bytes("8\nGiB").error == parse_errc::bad_unit);
  CHECK(parse_bytes("8\tGiB").error == parse_errc::bad_unit);
  CHECK(parse_bytes("8  GiB").error == parse_errc::bad_unit);
  CHECK(parse_bytes("8\r\nGiB").error == parse_errc::bad_unit);
  CHECK(parse_bytes("8GB").error == parse_errc::ambiguous_unit);
  CHECK(parse_bytes("8kb").error == parse_errc::ambiguous_unit);
  CHECK(parse_bytes("18446744073709551616").error == parse_errc::out_of_range);
  CHECK(parse_bytes("99999999999999999999999").error == parse_errc::out_of_range);
  CHECK(parse_bytes("16777216TiB").error == parse_errc::out_of_range);
  CHECK(parse_bytes(std::string("1\0GiB", 5)).error == parse_errc::bad_unit);
  for (auto e : {parse_errc::empty, parse_errc::negative, parse_errc::not_a_number, parse_errc::bad_unit,
                 parse_errc::ambiguous_unit, parse_errc::fraction_needs_unit, parse_errc::too_many_decimals,
                 parse_errc::out_of_range, parse_errc::not_a_switch}) {
    CHECK(to_string(e).size() > 5);
  }
}

TEST_CASE("bytes: the largest values just fit") {
  CHECK(parse_bytes("16777215TiB").value == 16777215ULL * TiB);
  CHECK(parse_bytes("17179869183GiB").value == 17179869183ULL * GiB);
  CHECK(parse_bytes("16777215.999999999TiB").value == UINT64_MAX - 1099);
  CHECK(parse_bytes("16777216TiB").error == parse_errc::out_of_range);
}

TEST_CASE("percent to basis points") {
  CHECK(parse_percent_bp("15").value == 1500);
  CHECK(parse_percent_bp("15.5").value == 1550);
  CHECK(parse_percent_bp("15.25").value == 1525);
  CHECK(parse_percent_bp("0.25%").value == 25);
  CHECK(parse_percent_bp(" 100 % ").value == 10000);
  CHECK(parse_percent_bp("0").value == 0);
  CHECK(parse_percent_bp(".5").value == 50);
  CHECK(parse_percent_bp("100.01").error == parse_errc::out_of_range);
  CHECK(parse_percent_bp("101").error == parse_errc::out_of_range);
  CHECK(parse_percent_bp("99999999999999999999999").error == parse_errc::out_of_range);
  CHECK(parse_percent_bp("-5").error == parse_errc::negative);
  CHECK(parse_percent_bp("15.125").error == parse_errc::too_many_decimals);
  CHECK(parse_percent_bp("abc").error == parse_errc::not_a_number);
  CHECK(parse_percent_bp("15x").error == parse_errc::not_a_number);
  CHECK(parse_percent_bp("1e1").error == parse_errc::not_a_number);
  CHECK(parse_percent_bp("%").error == parse_errc::not_a_number);
  CHECK(parse_percent_bp("").error == parse_errc::empty);
  CHECK(parse_percent_bp("nan").error == parse_errc::not_a_number);
}

TEST_CASE("switches") {
  for (const char* t : {"1", "true", "TRUE", "yes", "on", "On"}) CHECK(parse_switch(t).value);
  for (const char* f : {"0", "false", "no", "off", "OFF"}) {
    CHECK(parse_switch(f).ok());
    CHECK_FALSE(parse_switch(f).value);
  }
  CHECK(parse_switch("").error == parse_errc::empty);
  CHECK(parse_switch("2").error == parse_errc::not_a_switch);
  CHECK(parse_switch("enable").error == parse_errc::not_a_switch);
}

TEST_CASE("printable: control bytes and bytes that are not UTF-8 are escaped, the rest passes") {
  using pnmem::detail::printable;
  CHECK(printable("8GiB") == "8GiB");
  CHECK(printable("8\nGiB\t\r") == "8\\nGiB\\t\\r");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("\x7f") == "\\x7f");
  CHECK(printable("Caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "Caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // é € 😀
  CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b2J");  // U+009B, a terminal's CSI
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xc3") == "\\xc3");                  // cut short
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  CHECK(printable("a\\nb") == "a\\nb");                // a backslash passes: escaping twice changes nothing
  CHECK(printable(printable("\x1b\n")) == printable("\x1b\n"));
}
