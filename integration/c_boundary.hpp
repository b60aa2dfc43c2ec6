// integration/c_boundary.hpp - the one way into the C++ library from an extern "C" function.
//
// Every entry point is `return boundary(__func__, error_value, {required pointers}, [&] { ... });`
// (or the overload without an error value, for a void function):
//   - a required pointer that is NULL returns error_value before the body runs;
//   - whatever the body throws (std::bad_alloc, std::system_error from a mutex or
//     a thread, an exception from a C++ log sink, anything) is caught, logged as
//     "pnmem: <function>: <what>" through the log sink, and returns error_value.
// Nothing unwinds into C: an exception crossing an extern "C" frame is undefined
// behaviour, or std::terminate in a C caller. Arguments that are not pointers are
// checked by the body with c_conversions.hpp's *_from_c, which return nullopt for
// a value out of range; the body then returns error_value itself.
// Internal to libpnmem_c.
#pragma once

#include <initializer_list>
#include <type_traits>

namespace pnmem::c_abi {

// Logs the exception being handled (call only from a catch block). Never throws:
// a failure to log, or a sink that throws again, is dropped.
void report_current_exception(const char* entry) noexcept;

inline bool any_null(std::initializer_list<const void*> required) noexcept {
  for (const void* p : required) {
    if (p == nullptr) return true;
  }
  return false;
}

template <class R, class Body>
[[nodiscard]] R boundary(const char* entry, R error_value, std::initializer_list<const void*> required,
                         Body&& body) noexcept {
  static_assert(std::is_same_v<std::invoke_result_t<Body&>, R>, "the body returns the entry point's type");
  static_assert(std::is_nothrow_copy_constructible_v<R>);
  if (any_null(required)) return error_value;
  try {
    return body();
  } catch (...) {
    report_current_exception(entry);
  }
  return error_value;
}

template <class Body>
void boundary(const char* entry, std::initializer_list<const void*> required, Body&& body) noexcept {
  static_assert(std::is_void_v<std::invoke_result_t<Body&>>, "a void entry point's body returns nothing");
  if (any_null(required)) return;
  try {
    body();
  } catch (...) {
    report_current_exception(entry);
  }
}

}  // namespace pnmem::c_abi
