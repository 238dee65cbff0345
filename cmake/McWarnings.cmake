# One warning set for every target (rdma-core's set plus a few).
set(MC_WARNING_FLAGS
    -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes
    -Wmissing-declarations -Wstrict-prototypes -Wold-style-definition -Wvla
    -Wimplicit-fallthrough -Wno-unused-parameter -Wpointer-arith
    -Wundef)
if(MC_WERROR)
  list(APPEND MC_WARNING_FLAGS -Werror)
endif()
