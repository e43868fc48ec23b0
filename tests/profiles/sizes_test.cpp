// parse_size: the spellings users write for memory sizes (binary and decimal units, plain
// bytes), and what must be refused rather than guessed.
#include <doctest/doctest.h>

#include "profiles/profiles.h"

using memplan::profiles::parse_size;

TEST_CASE("sizes: binary and decimal units, bytes, spaces and case") {
  const struct {
    const char* text;
    int64_t bytes;
  } table[] = {
      {"12GiB", 12LL << 30},         {"12 GiB", 12LL << 30},         {"12gib", 12LL << 30},
      {"12G", 12LL << 30},           {"12g", 12LL << 30},            {"12GB", 12'000'000'000},
      {"12gb", 12'000'000'000},      {"24GB", 24'000'000'000},       {"512MiB", 512LL << 20},
      {"512MB", 512'000'000},        {"512M", 512LL << 20},          {"1.5TiB", 3LL << 39},
      {"2TB", 2'000'000'000'000},    {"64KiB", 64LL << 10},          {"12884901888", 12'884'901'888},
      {" 80G ", 80LL << 30},         {"0.5GiB", 1LL << 29},          {"100B", 100},
      {"4611686018427387904", 1LL << 62},
  };
  for (const auto& row : table) {
    CAPTURE(row.text);
    REQUIRE(parse_size(row.text).has_value());
    CHECK(*parse_size(row.text) == row.bytes);
  }
}

TEST_CASE("sizes: negatives, garbage, fractional bytes and overflow are not sizes") {
  for (const char* bad : {"", " ", "-12GiB", "+12GiB", "12 gigs", "GiB", "12.GiB", ".5GiB", "1.5", "12GiBs", "twelve",
                          "12 G i B", "1e9", "4611686018427387905", "5000000TiB", "99999999999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_size(bad).has_value());
  }
}
