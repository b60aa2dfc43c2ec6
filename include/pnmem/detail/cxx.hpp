// pnmem/detail/cxx.hpp - which C++ the including translation unit is: the one place that asks.
//
// pnmem's own build, its tests and its benchmarks are C++20. The headers an engine includes for
// decisions, the watcher, the engine layer and the Linux adapter's public headers also compile as
// C++17 (llama.cpp pins C++17): every C++20 feature they use is behind one of the macros below,
// with a C++17 spelling beside it. Under C++20 (g++ >= 12, clang++ >= 14 with libstdc++ 12, what
// the project builds with) every macro is 1 and the C++20 spelling is the code that compiles; the
// C++17 one is only ever seen by a C++17 translation unit. Requires GCC >= 11 or Clang >= 9 in
// C++17 (__builtin_bit_cast, __builtin_is_constant_evaluated).
//
// What a C++17 translation unit does not get:
//   concepts            host_sampler, event_sampler, seqlock_layout, seqlock_shaped_layout are
//                       constexpr bool variable templates; the templates they constrain check
//                       them with static_assert (same answers, a later error message)
//   defaulted ==        the structs' == and != compare member by member (detail/equality.hpp)
//   std::stop_token     backpressure_gate::acquire / acquire_for take no stop token: a C++17
//                       acquirer cannot be cancelled (deadline, CRITICAL and queue_full still apply)
//   std::span           calibration takes (pointer, count) where C++20 takes a span
//   class-type NTTPs    a policy or model_cost as a template argument (PNMEM_HAS_CLASS_NTTP)
#pragma once

#if defined(__has_include)
#if __has_include(<version>)
#include <version>  // the library's feature-test macros (C++20; libstdc++ >= 9 has it in C++17 too)
#endif
#endif

// Concepts, and <concepts>' std::same_as / std::convertible_to. (Clang 14 says 201907.)
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L && defined(__cpp_lib_concepts) && __cpp_lib_concepts >= 202002L
#define PNMEM_HAS_CONCEPTS 1
#else
#define PNMEM_HAS_CONCEPTS 0
#endif

// `friend constexpr bool operator==(const T&, const T&) = default;`
#if defined(__cpp_impl_three_way_comparison) && __cpp_impl_three_way_comparison >= 201907L
#define PNMEM_HAS_DEFAULTED_COMPARISONS 1
#else
#define PNMEM_HAS_DEFAULTED_COMPARISONS 0
#endif

// std::bit_cast (<bit>); C++17: __builtin_bit_cast, what libstdc++'s std::bit_cast calls.
#if defined(__cpp_lib_bit_cast) && __cpp_lib_bit_cast >= 201806L
#define PNMEM_HAS_BIT_CAST 1
#else
#define PNMEM_HAS_BIT_CAST 0
#endif

// std::is_constant_evaluated (<type_traits>); C++17: __builtin_is_constant_evaluated (GCC >= 9,
// Clang >= 9), what the library's function returns.
#if defined(__cpp_lib_is_constant_evaluated) && __cpp_lib_is_constant_evaluated >= 201811L
#define PNMEM_HAS_IS_CONSTANT_EVALUATED 1
#else
#define PNMEM_HAS_IS_CONSTANT_EVALUATED 0
#endif

// std::span (<span>).
#if defined(__cpp_lib_span) && __cpp_lib_span >= 202002L
#define PNMEM_HAS_SPAN 1
#else
#define PNMEM_HAS_SPAN 0
#endif

// std::stop_token and std::stop_callback (<stop_token>).
#if defined(__cpp_lib_jthread) && __cpp_lib_jthread >= 201911L
#define PNMEM_HAS_STOP_TOKEN 1
#else
#define PNMEM_HAS_STOP_TOKEN 0
#endif

// std::erase_if over a container; C++17: c.erase(std::remove_if(...), c.end()), its definition.
#if defined(__cpp_lib_erase_if) && __cpp_lib_erase_if >= 202002L
#define PNMEM_HAS_ERASE_IF 1
#else
#define PNMEM_HAS_ERASE_IF 0
#endif

// Lambdas with a template parameter list, `[&]<std::size_t... I>(std::index_sequence<I...>) {...}`;
// C++17: a member function template over the index_sequence.
#if defined(__cpp_generic_lambdas) && __cpp_generic_lambdas >= 201707L
#define PNMEM_HAS_TEMPLATE_LAMBDAS 1
#else
#define PNMEM_HAS_TEMPLATE_LAMBDAS 0
#endif

// [[likely]] / [[unlikely]] on a statement (GCC accepts them in C++17 silently, Clang warns);
// C++17: __builtin_expect on the condition.
#if __cplusplus >= 202002L && defined(__has_cpp_attribute)
#if __has_cpp_attribute(likely) >= 201803L && __has_cpp_attribute(unlikely) >= 201803L
#define PNMEM_HAS_LIKELY_ATTRIBUTES 1
#endif
#endif
#ifndef PNMEM_HAS_LIKELY_ATTRIBUTES
#define PNMEM_HAS_LIKELY_ATTRIBUTES 0
#endif

// A class type (policy, model_cost: structural types) as a non-type template argument: an engine's
// or a test's `template <pnmem::policy P>`, and admit_request<M> (admission.hpp). Clang 12-17 accept
// such arguments in C++20 but still report 201411 (they lack only the class-type NTTPs that no pnmem
// type needs: floating point and unions), so in C++20 mode Clang counts as having them.
#if (defined(__cpp_nontype_template_args) && __cpp_nontype_template_args >= 201911L) || \
    (defined(__clang__) && !defined(__CUDACC__) && __clang_major__ >= 12 && __cplusplus > 201703L)
#define PNMEM_HAS_CLASS_NTTP 1
#else
#define PNMEM_HAS_CLASS_NTTP 0
#endif

// Exceptions: many engines build with -fno-exceptions. The headers that would throw or catch say what
// they do without them (watcher.hpp: a thread that cannot start aborts, as std::thread does there;
// engine/host_ledger.hpp: a ledger with 2^32 outstanding reservations aborts).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define PNMEM_HAS_EXCEPTIONS 1
#else
#define PNMEM_HAS_EXCEPTIONS 0
#endif
