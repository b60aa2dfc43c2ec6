# cmake -DTEMPLATE=<cmake/pnmemConfigVersion.cmake.in> -DWORK_DIR=<dir> -P version_rules.cmake
#
# Checks the compatibility rules of the version file for made-up installed
# versions (the install test can only try the project's current version): the
# template is configured as CMake's configure_file(@ONLY) would, which is what
# Meson's configure_file(format : 'cmake@') does, then loaded the way
# find_package() loads it, once per request.
cmake_minimum_required(VERSION 3.19)

if(NOT TEMPLATE OR NOT WORK_DIR)
  message(FATAL_ERROR "usage: cmake -DTEMPLATE=... -DWORK_DIR=... -P version_rules.cmake")
endif()

set(failures 0)

# check(<installed> <request> <compatible> [<exact>])
#   request: "" (none), "X[.Y[.Z]]", or a range "A...B" / "A...<B"
function(check installed request compatible)
  set(exact FALSE)
  if(ARGC GREATER 3)
    set(exact "${ARGV3}")
  endif()
  set(PNMEM_VERSION "${installed}")
  set(file "${WORK_DIR}/pnmemConfigVersion-${installed}.cmake")
  configure_file("${TEMPLATE}" "${file}" @ONLY)

  # What find_package() defines before it loads a version file.
  foreach(v IN ITEMS "" _MIN _MAX)
    foreach(part IN ITEMS "" _MAJOR _MINOR _PATCH _TWEAK _COUNT)
      unset(PACKAGE_FIND_VERSION${v}${part})
    endforeach()
  endforeach()
  unset(PACKAGE_FIND_VERSION_RANGE)
  unset(PACKAGE_FIND_VERSION_RANGE_MIN)
  unset(PACKAGE_FIND_VERSION_RANGE_MAX)
  set(PACKAGE_FIND_NAME pnmem)
  set(PACKAGE_FIND_VERSION "")
  if(request MATCHES "^([^.]+(\\.[^.]+)*)\\.\\.\\.(<?)(.+)$")
    set(min "${CMAKE_MATCH_1}")
    set(max "${CMAKE_MATCH_4}")
    set(PACKAGE_FIND_VERSION_RANGE "${request}")
    set(PACKAGE_FIND_VERSION_RANGE_MIN INCLUDE)
    if(CMAKE_MATCH_3 STREQUAL "<")
      set(PACKAGE_FIND_VERSION_RANGE_MAX EXCLUDE)
    else()
      set(PACKAGE_FIND_VERSION_RANGE_MAX INCLUDE)
    endif()
    set(PACKAGE_FIND_VERSION_MIN "${min}")
    set(PACKAGE_FIND_VERSION_MAX "${max}")
    set(PACKAGE_FIND_VERSION "${min}")
  elseif(NOT request STREQUAL "")
    set(PACKAGE_FIND_VERSION "${request}")
  endif()
  if(NOT PACKAGE_FIND_VERSION STREQUAL "")
    string(REPLACE "." ";" parts "${PACKAGE_FIND_VERSION}")
    list(LENGTH parts PACKAGE_FIND_VERSION_COUNT)
    list(APPEND parts 0 0 0 0)
    list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
    list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
    list(GET parts 2 PACKAGE_FIND_VERSION_PATCH)
    list(GET parts 3 PACKAGE_FIND_VERSION_TWEAK)
  else()
    set(PACKAGE_FIND_VERSION_COUNT 0)
  endif()

  include("${file}")

  if(NOT PACKAGE_VERSION STREQUAL installed)
    message(SEND_ERROR "installed ${installed}: PACKAGE_VERSION is '${PACKAGE_VERSION}'")
  endif()
  if(PACKAGE_VERSION_UNSUITABLE)
    message(SEND_ERROR "installed ${installed}: PACKAGE_VERSION_UNSUITABLE set (the package is architecture-independent)")
  endif()
  if((PACKAGE_VERSION_COMPATIBLE AND NOT compatible) OR (NOT PACKAGE_VERSION_COMPATIBLE AND compatible)
     OR (PACKAGE_VERSION_EXACT AND NOT exact) OR (NOT PACKAGE_VERSION_EXACT AND exact))
    message(SEND_ERROR "installed ${installed}, request '${request}': compatible=${PACKAGE_VERSION_COMPATIBLE} "
                       "exact=${PACKAGE_VERSION_EXACT}, expected compatible=${compatible} exact=${exact}")
  else()
    message(STATUS "installed ${installed}, request '${request}': compatible=${compatible} exact=${exact}: ok")
  endif()
endfunction()

# No version requested: anything.
check(0.1.0 "" TRUE)
check(2.0.0 "" TRUE)

# 1.x and later: same major, not older than the request.
check(1.2.3 1 TRUE)
check(1.2.3 1.0 TRUE)
check(1.2.3 1.2 TRUE)
check(1.2.3 1.2.3 TRUE TRUE)
check(1.2.3 1.2.4 FALSE)
check(1.2.3 1.3 FALSE)
check(1.2.3 2.0 FALSE)
check(1.2.3 0.9 FALSE)
check(2.0.0 1.9 FALSE)

# 0.x: every minor is its own series.
check(0.1.0 0.1 TRUE)
check(0.1.0 0.1.0 TRUE TRUE)
check(0.1.5 0.1.2 TRUE)
check(0.1.5 0.1.6 FALSE)
check(0.1.0 0.2 FALSE)
check(0.2.0 0.1 FALSE)
check(0.1.0 0.0 FALSE)
check(0.1.0 0 TRUE)
check(0.1.0 1.0 FALSE)

# Ranges: exactly the versions in the range.
check(0.2.0 "0.1...<1.0" TRUE)
check(0.2.0 "0.1...0.2" TRUE)
check(0.2.1 "0.1...0.2" FALSE)
check(0.2.0 "0.1...<0.2" FALSE)
check(0.2.0 "0.3...<1.0" FALSE)
check(1.4.0 "1.0...<2.0" TRUE)
check(2.0.0 "1.0...<2.0" FALSE)
