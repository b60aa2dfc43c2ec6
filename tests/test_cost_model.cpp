// The seed's KV constants and the activation-peak table.
#include "pnmem/cost_model.hpp"

#include <doctest/doctest.h>

#include <climits>

using namespace pnmem;

TEST_CASE("KV bytes per token are the seed's") {
  CHECK(kv_bytes_per_token(kv_format::q4) == 5898);
  CHECK(kv_bytes_per_token(kv_format::fp32) == 40960);
  // fp32: 10 attention layers x (K+V) x 2 KV heads x 256 dims x 4 B, the shape the anchors assume.
  CHECK(kv_bytes_per_token_fp32 == 10ULL * 2 * 2 * 256 * 4);
  CHECK(to_string(kv_format::q4) == "q4");
  CHECK(to_string(kv_format::fp32) == "fp32");
}

TEST_CASE("six anchors, each exactly the documented model") {
  REQUIRE(activation_anchors.size() == 6);
  for (const auto& a : activation_anchors) {
    CAPTURE(a.tokens);
    CHECK(a.peak_bytes == activation_peak_model_bytes(a.tokens));
    CHECK(activation_peak_bytes(static_cast<int>(a.tokens)) == a.peak_bytes);
  }
  CHECK(activation_peak_bytes(0) == 256 * MiB);
  CHECK(activation_peak_bytes(4096) == 3 * GiB / 2);
}

TEST_CASE("linear interpolation between anchors, rounded up") {
  // Half-way between 0 (256 MiB) and 1024 (384 MiB).
  CHECK(activation_peak_bytes(512) == 320 * MiB);
  // Half-way between 4096 (1.5 GiB) and 16384 (17.25 GiB).
  CHECK(activation_peak_bytes(10240) == 3 * GiB / 2 + (69 * GiB / 4 - 3 * GiB / 2) / 2);
  // A point whose share does not divide evenly rounds up.
  const std::uint64_t exact_num = (384 * MiB - 256 * MiB) * 1;  // 1 token past 0
  CHECK(activation_peak_bytes(1) == 256 * MiB + (exact_num + 1023) / 1024);
}

TEST_CASE("the table never under-estimates the model and never decreases") {
  std::uint64_t prev = 0;
  for (int n = 0; n <= 300000; n += (n < 5000 ? 1 : 97)) {
    CAPTURE(n);
    const std::uint64_t v = activation_peak_bytes(n);
    CHECK(v >= activation_peak_model_bytes(static_cast<std::uint64_t>(n)));
    CHECK(v >= prev);
    prev = v;
  }
}

TEST_CASE("past the last anchor the peak grows with N^2 and saturates instead of wrapping") {
  const std::uint64_t last = activation_anchors.back().peak_bytes;
  CHECK(activation_peak_bytes(262144 * 2) == last * 4);
  CHECK(activation_peak_bytes(INT_MAX) == UINT64_MAX);
  CHECK(activation_peak_bytes(INT_MAX - 1) <= activation_peak_bytes(INT_MAX));
  CHECK(host_cost_bytes(INT_MAX, kv_format::fp32) == UINT64_MAX);
}

TEST_CASE("negative token counts cost like 0") {
  CHECK(activation_peak_bytes(-1) == activation_peak_bytes(0));
  CHECK(host_cost_bytes(-100, kv_format::fp32) == host_cost_bytes(0, kv_format::fp32));
}

TEST_CASE("host cost = kv x n + peak(n)") {
  for (int n : {0, 1, 100, 1024, 5000, 16384, 100000}) {
    CAPTURE(n);
    const auto un = static_cast<std::uint64_t>(n);
    CHECK(host_cost_bytes(n, kv_format::q4) == 5898 * un + activation_peak_bytes(n));
    CHECK(host_cost_bytes(n, kv_format::fp32) == 40960 * un + activation_peak_bytes(n));
  }
}
