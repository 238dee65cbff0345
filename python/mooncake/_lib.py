# SPDX-License-Identifier: Apache-2.0
"""Finding and loading libmooncake.so, and the ctypes prototypes of the
store API (include/mooncake/store.h, store_fs.h, ckpt.h). Nothing here
holds state besides the loaded library; mooncake.store and mooncake.p2p
build on it."""
import ctypes
import ctypes.util
import glob
import os
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p,
                    c_int, c_int64, c_size_t, c_uint, c_uint32, c_uint64,
                    c_void_p)

LIBNAME = "libmooncake.so"
# Sanitizer runtimes abort the process when an instrumented library is
# loaded into an uninstrumented interpreter, so such builds are skipped
# (or refused with a reason) instead of being loaded.
_SANITIZER_MARKS = {b"__asan_init": "AddressSanitizer",
                    b"__tsan_init": "ThreadSanitizer"}


class ReplicateConfigC(Structure):
    """mooncake_replicate_config_t."""
    _fields_ = [("replica_num", c_size_t),
                ("with_soft_pin", c_bool),
                ("with_hard_pin", c_bool),
                ("preferred_segments", POINTER(c_char_p)),
                ("preferred_segments_count", c_size_t),
                ("group_ids", POINTER(c_char_p)),
                ("group_ids_count", c_size_t)]


class TransferStatsC(Structure):
    _fields_ = [("read_bytes", c_uint64), ("write_bytes", c_uint64),
                ("read_requests", c_uint64), ("write_requests", c_uint64),
                ("failed_requests", c_uint64), ("served_bytes", c_uint64),
                ("connections", c_uint64), ("registrations", c_uint64),
                ("inflight", c_uint64), ("caller_requests", c_uint64)]


class LocationCacheStatsC(Structure):
    _fields_ = [("keys", c_uint64), ("hits", c_uint64),
                ("misses", c_uint64), ("stale", c_uint64),
                ("touched", c_uint64), ("dropped", c_uint64)]


class ReplicaDescC(Structure):
    """mooncake_replica_desc_t."""
    _fields_ = [("endpoint", c_char * 256),
                ("address", c_uint64),
                ("size", c_uint64),
                ("is_memory", c_bool),
                ("same_host", c_bool)]


class CkptOptionsC(Structure):
    """mooncake_ckpt_options_t (include/mooncake/ckpt.h)."""
    _fields_ = [("serve_host", c_char_p),
                ("serve_port", c_int),
                ("inflight", c_uint),
                ("shard_size", c_uint64),
                ("timeout_ms", c_uint),
                ("cache_dir", c_char_p),
                ("cache_max_bytes", c_uint64),
                ("publish_copy", c_bool)]


class CkptProgressC(Structure):
    """mooncake_ckpt_progress_t."""
    _fields_ = [("bytes", c_uint64), ("total", c_uint64),
                ("shards", c_uint32), ("nshards", c_uint32),
                ("sources", c_uint32), ("retries", c_uint32)]


class CkptEntryC(Structure):
    """mooncake_ckpt_entry_t."""
    _fields_ = [("name", c_char_p),
                ("link", c_char_p),
                ("total_size", c_uint64),
                ("files", c_uint32), ("shards", c_uint32),
                ("holders", c_uint32), ("lost_shards", c_uint32),
                ("created_ns", c_int64),
                ("id", c_uint64)]


# mooncake_ckpt_progress_fn and mooncake_ckpt_list's callback; the Python
# function wrapped in one must stay referenced for as long as C may call
# it (mooncake.p2p keeps it for the call).
CKPT_PROGRESS_FN = CFUNCTYPE(None, c_void_p, POINTER(CkptProgressC))
CKPT_ENTRY_FN = CFUNCTYPE(None, c_void_p, POINTER(CkptEntryC))

H = c_void_p                 # mooncake_store_t
CK = c_void_p                # mooncake_ckpt_t *
KEYS = POINTER(c_char_p)     # const char **
BUFS = POINTER(c_void_p)     # void **
SIZES = POINTER(c_size_t)    # const size_t *
CFG = POINTER(ReplicateConfigC)

# name: (restype, argtypes), in store.h's order.
PROTOTYPES = {
    "mooncake_store_create": (H, []),
    "mooncake_store_destroy": (None, [H]),
    "mooncake_store_setup": (c_int, [H, c_char_p, c_char_p, c_uint64,
                                     c_uint64, c_char_p, c_char_p,
                                     c_char_p]),
    "mooncake_store_health_check": (c_int, [H]),
    "mooncake_store_close": (c_int, [H]),
    "mooncake_store_put": (c_int, [H, c_char_p, c_void_p, c_size_t, CFG]),
    "mooncake_store_put_from": (c_int, [H, c_char_p, c_void_p, c_size_t,
                                        CFG]),
    "mooncake_store_get_into": (c_int64, [H, c_char_p, c_void_p, c_size_t]),
    "mooncake_store_get": (c_int64, [H, c_char_p, c_void_p, c_size_t]),
    "mooncake_store_batch_put_from": (c_int, [H, KEYS, BUFS, SIZES,
                                              c_size_t, CFG,
                                              POINTER(c_int)]),
    "mooncake_store_batch_get_into": (c_int, [H, KEYS, BUFS, SIZES,
                                              c_size_t, POINTER(c_int64)]),
    "mooncake_store_batch_put_from_multi": (c_int, [H, KEYS, c_size_t, BUFS,
                                                    SIZES, SIZES, CFG,
                                                    POINTER(c_int)]),
    "mooncake_store_batch_get_into_multi": (c_int, [H, KEYS, c_size_t, BUFS,
                                                    SIZES, SIZES,
                                                    POINTER(c_int64)]),
    "mooncake_store_is_exist": (c_int, [H, c_char_p]),
    "mooncake_store_batch_is_exist": (c_int, [H, KEYS, c_size_t,
                                              POINTER(c_int)]),
    "mooncake_store_batch_get_size": (c_int, [H, KEYS, c_size_t,
                                               POINTER(c_int64)]),
    "mooncake_store_get_size": (c_int64, [H, c_char_p]),
    "mooncake_store_remove": (c_int, [H, c_char_p, c_bool]),
    "mooncake_store_batch_remove": (c_int, [H, KEYS, c_size_t, c_bool,
                                            POINTER(c_int)]),
    "mooncake_store_remove_by_regex": (c_int64, [H, c_char_p, c_bool]),
    "mooncake_store_remove_all": (c_int64, [H, c_bool]),
    "mooncake_store_register_buffer": (c_int, [H, c_void_p, c_size_t]),
    "mooncake_store_unregister_buffer": (c_int, [H, c_void_p]),
    "mooncake_store_get_hostname": (c_char_p, [H]),
    "mooncake_store_transfer_stats": (c_int, [H, c_char_p,
                                              POINTER(TransferStatsC)]),
    "mooncake_store_location_cache_stats": (
        c_int, [H, POINTER(LocationCacheStatsC)]),
    "mooncake_store_get_replica_desc": (c_int, [H, c_char_p,
                                                POINTER(ReplicaDescC),
                                                c_size_t]),
    "mooncake_store_strerror": (c_char_p, [c_int]),
    "mooncake_store_set_timeouts": (c_int, [H, c_uint, c_uint]),
    "mooncake_store_set_tenant": (c_int, [H, c_char_p]),
    # include/mooncake/store_fs.h: reading and writing by range, rename
    "mooncake_store_object_open": (c_int, [H, c_char_p, POINTER(c_void_p)]),
    "mooncake_store_object_size": (c_uint64, [c_void_p]),
    "mooncake_store_object_read": (c_int64, [c_void_p, c_uint64, c_void_p,
                                             c_size_t]),
    "mooncake_store_object_close": (None, [c_void_p]),
    "mooncake_store_writer_open": (c_int, [H, c_char_p, c_uint64, CFG,
                                           POINTER(c_void_p)]),
    "mooncake_store_writer_write": (c_int, [c_void_p, c_uint64, c_void_p,
                                            c_size_t]),
    "mooncake_store_writer_close": (c_int, [c_void_p, c_bool]),
    "mooncake_store_rename": (c_int, [H, c_char_p, c_char_p, c_bool]),
    # include/mooncake/ckpt.h: checkpoints shared peer to peer
    "mooncake_ckpt_open": (c_int, [H, POINTER(CkptOptionsC),
                                   POINTER(c_void_p)]),
    "mooncake_ckpt_close": (None, [CK]),
    "mooncake_ckpt_endpoint": (c_char_p, [CK]),
    "mooncake_ckpt_publish_dir": (c_int, [CK, c_char_p, c_char_p,
                                          CKPT_PROGRESS_FN, c_void_p]),
    "mooncake_ckpt_publish_buffers": (c_int, [CK, c_char_p, BUFS, SIZES,
                                              c_size_t]),
    "mooncake_ckpt_link": (c_int, [CK, c_char_p, c_char_p, c_bool]),
    "mooncake_ckpt_get_dir": (c_int, [CK, c_char_p, c_char_p,
                                      CKPT_PROGRESS_FN, c_void_p]),
    "mooncake_ckpt_get_buffers": (c_int, [CK, c_char_p, BUFS, SIZES,
                                          c_size_t]),
    "mooncake_ckpt_unserve": (c_int, [CK, c_char_p]),
    "mooncake_ckpt_remove": (c_int, [CK, c_char_p]),
    "mooncake_ckpt_list": (c_int64, [CK, c_char_p, CKPT_ENTRY_FN,
                                     c_void_p]),
    "mooncake_ckpt_info": (c_int, [CK, c_char_p, POINTER(c_void_p)]),
}


# include/mooncake/te_so.h: the transfer engine's forwards, bound on first
# use by mooncake.engine (bind_te), so a library without them still loads
# for mooncake.store.
ENG = c_void_p               # struct te_engine *
SEG = c_void_p               # struct te_segment *
BATCH = c_void_p             # struct te_batch *
TE_PROTOTYPES = {
    "mooncake_te_engine_create": (c_int, [c_char_p, c_char_p, c_char_p,
                                          c_int, c_char_p, c_char_p,
                                          POINTER(ENG),
                                          c_char_p, c_size_t]),
    "mooncake_te_engine_destroy": (None, [ENG]),
    "mooncake_te_rdma_check": (c_int, [c_char_p, c_char_p, c_size_t]),
    "mooncake_te_engine_name": (c_char_p, [ENG]),
    "mooncake_te_engine_rpc_address": (c_char_p, [ENG]),
    "mooncake_te_register": (c_int, [ENG, c_void_p, c_size_t, c_char_p,
                                     c_int]),
    "mooncake_te_unregister": (c_int, [ENG, c_void_p]),
    "mooncake_te_mem_alloc": (c_int, [ENG, c_size_t, c_char_p,
                                      POINTER(c_void_p)]),
    "mooncake_te_mem_free": (None, [ENG, c_void_p]),
    "mooncake_te_segment_open": (c_int, [ENG, c_char_p, POINTER(SEG),
                                         c_char_p, c_size_t]),
    "mooncake_te_segment_close": (None, [SEG]),
    "mooncake_te_segment_buffers": (c_int, [SEG, POINTER(c_uint64),
                                            POINTER(c_uint64), c_uint]),
    "mooncake_te_batch_create": (c_int, [ENG, c_uint, POINTER(BATCH)]),
    "mooncake_te_batch_submit_arrays": (c_int, [BATCH, c_int, SEG, BUFS,
                                                POINTER(c_uint64),
                                                POINTER(c_uint64), c_uint]),
    "mooncake_te_batch_transfer_arrays": (c_int, [BATCH, c_int, SEG, BUFS,
                                                  POINTER(c_uint64),
                                                  POINTER(c_uint64), c_uint,
                                                  c_int]),
    "mooncake_te_batch_status": (c_int, [BATCH, c_uint, POINTER(c_int),
                                         POINTER(c_uint64), POINTER(c_int)]),
    "mooncake_te_batch_result": (c_int, [BATCH, c_uint, c_int]),
    "mooncake_te_batch_reset": (c_int, [BATCH]),
    "mooncake_te_batch_destroy": (c_int, [BATCH]),
    "mooncake_te_notify": (c_int, [ENG, SEG, c_char_p, c_char_p]),
    "mooncake_te_notifications": (c_int, [ENG, POINTER(c_void_p),
                                          POINTER(c_void_p), c_int]),
    "mooncake_te_topology_json": (c_void_p, []),
    "mooncake_te_free": (None, [c_void_p]),
    "mooncake_te_counters": (c_int, [ENG, c_char_p,
                                     POINTER(TransferStatsC)]),
}


def bind_te():
    """The loaded library with the transfer engine's prototypes set;
    ImportError when this libmooncake.so has none (an older build)."""
    try:
        for name, (res, args) in TE_PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
    except AttributeError as e:
        raise ImportError(f"{path} has no transfer engine exports "
                          f"({e}); rebuild it") from e
    return lib


def _sanitizer_of(path):
    """The sanitizer an instrumented library needs, or None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    for mark, name in _SANITIZER_MARKS.items():
        if mark in data:
            return name
    return None


def _runtime_loaded(name):
    """True when the sanitizer's runtime is already in this process
    (LD_PRELOAD), so an instrumented library can be loaded."""
    libs = {"AddressSanitizer": ("libasan", "libclang_rt.asan"),
            "ThreadSanitizer": ("libtsan", "libclang_rt.tsan")}[name]
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return False
    return any(lib in maps for lib in libs)


def _build_dir_sanitized(build_dir):
    """MC_SANITIZE of a CMake build directory ('' when not sanitized)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("MC_SANITIZE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def _source_tree_candidates(pkg_dir):
    """libmooncake.so of the build directories of the checkout this package
    lives in (python/mooncake inside the repository): MC_BUILD_DIR first,
    then build*/ newest first, sanitized builds left out."""
    repo = os.path.dirname(os.path.dirname(pkg_dir))
    if not (os.path.isfile(os.path.join(repo, "CMakeLists.txt"))
            and os.path.isfile(os.path.join(repo, "include", "mooncake",
                                            "store.h"))):
        return []
    rel = os.path.join("mooncakefs", "lib", LIBNAME)
    out = []
    env_build = os.environ.get("MC_BUILD_DIR")
    if env_build:
        out.append(os.path.join(env_build, rel))
    found = []
    for lib in glob.glob(os.path.join(repo, "build*", rel)):
        build_dir = lib[:-len(rel) - 1]
        if _build_dir_sanitized(build_dir):
            continue
        try:
            found.append((os.path.getmtime(lib), lib))
        except OSError:
            pass
    out += [lib for _, lib in sorted(found, reverse=True)]
    return out


def candidates():
    """Where libmooncake.so is looked for, in order (MOONCAKE_LIB is
    handled by load())."""
    pkg_dir = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(pkg_dir, LIBNAME)]
    out += _source_tree_candidates(pkg_dir)
    # An install prefix: <prefix>/lib/pythonX.Y/site-packages/mooncake or
    # <prefix>/lib/python3/dist-packages/mooncake -> <prefix>/lib.
    out.append(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(pkg_dir))), LIBNAME))
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, "/usr/local",
                                 "/usr")):
        out.append(os.path.join(prefix, "lib", LIBNAME))
        out.append(os.path.join(prefix, "lib64", LIBNAME))
    return list(dict.fromkeys(out))


def _bind(lib):
    for name, (res, args) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


def _open(path):
    san = _sanitizer_of(path)
    if san and not _runtime_loaded(san):
        raise OSError(f"{path} is built with {san}; loading it into this "
                      f"interpreter would abort the process (preload the "
                      f"sanitizer runtime, or use a build without "
                      f"MC_SANITIZE)")
    return _bind(ctypes.CDLL(path))


def load():
    """Load libmooncake.so: MOONCAKE_LIB if set (and only it), else the
    first of candidates() that loads, else the dynamic linker's search
    path. Raises ImportError naming every place tried."""
    explicit = os.environ.get("MOONCAKE_LIB")
    if explicit:
        try:
            return _open(explicit), explicit
        except (OSError, AttributeError) as e:
            raise ImportError(f"MOONCAKE_LIB={explicit}: {e}") from e
    tried = []
    for path in candidates():
        if not os.path.isfile(path):
            continue
        try:
            return _open(path), path
        except (OSError, AttributeError) as e:
            tried.append(f"{path}: {e}")
    name = ctypes.util.find_library("mooncake")
    if name:
        try:
            return _open(name), name
        except (OSError, AttributeError) as e:
            tried.append(f"{name}: {e}")
    detail = ("; ".join(tried) if tried else
              "not found next to the package, in a build directory of "
              "this checkout, under the install prefix or by ldconfig")
    raise ImportError(f"cannot load {LIBNAME} ({detail}); set MOONCAKE_LIB "
                      f"to its path")


lib, path = load()
