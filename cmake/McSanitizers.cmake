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
endif()
if(MC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MC_FUZZ=ON needs clang (CC=clang)")
  endif()
  # Everything is built with coverage feedback; fuzz executables add the
  # libFuzzer main at link time (mc_add_fuzzer).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
