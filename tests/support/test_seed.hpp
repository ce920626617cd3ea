// tests/support/test_seed.hpp — reproducible randomness for tests.
//
//   std::mt19937_64 rng(outcore::test::seed());   // prints "seed: N" once per test
//
// OUTCORE_TEST_SEED=N replays a run; otherwise each test draws a fresh seed.
#pragma once

#include <cstdint>
#include <random>

namespace outcore::test {

/// The seed for the current test: OUTCORE_TEST_SEED if set, else random. The value
/// is recorded as a test property and printed so a failure can be replayed.
[[nodiscard]] std::uint64_t seed();

/// Number of iterations scaled by OUTCORE_TEST_SCALE (default 1.0): lets sanitizer
/// presets run shorter and soaks longer without changing the test.
[[nodiscard]] std::uint64_t scaled(std::uint64_t iterations);

}  // namespace outcore::test
