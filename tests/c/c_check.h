/* tests/c/c_check.h - the C tests' one assertion: CHECK(cond) reports the failed
 * condition with its line and counts it in `failures`; main returns failures != 0.
 * `failures` is atomic, so threads may CHECK too (test_c_threads.c). The C++ tests of
 * the C ABI (test_c_exact.cpp, test_c_throw.cpp) include it as well.
 * Test code only; one translation unit per program. */
#ifndef PNMEM_TESTS_C_CHECK_H
#define PNMEM_TESTS_C_CHECK_H

#include <stdio.h>

#ifdef __cplusplus
#include <atomic>
static std::atomic<int> failures{0};
#else
#include <stdatomic.h>
static atomic_int failures = 0;
#endif

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                               \
    }                                                                           \
  } while (0)

#endif
