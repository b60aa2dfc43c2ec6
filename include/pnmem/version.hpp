// pnmem/version.hpp - the library's version.
#pragma once

#define PNMEM_VERSION_MAJOR 0
#define PNMEM_VERSION_MINOR 1
#define PNMEM_VERSION_PATCH 0

namespace pnmem {
inline constexpr const char* version_string = "0.1.0";
}
