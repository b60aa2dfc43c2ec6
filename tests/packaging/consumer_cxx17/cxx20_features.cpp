// Compiled into headers-standalone (the C++20 build): the C++20 build must take every C++20
// branch of the headers (detail/cxx.hpp). If a compiler or library the project supports stopped
// defining a feature-test macro, the headers would silently switch to their C++17 spelling
// (without stop_token cancellation, with trait-checked samplers); this fails instead.
#include <pnmem/detail/cxx.hpp>

#if __cplusplus >= 202002L && ((defined(__clang__) && __clang_major__ >= 14) || \
                               (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
static_assert(PNMEM_HAS_CONCEPTS, "C++20 build without concepts");
static_assert(PNMEM_HAS_DEFAULTED_COMPARISONS, "C++20 build without defaulted ==");
static_assert(PNMEM_HAS_BIT_CAST, "C++20 build without std::bit_cast");
static_assert(PNMEM_HAS_IS_CONSTANT_EVALUATED, "C++20 build without std::is_constant_evaluated");
static_assert(PNMEM_HAS_SPAN, "C++20 build without std::span");
static_assert(PNMEM_HAS_STOP_TOKEN, "C++20 build without std::stop_token");
static_assert(PNMEM_HAS_ERASE_IF, "C++20 build without std::erase_if");
static_assert(PNMEM_HAS_TEMPLATE_LAMBDAS, "C++20 build without template lambdas");
static_assert(PNMEM_HAS_LIKELY_ATTRIBUTES, "C++20 build without [[likely]] / [[unlikely]]");
#endif
