# Build options. Feature switches take AUTO (use when found), ON (required) or OFF.
set(MC_FEATURE_VALUES AUTO ON OFF)
foreach(feat RDMA CUDA FUSE)
  set(MC_WITH_${feat} AUTO CACHE STRING "Build ${feat} support: AUTO, ON or OFF")
  set_property(CACHE MC_WITH_${feat} PROPERTY STRINGS ${MC_FEATURE_VALUES})
  if(NOT MC_WITH_${feat} IN_LIST MC_FEATURE_VALUES)
    message(FATAL_ERROR "MC_WITH_${feat}=${MC_WITH_${feat}}: expected AUTO, ON or OFF")
  endif()
endforeach()

option(MC_WERROR "Treat compiler warnings as errors" OFF)
set(MC_SANITIZE "" CACHE STRING
    "Sanitizers: empty, address,undefined or thread")
option(MC_FUZZ "Build libFuzzer targets (needs clang)" OFF)
set(MC_TEST_TIMEOUT_SCALE 1 CACHE STRING
    "Multiplier for every test's timeout (slow sanitizer builds)")
