# Third-party libraries. Required ones fail the configure with the Debian
# package to install; optional features follow MC_WITH_<FEATURE>.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

function(mc_require_pkg target module debian_pkg)
  pkg_check_modules(${target} IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${target}_FOUND)
    message(FATAL_ERROR "${module} not found: install the Debian package "
                        "${debian_pkg} (scripts/setup.sh installs everything)")
  endif()
endfunction()

mc_require_pkg(MHD libmicrohttpd libmicrohttpd-dev)
mc_require_pkg(JANSSON jansson libjansson-dev)
mc_require_pkg(CURL libcurl libcurl4-openssl-dev)
mc_require_pkg(SQLITE sqlite3 libsqlite3-dev)
mc_require_pkg(SODIUM libsodium libsodium-dev)
find_library(NUMA_LIBRARY numa)
find_path(NUMA_INCLUDE numa.h)
if(NOT NUMA_LIBRARY OR NOT NUMA_INCLUDE)
  message(FATAL_ERROR "libnuma not found: install the Debian package "
                      "libnuma-dev (scripts/setup.sh installs everything)")
endif()
if(BUILD_TESTING OR NOT DEFINED BUILD_TESTING)
  mc_require_pkg(CRITERION criterion libcriterion-dev)
endif()

# Optional features. AUTO turns a feature off with a message when its package
# is missing; ON makes the package mandatory.
function(mc_feature feat found hint)
  if(MC_WITH_${feat} STREQUAL "OFF")
    set(MC_HAVE_${feat} OFF PARENT_SCOPE)
    set(MC_FEATURE_${feat}_WHY "disabled by MC_WITH_${feat}=OFF" PARENT_SCOPE)
  elseif(found)
    set(MC_HAVE_${feat} ON PARENT_SCOPE)
    set(MC_FEATURE_${feat}_WHY "found" PARENT_SCOPE)
  elseif(MC_WITH_${feat} STREQUAL "ON")
    message(FATAL_ERROR "MC_WITH_${feat}=ON but ${hint}")
  else()
    message(STATUS "${feat} support off: ${hint}")
    set(MC_HAVE_${feat} OFF PARENT_SCOPE)
    set(MC_FEATURE_${feat}_WHY "not found (${hint})" PARENT_SCOPE)
  endif()
endfunction()

if(NOT MC_WITH_FUSE STREQUAL "OFF")
  pkg_check_modules(FUSE3 IMPORTED_TARGET GLOBAL fuse3>=3.10)
endif()
mc_feature(FUSE "${FUSE3_FOUND}" "libfuse3 >= 3.10 missing (Debian: libfuse3-dev fuse3)")

if(NOT MC_WITH_RDMA STREQUAL "OFF")
  pkg_check_modules(IBVERBS IMPORTED_TARGET GLOBAL libibverbs)
endif()
mc_feature(RDMA "${IBVERBS_FOUND}" "libibverbs missing (Debian: libibverbs-dev)")

# The CUDA toolkit is not a Debian package here: it is used when installed,
# never installed by our scripts.
if(NOT MC_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
endif()
mc_feature(CUDA "${CUDAToolkit_FOUND}" "CUDA toolkit not installed (optional; never installed by scripts/setup.sh)")

# What this build can do, for --version and for code that needs to know.
set(MC_BUILD_FEATURES "")
foreach(feat FUSE RDMA CUDA)
  if(MC_HAVE_${feat})
    string(TOLOWER ${feat} f)
    string(APPEND MC_BUILD_FEATURES " +${f}")
  else()
    string(TOLOWER ${feat} f)
    string(APPEND MC_BUILD_FEATURES " -${f}")
  endif()
endforeach()
string(STRIP "${MC_BUILD_FEATURES}" MC_BUILD_FEATURES)
configure_file(${CMAKE_SOURCE_DIR}/cmake/mc_build_config.h.in
               ${CMAKE_BINARY_DIR}/generated/mc_build_config.h)

function(mc_print_summary)
  message(STATUS "mooncakefs ${PROJECT_VERSION} configuration:")
  foreach(feat FUSE RDMA CUDA)
    message(STATUS "  ${feat}: ${MC_HAVE_${feat}} (${MC_FEATURE_${feat}_WHY})")
  endforeach()
  message(STATUS "  sanitizers: '${MC_SANITIZE}', fuzz: ${MC_FUZZ}, werror: ${MC_WERROR}")
endfunction()
