// integration/c_boundary.cpp - how the C ABI's boundary reports what it caught (c_boundary.hpp).
#include "c_boundary.hpp"

#include <exception>
#include <new>
#include <string>
#include <system_error>

#include "c_global_state.hpp"

namespace pnmem::c_abi {

void report_current_exception(const char* entry) noexcept {
  try {
    std::string what;
    try {
      throw;
    } catch (const std::bad_alloc&) {
      what = "out of memory";
    } catch (const std::system_error& e) {
      what = e.what();  // names the failed call and the errno text
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "unknown exception";
    }
    state().log(std::string("pnmem: ") + entry + ": " + what);
  } catch (...) {
    // Out of memory while building the line, or the sink threw again: the
    // caller still gets the error value, which is what it acts on.
  }
}

}  // namespace pnmem::c_abi
