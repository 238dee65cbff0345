# Sanitizer and fuzzing instrumentation, applied to every target.
if(MC_SANITIZE)
  string(REPLACE "," ";" _mc_san_list "${MC_SANITIZE}")
  foreach(s ${_mc_san_list})
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "MC_SANITIZE: unknown sanitizer '${s}'")
    endif()
  endforeach()
  add_compile_options(-fsanitize=${MC_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${MC_SANITIZE})
  # The shared ASan runtime, for processes that load our libraries but are
  # not built with ASan themselves (python3 running the Python package's
  # tests preloads it: mc_add_pytest PRELOAD_ASAN).
  if("address" IN_LIST _mc_san_list)
    if(CMAKE_C_COMPILER_ID MATCHES "Clang")
      set(_mc_asan_rt_name libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so)
    else()
      set(_mc_asan_rt_name libasan.so)
    endif()
    execute_process(
      COMMAND ${CMAKE_C_COMPILER} -print-file-name=${_mc_asan_rt_name}
      OUTPUT_VARIABLE MC_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT EXISTS "${MC_ASAN_RUNTIME}")
      set(MC_ASAN_RUNTIME "")
    endif()
  endif()
endif()
if(MC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MC_FUZZ=ON needs clang (CC=clang)")
  endif()
  # Everything is built with coverage feedback; fuzz executables add the
  # libFuzzer main at link time (mc_add_fuzzer).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
