# Helpers that keep each directory's CMakeLists.txt to a few lines.
#
#   mc_add_library(name STATIC|SHARED SOURCES ... [LIBS ...])
#   mc_add_executable(name SOURCES ... [LIBS ...])      daemons and tools
#   mc_add_unit_test(name SOURCES ... [LIBS ...] [TIMEOUT s] [ONLY pass])
#   mc_add_fuzzer(name SOURCE f.c CORPUS dir [LIBS ...])
#   mc_add_pytest(name FILE path [TIMEOUT s] [ONLY pass])
#
# ONLY plain|asan: a slow test runs in one of the two ctest passes of
# scripts/test.sh only (the gcc build, or the ASan+UBSan build); the other
# build lists it as disabled (ctest prints "Not Run (Disabled)"). TSan
# builds run it either way. docs/testing.md says which tests and why.

set(MC_SANITIZER_REPORT_REGEX
    "ERROR: (Address|Leak|Thread)Sanitizer|runtime error: |WARNING: ThreadSanitizer")

function(_mc_target_defaults t)
  target_compile_options(${t} PRIVATE ${MC_WARNING_FLAGS})
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/include
                                          ${CMAKE_SOURCE_DIR}/common
                                          ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(${t} PRIVATE _GNU_SOURCE)
  target_compile_options(${t} PRIVATE
    -include ${CMAKE_SOURCE_DIR}/common/mc_banned.h)
endfunction()

function(mc_add_library name kind)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;PUBLIC_LIBS" ${ARGN})
  add_library(${name} ${kind} ${A_SOURCES})
  _mc_target_defaults(${name})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
                                           C_VISIBILITY_PRESET hidden)
  target_include_directories(${name} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}
                                               ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE ${A_LIBS} PUBLIC ${A_PUBLIC_LIBS})
endfunction()

function(mc_add_executable name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  _mc_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS})
endfunction()

# This build's pass for ONLY: asan (ASan), tsan, or plain.
if(MC_SANITIZE MATCHES "address")
  set(MC_TEST_PASS asan)
elseif(MC_SANITIZE MATCHES "thread")
  set(MC_TEST_PASS tsan)
else()
  set(MC_TEST_PASS plain)
endif()

function(_mc_test_only test only)
  if(NOT only)
    return()
  endif()
  if(NOT only MATCHES "^(plain|asan)$")
    message(FATAL_ERROR "${test}: ONLY must be plain or asan, not '${only}'")
  endif()
  set_property(TEST ${test} APPEND PROPERTY LABELS only-${only})
  if(NOT MC_TEST_PASS STREQUAL only AND NOT MC_TEST_PASS STREQUAL tsan)
    set_tests_properties(${test} PROPERTIES DISABLED TRUE)
  endif()
endfunction()

function(mc_scaled_timeout out secs)
  math(EXPR t "${secs} * ${MC_TEST_TIMEOUT_SCALE}")
  set(${out} ${t} PARENT_SCOPE)
endfunction()

function(mc_add_unit_test name)
  cmake_parse_arguments(A "" "TIMEOUT;ONLY" "SOURCES;LIBS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 60)
  endif()
  add_executable(${name} ${A_SOURCES})
  _mc_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS} PkgConfig::CRITERION)
  mc_scaled_timeout(t ${A_TIMEOUT})
  # Criterion forks each test; --timeout bounds every single test case too.
  add_test(NAME unit.${name} COMMAND ${name} --timeout 30 -j1)
  # Criterion forks each test and ignores how the child exits after it
  # reported, so a sanitizer report in a child is caught from the output.
  set_tests_properties(unit.${name} PROPERTIES TIMEOUT ${t} LABELS unit
    FAIL_REGULAR_EXPRESSION "${MC_SANITIZER_REPORT_REGEX}")
  _mc_test_only(unit.${name} "${A_ONLY}")
endfunction()

# A fuzz target is always built: as a libFuzzer binary when MC_FUZZ is on,
# otherwise linked with a replay main so ctest runs the committed corpus
# through it in every build (sanitized or not).
function(mc_add_fuzzer name)
  cmake_parse_arguments(A "" "SOURCE;CORPUS" "LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCE})
  _mc_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS})
  if(MC_FUZZ)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set(replay_args -runs=0)
  else()
    target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c)
    set(replay_args)
  endif()
  mc_scaled_timeout(t 120)
  add_test(NAME fuzz_replay.${name}
           COMMAND ${name} ${replay_args} ${A_CORPUS})
  set_tests_properties(fuzz_replay.${name} PROPERTIES TIMEOUT ${t} LABELS fuzz
    FAIL_REGULAR_EXPRESSION "${MC_SANITIZER_REPORT_REGEX}")
  set_property(GLOBAL APPEND PROPERTY MC_FUZZERS "${name}=${A_CORPUS}")
endfunction()

# PRELOAD_ASAN: in an ASan build, python3 itself runs with the shared ASan
# runtime preloaded (and leak checking off: CPython keeps memory at exit),
# so it can load the instrumented libmooncake; the tests' conftest drops
# both variables before starting daemons, which carry their own runtime.
function(mc_add_pytest name)
  cmake_parse_arguments(A "PRELOAD_ASAN" "FILE;TIMEOUT;ONLY" "" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  mc_scaled_timeout(t ${A_TIMEOUT})
  set_property(GLOBAL APPEND PROPERTY MC_PYTEST_FILES
               ${CMAKE_CURRENT_SOURCE_DIR}/${A_FILE})
  add_test(NAME integration.${name}
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider
                   ${CMAKE_CURRENT_SOURCE_DIR}/${A_FILE})
  set(env "MC_BUILD_DIR=${CMAKE_BINARY_DIR};MC_SOURCE_DIR=${CMAKE_SOURCE_DIR};MC_TEST_TIMEOUT_SCALE=${MC_TEST_TIMEOUT_SCALE}")
  if(A_PRELOAD_ASAN AND MC_ASAN_RUNTIME)
    list(APPEND env "LD_PRELOAD=${MC_ASAN_RUNTIME}"
         "ASAN_OPTIONS=detect_leaks=0" "MC_PRELOADED_ASAN=1")
  endif()
  set_tests_properties(integration.${name} PROPERTIES
    TIMEOUT ${t} LABELS integration ENVIRONMENT "${env}")
  _mc_test_only(integration.${name} "${A_ONLY}")
endfunction()

# Every tests/integration/*/test_*.py file is registered with
# mc_add_pytest (a file left out never runs in CI: it happened). Call
# after the last mc_add_pytest.
function(mc_check_pytests_registered dir)
  get_property(have GLOBAL PROPERTY MC_PYTEST_FILES)
  file(GLOB files ${dir}/*/test_*.py)
  foreach(f ${files})
    if(NOT f IN_LIST have)
      message(FATAL_ERROR "${f} is not registered: add an mc_add_pytest "
                          "for it in ${dir}/CMakeLists.txt")
    endif()
  endforeach()
endfunction()
