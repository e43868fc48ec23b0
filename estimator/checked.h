// Checked arithmetic for byte, element and count products: a result is right or refused, never
// wrapped. validate() bounds every input so that the estimator's own formulas stay far inside
// int64 (2^62 for the largest tensor), and these helpers guard the places where inputs combine
// beyond what one bound covers (parallel degrees, batch x accumulation x data parallel, phase
// sums, the planner's global batch). Overflow is an InputError naming the quantity, with a hint:
// the only way to get there is an input out of any physical range.
#pragma once

#include <cstdint>
#include <string>

#include "estimator/error.h"

namespace memplan {

[[noreturn]] void too_large(const char* what);

// a * b, or InputError "<what> is too large to count" when it leaves int64.
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) too_large(what);
  return r;
}
inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) too_large(what);
  return r;
}
// a * b clamped to [INT64_MIN, INT64_MAX]: for comparisons ("more than the device holds") where a
// saturated value gives the same answer.
inline int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}
inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return a < 0 ? INT64_MIN : INT64_MAX;
}

}  // namespace memplan
