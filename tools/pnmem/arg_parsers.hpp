// tools/pnmem/arg_parsers.hpp - option text to values, or a usage_error naming the flag.
//
// Bytes and percents go through the library's parsers (pnmem/parse.hpp), so
// `--host-avail 2GiB` means what `PN_HOST_RESERVE_BYTES=2GiB` means. Every
// failure reads `<flag>: "<text>": <what is wrong>`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/cost_model.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/policy.hpp"

namespace pnmem_cli {

// `<flag>: "<text>": <problem>`: the shape of every argument diagnostic.
std::string describe_bad_value(std::string_view flag, std::string_view text, std::string_view problem);

// A byte size: "1073741824", "512KiB", "1.5GiB".
std::uint64_t parse_bytes_arg(std::string_view flag, std::string_view text);

// A percentage 0..100 with at most two decimals ("3.25", "15%"), in basis points.
pnmem::basis_points parse_percent_arg(std::string_view flag, std::string_view text);

// A PSI avg10 percentage as the kernel prints it ("3.25"), as a double for mem_state.
double parse_psi_arg(std::string_view flag, std::string_view text);

// A plain unsigned decimal integer in [min_value, INT_MAX] (min_value >= 0).
int parse_int_arg(std::string_view flag, std::string_view text, int min_value);

// Comma-separated plain integers, each in [min_value, INT_MAX]; at most max_count of them, none empty.
std::vector<int> parse_int_list_arg(std::string_view flag, std::string_view text, int min_value, std::size_t max_count);

// ok / watch / tight / critical, any case.
pnmem::mem_level parse_level_arg(std::string_view flag, std::string_view text);

// A plain unsigned decimal integer in [min_value, 2^64-1] (token counts: no units).
std::uint64_t parse_count_arg(std::string_view flag, std::string_view text, std::uint64_t min_value = 0);

// A KV format: q4, fp32, f16, bf16, fp8, q8_0, q4_0, or an alias pnmem::parse_kv_format knows
// (f32 = fp32, float16/half = f16, bfloat16 = bf16, fp8_e4m3/fp8_e5m2 = fp8), any case.
pnmem::kv_format parse_kv_arg(std::string_view flag, std::string_view text);

}  // namespace pnmem_cli
