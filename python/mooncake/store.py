# SPDX-License-Identifier: Apache-2.0
"""mooncake.store: upstream's MooncakeDistributedStore over libmooncake.

A drop-in for ``mooncake.store`` of upstream's mooncake-transfer-engine
wheel, built with ctypes on our C library (include/mooncake/store.h): the
same class and method names, argument orders and return conventions
(0 or a negative upstream store code; byte counts for reads; ``get``
returns empty bytes on a miss). Host memory only.

Every batch method is one call into the C library, with the keys, buffers
and sizes flattened into ctypes arrays. Calls release the GIL (ctypes
does), and a store may be used from any number of threads at once.

Differences from upstream, on purpose:

- CUDA device memory is refused by ``register_buffer`` with
  NotSupportedError, and ``protocol="rdma"`` (where this build has no
  RDMA) makes ``setup`` raise NotSupportedError, instead of a crash or a
  bare code later.
- ``put``/``put_parts``/``put_batch`` and ``get``/``get_batch``/
  ``get_buffer``/``batch_get_buffer`` work through memory registered for
  the call (a copy of the values; the handles get_buffer returns), so
  values are not limited by ``local_buffer_size``.
- ``setup_dummy`` (standalone mode) is not supported.
"""
import atexit
import ctypes
import logging
import mmap
import operator
import os
import threading
import weakref
from array import array as _u64array
from ctypes import byref, c_char, c_char_p, c_int, c_int64, c_size_t, c_void_p
from itertools import accumulate as _accumulate

from . import _lib

_L = _lib.lib
log = logging.getLogger("mooncake.store")

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "ReplicaDescriptor",
           "MemoryDescriptor", "Descriptor", "DiskDescriptor",
           "ReplicaStatus", "BufferHandle", "MooncakeHostMemAllocator",
           "MooncakeError", "NotSupportedError", "strerror"]

# Upstream store codes used here (mooncake-store/include/types.h).
OK = 0
INTERNAL_ERROR = -1
NO_AVAILABLE_HANDLE = -200
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
UNAVAILABLE_IN_CURRENT_STATUS = -1010
NOT_SUPPORTED = -1012


def strerror(code):
    """Upstream's name and words for a store code: "OBJECT_NOT_FOUND:
    object not found"."""
    return _L.mooncake_store_strerror(int(code)).decode()


class MooncakeError(RuntimeError):
    """An error this package raises rather than returns; .code is the
    upstream store code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class NotSupportedError(MooncakeError):
    """NOT_SUPPORTED (-1012): what this build cannot do (CUDA device
    memory, RDMA, standalone mode)."""

    def __init__(self, message):
        super().__init__(NOT_SUPPORTED, message)


# ---- ReplicateConfig ------------------------------------------------------

class ReplicateConfig:
    """Upstream's ReplicateConfig: plain settable attributes.

    Honoured here: replica_num, with_soft_pin, with_hard_pin,
    preferred_segments, preferred_segment (tried first) and
    prefer_alloc_in_same_node (this client's own segment is preferred).
    Accepted and ignored, since the pool has no such tier or feature:
    nof_replica_num, preferred_nof_segments, dfs_replica_num,
    soft_pin_action, soft_pin_ttl_ms, data_type, group_ids.
    """
    __slots__ = ("replica_num", "nof_replica_num", "dfs_replica_num",
                 "with_soft_pin", "with_hard_pin", "soft_pin_action",
                 "soft_pin_ttl_ms", "preferred_segments", "preferred_segment",
                 "preferred_nof_segments", "prefer_alloc_in_same_node",
                 "data_type", "group_ids")

    def __init__(self, replica_num=1, with_soft_pin=False,
                 with_hard_pin=False, preferred_segments=None,
                 preferred_segment="", **kw):
        self.replica_num = replica_num
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.with_soft_pin = with_soft_pin
        self.with_hard_pin = with_hard_pin
        self.soft_pin_action = 0
        self.soft_pin_ttl_ms = 0
        self.preferred_segments = list(preferred_segments or [])
        self.preferred_segment = preferred_segment
        self.preferred_nof_segments = []
        self.prefer_alloc_in_same_node = False
        self.data_type = 0
        self.group_ids = None
        for k, v in kw.items():
            setattr(self, k, v)  # AttributeError for unknown fields

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in
                           self.__slots__)
        return f"ReplicateConfig({fields})"

    __str__ = __repr__


_DEFAULT_CONFIG = ReplicateConfig()


# ---- replica descriptors ---------------------------------------------------

class ReplicaStatus:
    """Upstream's ReplicaStatus values (only COMPLETE replicas are ever
    reported)."""
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class Descriptor:
    """Upstream's AllocatedBuffer.Descriptor."""
    __slots__ = ("size", "buffer_address", "transport_endpoint")

    def __init__(self, size=0, buffer_address=0, transport_endpoint=""):
        self.size = size
        self.buffer_address = buffer_address
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address="
                f"{self.buffer_address} transport_endpoint="
                f"{self.transport_endpoint}>")


class MemoryDescriptor:
    __slots__ = ("buffer_descriptor",)

    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class DiskDescriptor:
    __slots__ = ("file_path", "object_size")

    def __init__(self, file_path="", object_size=0):
        self.file_path = file_path
        self.object_size = object_size


class ReplicaDescriptor:
    """One replica of an object: memory only in this pool (a segment of
    some client); is_disk_replica() is always False."""
    __slots__ = ("status", "_mem", "same_host")

    def __init__(self, endpoint, address, size, same_host):
        self.status = ReplicaStatus.COMPLETE
        self._mem = MemoryDescriptor(Descriptor(size, address, endpoint))
        self.same_host = same_host

    def is_memory_replica(self):
        return True

    def is_disk_replica(self):
        return False

    def is_local_disk_replica(self):
        return False

    def get_memory_descriptor(self):
        return self._mem

    def get_disk_descriptor(self):
        raise RuntimeError("not a disk replica (this pool keeps memory "
                           "replicas only)")

    def __repr__(self):
        d = self._mem.buffer_descriptor
        return (f"<ReplicaDescriptor memory {d.transport_endpoint}"
                f"@{d.buffer_address:#x} size={d.size}>")


# ---- buffers ---------------------------------------------------------------

class BufferHandle(bytearray):
    """What get_buffer returns: a bytearray (so the buffer protocol, len(),
    bytes(), numpy.frombuffer, memoryview all work) with upstream's
    BufferHandle methods ptr() and size()."""

    def ptr(self):
        if not len(self):
            return 0
        return ctypes.addressof((c_char * len(self)).from_buffer(self))

    def size(self):
        return len(self)


def _address(buf):
    """Address of a writable buffer (bytearray, BufferHandle); the ctypes
    view returned with it keeps the buffer from moving while alive."""
    view = (c_char * len(buf)).from_buffer(buf)
    return ctypes.addressof(view), view


def _as_view(obj):
    """A contiguous 1-D byte memoryview of any bytes-like object."""
    mv = obj if isinstance(obj, memoryview) else memoryview(obj)
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


class MooncakeHostMemAllocator:
    """Upstream's host allocator: page-aligned anonymous memory for buffers
    to register (alloc returns the address as an int, 0 on failure)."""

    def __init__(self):
        self._maps = {}
        self._lock = threading.Lock()

    def alloc(self, size):
        if size <= 0:
            return 0
        try:
            m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE |
                          mmap.MAP_ANONYMOUS)
        except OSError:
            return 0
        addr = ctypes.addressof(c_char.from_buffer(m))
        with self._lock:
            self._maps[addr] = m
        return addr

    def free(self, ptr):
        with self._lock:
            m = self._maps.pop(ptr, None)
        if m is None:
            return INVALID_PARAMS
        try:
            m.close()
        except BufferError:
            # Views of it are still alive: unmapped when they go.
            pass
        return OK


# ---- CUDA detection ---------------------------------------------------------

_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_CU_MEMORYTYPE_DEVICE = 2


def _loaded_cuda():
    """The CUDA driver when this process has already loaded it (device
    memory cannot exist otherwise), else None. Never loads it."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
    return None


def _is_device_pointer(ptr):
    cuda = _loaded_cuda()
    if cuda is None:
        return False
    try:
        fn = cuda.cuPointerGetAttribute
    except AttributeError:
        return False
    fn.restype = c_int
    fn.argtypes = [c_void_p, c_int, ctypes.c_uint64]
    memtype = ctypes.c_uint(0)
    if fn(byref(memtype), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != 0:
        return False  # not CUDA memory (or no context): host memory
    return memtype.value == _CU_MEMORYTYPE_DEVICE


# ---- helpers ---------------------------------------------------------------

def _key(k):
    """The key for C: its bytes, or None (a NULL key, which every C call
    refuses with INVALID_PARAMS) when it holds a NUL byte, since C would
    take the bytes before the NUL for the key."""
    if isinstance(k, str):
        k = k.encode()
    elif isinstance(k, (bytes, bytearray)):
        k = bytes(k)
    else:
        raise TypeError(f"key must be str, not {type(k).__name__}")
    return None if b"\0" in k else k


def _keys(keys):
    return [_key(k) for k in keys]


def _key_array(keys):
    """(const char *keys[], keepalive), keys as _key() gives them. Keys
    that are all ASCII str without NUL are joined into one NUL-separated
    bytes object and pointed into (one encode instead of one per key);
    others are encoded one by one."""
    n = len(keys)
    try:
        blob = "\0".join(keys).encode() + b"\0"
    except TypeError:  # bytes keys
        blob = None
    if blob is not None:
        lens = [len(k) + 1 for k in keys]
        # no multi-byte characters, and no key with a NUL of its own
        if sum(lens) == len(blob) and blob.count(0) == n:
            offs = list(_accumulate(lens, initial=ctypes.cast(
                blob, c_void_p).value))
            offs.pop()
            return (c_char_p * n).from_buffer(_u64array("Q", offs)), blob
    return (c_char_p * n)(*_keys(keys)), None


def _array(ctype, values):
    """A ctypes array of addresses or sizes (8-byte integers: void *,
    size_t), built through array.array, which converts a list of ints in
    one C loop."""
    try:
        return (ctype * len(values)).from_buffer(_u64array("Q", values))
    except (TypeError, OverflowError):
        # objects with __index__ only, or negative values (which C then
        # refuses as sizes or unregistered addresses)
        return (ctype * len(values))(*[int(v) for v in values])


# include/mooncake/store.h: MOONCAKE_MAX_REPLICAS.
MAX_REPLICAS = 8


class _BadConfig(Exception):
    """A ReplicateConfig the C API would refuse: the put returns
    INVALID_PARAMS (as from C) without calling it."""


def _replica_num(value):
    """replica_num as an int from 1 to MAX_REPLICAS, as libmooncake takes
    it; anything else is logged (the words libmooncake logs) and raises
    _BadConfig, so no negative number wraps around in size_t."""
    try:
        n = operator.index(value)
    except TypeError:
        n = None
    if n is None or isinstance(value, bool) or not 1 <= n <= MAX_REPLICAS:
        log.warning("replica_num %r is out of range (1 to %d)", value,
                    MAX_REPLICAS)
        raise _BadConfig()
    return n


_MISSING = object()
_live = weakref.WeakSet()


def _release(handles):
    """A store that was garbage-collected: nobody can be calling it."""
    for h in handles:
        _L.mooncake_store_destroy(h)


@atexit.register
def _close_all():
    """At exit, every store still alive leaves the pool cleanly (its
    segment unmounted). Handles are not freed: daemon threads may still be
    inside a call; close() waits for them."""
    for store in list(_live):
        for h in store._handles:
            _L.mooncake_store_close(h)


class MooncakeDistributedStore:
    """Upstream's MooncakeDistributedStore over libmooncake."""

    def __init__(self):
        h = _L.mooncake_store_create()
        if not h:
            raise MemoryError("mooncake_store_create failed")
        self._h = h
        # Handles replaced by a setup after close(): freed with the store,
        # never while another thread may still be using them.
        self._handles = [h]
        self._setup_lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _release, self._handles)
        self._finalizer.atexit = False
        _live.add(self)

    # ---- lifecycle -------------------------------------------------------

    def setup(self, local_hostname=_MISSING, metadata_server=_MISSING,
              global_segment_size=_MISSING, local_buffer_size=_MISSING,
              protocol=_MISSING, rdma_devices=_MISSING,
              master_server_addr=_MISSING, engine=None,
              enable_ssd_offload=False, ssd_offload_path="",
              tenant_id="default", enable_client_http_server=False,
              client_http_port=9300):
        """Join the pool: upstream's seven positional arguments (engine
        and the keywords after it are optional), or upstream's dict form
        setup({...}). Empty strings fall back to the file named by
        MOONCAKE_CONFIG_PATH, then to MOONCAKE_* variables, then to the
        library's defaults; a size of 0 means none, as upstream. Returns 0 or a store code.

        Raises TypeError naming a keyword for an unknown keyword (Python
        does) and for a value this build cannot honour (tenant_id other
        than "default", enable_ssd_offload=True,
        enable_client_http_server=True), so that callers that retry
        without such keywords (SGLang) do. Raises NotSupportedError when
        the protocol is not built (rdma)."""
        args = [local_hostname, metadata_server, global_segment_size,
                local_buffer_size, protocol, rdma_devices,
                master_server_addr]
        if isinstance(local_hostname, dict) and all(
                a is _MISSING for a in args[1:]):
            d = local_hostname
            if "local_hostname" not in d or "metadata_server" not in d:
                raise TypeError("setup(): the dict form needs "
                                "'local_hostname' and 'metadata_server'")
            args = [d["local_hostname"], d["metadata_server"],
                    d.get("global_segment_size", 16 << 20),
                    d.get("local_buffer_size", 16 << 20),
                    d.get("protocol", "tcp"),
                    d.get("rdma_devices", d.get("device_name", "")),
                    d.get("master_server_addr",
                          d.get("master_server_address", "127.0.0.1:50051"))]
        names = ("local_hostname", "metadata_server", "global_segment_size",
                 "local_buffer_size", "protocol", "rdma_devices",
                 "master_server_addr")
        missing = [n for n, a in zip(names, args) if a is _MISSING]
        if missing:
            raise TypeError("setup() missing required argument(s): "
                            + ", ".join(repr(n) for n in missing))
        if tenant_id not in (None, "", "default"):
            raise TypeError(f"setup(): tenant_id={tenant_id!r} is not "
                            f"supported (only the default tenant)")
        if enable_ssd_offload:
            raise TypeError("setup(): enable_ssd_offload=True is not "
                            "supported (the pool has no SSD tier)")
        if enable_client_http_server:
            raise TypeError("setup(): enable_client_http_server=True is not "
                            "supported (no client HTTP server)")
        if engine is not None:
            log.warning("setup(): a shared transfer engine is not supported;"
                        " this store uses its own")
        host, meta, seg, buf, proto, dev, master = args
        try:
            seg, buf = operator.index(seg), operator.index(buf)
        except TypeError:
            seg = buf = -1
        if seg < 0 or buf < 0:
            raise TypeError("setup(): global_segment_size and "
                            "local_buffer_size must be non-negative ints")

        def s(v):  # "" and None: from the configuration
            return v.encode() if v else None

        with self._setup_lock:
            if self._closed:
                # A closed handle stays closed: start a new one.
                h = _L.mooncake_store_create()
                if not h:
                    return INTERNAL_ERROR
                self._handles.append(h)
                self._h = h
                self._closed = False
            rc = _L.mooncake_store_setup(self._h, s(host), s(meta), seg, buf,
                                         s(proto), s(dev), s(master))
        if rc == NOT_SUPPORTED:
            raise NotSupportedError(
                f"setup(): protocol {proto or '(from the configuration)'!r} "
                f"is not available in this build of libmooncake "
                f"(NOT_SUPPORTED -1012); use protocol='tcp'")
        if rc:
            log.error("setup failed: %s", strerror(rc))
        return rc

    def init_all(self, protocol, device_name, mount_segment_size=16 << 20):
        """Upstream's init_all: setup with everything else from the
        configuration (MOONCAKE_CONFIG_PATH, MOONCAKE_*)."""
        return self.setup("", "", mount_segment_size, 0, protocol,
                          device_name, "")

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address):
        raise NotSupportedError(
            "setup_dummy(): standalone mode (attaching to a mooncake_client "
            "over IPC) is not supported; use setup() (NOT_SUPPORTED -1012)")

    def close(self):
        """Leave the pool (waits for calls in progress). Idempotent; 0.
        Later calls return UNAVAILABLE_IN_CURRENT_STATUS (-1010); setup()
        may be called again."""
        with self._setup_lock:
            self._closed = True
            return _L.mooncake_store_close(self._h)

    def health_check(self):
        """0 healthy, 1 not set up or closed, 2 master unreachable."""
        return _L.mooncake_store_health_check(self._h)

    def get_hostname(self):
        """This client's segment name ("" before setup and after close)."""
        name = _L.mooncake_store_get_hostname(self._h)
        return name.decode() if name else ""

    def transfer_stats(self, transport):
        """Ours: what this client moved through one transfer engine
        transport ("tcp", "shm", "local") since setup, as a dict of
        read_bytes, write_bytes, read_requests, write_requests,
        failed_requests and served_bytes; None before setup, after close
        or for another name."""
        st = _lib.TransferStatsC()
        if _L.mooncake_store_transfer_stats(self._h, transport.encode(),
                                            ctypes.byref(st)):
            return None
        return {f: getattr(st, f) for f, _ in st._fields_}

    def set_timeouts(self, rpc_ms=0, transfer_ms=0):
        """Ours: RPC and transfer timeouts in ms (0 keeps the value)."""
        return _L.mooncake_store_set_timeouts(self._h, rpc_ms, transfer_ms)

    # ---- configuration ---------------------------------------------------

    def _cfg(self, config):
        """(pointer or None, keepalive) for a ReplicateConfig; raises
        _BadConfig for a replica_num libmooncake would refuse."""
        if config is None or config is _DEFAULT_CONFIG:
            return None, None
        replicas = _replica_num(config.replica_num)
        segs = []
        if config.preferred_segment:
            segs.append(config.preferred_segment)
        segs += [x for x in (config.preferred_segments or []) if x]
        if config.prefer_alloc_in_same_node:
            me = self.get_hostname()
            if me:
                segs.append(me)
        segs = list(dict.fromkeys(segs))
        if (replicas == 1 and not segs and not config.with_soft_pin
                and not config.with_hard_pin):
            return None, None
        arr = (c_char_p * len(segs))(*[x.encode() for x in segs]) \
            if segs else None
        c = _lib.ReplicateConfigC(replicas,
                                  bool(config.with_soft_pin),
                                  bool(config.with_hard_pin), arr, len(segs))
        return byref(c), (c, arr)

    # ---- zero-copy calls ---------------------------------------------------

    def register_buffer(self, buffer_ptr, size):
        """Register host memory for the zero-copy calls; 0 or a code
        (-600 when it overlaps a registered buffer). CUDA device memory
        raises NotSupportedError."""
        buffer_ptr = int(buffer_ptr)
        if buffer_ptr and _is_device_pointer(buffer_ptr):
            raise NotSupportedError(
                f"register_buffer({buffer_ptr:#x}): CUDA device memory is not "
                f"supported (host memory only; NOT_SUPPORTED -1012); stage "
                f"through a pinned host buffer")
        rc = _L.mooncake_store_register_buffer(self._h, buffer_ptr, size)
        if rc == NOT_SUPPORTED:
            raise NotSupportedError(
                f"register_buffer({buffer_ptr:#x}): device memory is not "
                f"supported by this build (NOT_SUPPORTED -1012)")
        return rc

    def unregister_buffer(self, buffer_ptr):
        return _L.mooncake_store_unregister_buffer(self._h, int(buffer_ptr))

    def put_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        try:
            cfg, _keep = self._cfg(config)
        except _BadConfig:
            return INVALID_PARAMS
        return _L.mooncake_store_put_from(self._h, _key(key), int(buffer_ptr),
                                          size, cfg)

    def get_into(self, key, buffer_ptr, size):
        """Bytes read, or a code (-600 when the buffer is smaller than the
        object or not registered; nothing is written then)."""
        return _L.mooncake_store_get_into(self._h, _key(key), int(buffer_ptr),
                                          size)

    def batch_put_from(self, keys, buffer_ptrs, sizes,
                       config=_DEFAULT_CONFIG):
        n = len(keys)
        if not n:
            return []
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [INVALID_PARAMS] * n
        try:
            cfg, _keep = self._cfg(config)
        except _BadConfig:
            return [INVALID_PARAMS] * n
        ka, _kb = _key_array(keys)
        res = (c_int * n)()
        rc = _L.mooncake_store_batch_put_from(
            self._h, ka,
            _array(c_void_p, buffer_ptrs), _array(c_size_t, sizes), n, cfg,
            res)
        return [rc] * n if rc < 0 else res[:]

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        n = len(keys)
        if not n:
            return []
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [INVALID_PARAMS] * n
        ka, _kb = _key_array(keys)
        res = (c_int64 * n)()
        rc = _L.mooncake_store_batch_get_into(
            self._h, ka,
            _array(c_void_p, buffer_ptrs), _array(c_size_t, sizes), n, res)
        return [rc] * n if rc < 0 else res[:]

    @staticmethod
    def _flatten(n, all_buffer_ptrs, all_sizes):
        """CSR form of ptrs[][]/sizes[][]: (ptrs, sizes, n_parts); a key
        whose lists differ in length gets no parts (so -600)."""
        counts, ptrs, sizes = [], [], []
        for p, s in zip(all_buffer_ptrs, all_sizes):
            if len(p) != len(s):
                counts.append(0)
                continue
            counts.append(len(p))
            ptrs += p
            sizes += s
        return (_array(c_void_p, ptrs) if ptrs else None,
                _array(c_size_t, sizes) if sizes else None,
                _array(c_size_t, counts))

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     config=_DEFAULT_CONFIG):
        """Object i is the concatenation of the buffers all_buffer_ptrs[i]
        (sizes all_sizes[i]); list of 0 or a code."""
        n = len(keys)
        if not n:
            return []
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs, sizes, counts = self._flatten(n, all_buffer_ptrs, all_sizes)
        try:
            cfg, _keep = self._cfg(config)
        except _BadConfig:
            return [INVALID_PARAMS] * n
        ka, _kb = _key_array(keys)
        res = (c_int * n)()
        rc = _L.mooncake_store_batch_put_from_multi(
            self._h, ka, n,
            ptrs or (c_void_p * 1)(), sizes or (c_size_t * 1)(), counts, cfg,
            res)
        return [rc] * n if rc < 0 else res[:]

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """Object i is scattered over all_buffer_ptrs[i]; list of bytes
        read or a code. prefer_alloc_in_same_node is accepted for
        upstream's signature (a replica on this host is always preferred)."""
        n = len(keys)
        if not n:
            return []
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs, sizes, counts = self._flatten(n, all_buffer_ptrs, all_sizes)
        ka, _kb = _key_array(keys)
        res = (c_int64 * n)()
        rc = _L.mooncake_store_batch_get_into_multi(
            self._h, ka, n,
            ptrs or (c_void_p * 1)(), sizes or (c_size_t * 1)(), counts, res)
        return [rc] * n if rc < 0 else res[:]

    # ---- copying calls (through a temporary registered buffer) -------------

    def _put_parts_batch(self, keys, values, config):
        """values[i] is a list of bytes-like parts of object i: one copy
        into a fresh bytearray, registered for one batch call."""
        n = len(keys)
        views = [[_as_view(p) for p in parts] for parts in values]
        sizes = [sum(v.nbytes for v in parts) for parts in views]
        region = bytearray().join(v for parts in views for v in parts)
        kb, _kb = _key_array(keys)
        try:
            cfg, _keep = self._cfg(config)
        except _BadConfig:
            return [INVALID_PARAMS] * n
        res = (c_int * n)()
        if not region:
            # Nothing to register: every key is empty (-600 from C).
            rc = _L.mooncake_store_batch_put_from(
                self._h, kb, (c_void_p * n)(), _array(c_size_t, sizes), n,
                cfg, res)
            return [rc] * n if rc < 0 else res[:]
        base, view = _address(region)
        rc = _L.mooncake_store_register_buffer(self._h, base, len(region))
        if rc:
            return [rc] * n
        try:
            ptrs, off = [], 0
            for sz in sizes:
                ptrs.append(base + off)
                off += sz
            rc = _L.mooncake_store_batch_put_from(
                self._h, kb, _array(c_void_p, ptrs), _array(c_size_t, sizes),
                n, cfg, res)
        finally:
            _L.mooncake_store_unregister_buffer(self._h, base)
            del view
        return [rc] * n if rc < 0 else res[:]

    def put(self, key, value, config=_DEFAULT_CONFIG):
        """Store a bytes-like value; 0 or a code (an existing key is 0 and
        is not overwritten)."""
        return self._put_parts_batch([key], [[value]], config)[0]

    def put_parts(self, key, *parts, config=_DEFAULT_CONFIG):
        """Store the concatenation of bytes-like parts as one object."""
        return self._put_parts_batch([key], [list(parts)], config)[0]

    def put_batch(self, keys, values, config=_DEFAULT_CONFIG):
        """Store several bytes-like values in one call; 0 when all
        succeeded, else the first key's code."""
        if len(keys) != len(values):
            return INVALID_PARAMS
        if not keys:
            return OK
        res = self._put_parts_batch(keys, [[v] for v in values], config)
        return next((r for r in res if r), OK)

    def _sizes(self, kb):
        """Sizes of the encoded keys kb, in one C call (one RPC)."""
        n = len(kb)
        if not n:
            return []
        ka = (c_char_p * n)(*kb)
        res = (c_int64 * n)()
        rc = _L.mooncake_store_batch_get_size(self._h, ka, n, res)
        return [rc] * n if rc < 0 else res[:]

    def _read(self, kb, bufs, sizes, live):
        """One batch_get_into of keys kb[i] into bufs[i] (i in live), each
        buffer registered for the call; {i: bytes read or code}."""
        addrs, views = [], []
        try:
            for i in live:
                addr, view = _address(bufs[i])
                rc = _L.mooncake_store_register_buffer(self._h, addr,
                                                       len(bufs[i]))
                if rc:
                    return {i: rc for i in live}
                addrs.append(addr)
                views.append(view)
            m = len(live)
            res = (c_int64 * m)()
            rc = _L.mooncake_store_batch_get_into(
                self._h, (c_char_p * m)(*[kb[i] for i in live]),
                _array(c_void_p, addrs),
                _array(c_size_t, [sizes[i] for i in live]), m, res)
            return {i: (rc if rc < 0 else res[j]) for j, i in enumerate(live)}
        finally:
            for addr in addrs:
                _L.mooncake_store_unregister_buffer(self._h, addr)
            del views

    def _get_many(self, keys, handles):
        """Objects of keys as bytes (b"" when missing) or, with handles, as
        BufferHandle (None when missing). Sizes first (get_size per key:
        the C API has no batch form), then one batch_get_into: into one
        region for bytes, straight into each handle otherwise."""
        kb = _keys(keys)
        sizes = self._sizes(kb)
        live = [i for i, s in enumerate(sizes) if s > 0]
        if handles:
            bufs = [BufferHandle(s) if s > 0 else None for s in sizes]
            got = self._read(kb, bufs, sizes, live) if live else {}
            out = [None] * len(kb)
            for i, r in got.items():
                if r >= 0:
                    out[i] = bufs[i] if r == sizes[i] else \
                        BufferHandle(bufs[i][:r])
            return out
        out = [b""] * len(kb)
        if not live:
            return out
        region = bytearray(sum(sizes[i] for i in live))
        # One region, one registration: key i reads into region[off[i]:].
        offs, off = {}, 0
        for i in live:
            offs[i] = off
            off += sizes[i]
        mv = memoryview(region)
        base, view = _address(region)
        rc = _L.mooncake_store_register_buffer(self._h, base, len(region))
        if rc:
            return out
        try:
            m = len(live)
            res = (c_int64 * m)()
            rc = _L.mooncake_store_batch_get_into(
                self._h, (c_char_p * m)(*[kb[i] for i in live]),
                _array(c_void_p, [base + offs[i] for i in live]),
                _array(c_size_t, [sizes[i] for i in live]), m, res)
        finally:
            _L.mooncake_store_unregister_buffer(self._h, base)
            del view
        if rc >= 0:
            for j, i in enumerate(live):
                if res[j] >= 0:
                    out[i] = bytes(mv[offs[i]:offs[i] + res[j]])
        mv.release()
        return out

    def get(self, key):
        """The object's bytes; empty bytes when it is missing or on any
        error (as upstream)."""
        return self._get_many([key], False)[0]

    def get_batch(self, keys):
        """list of bytes (empty for missing keys and errors)."""
        return self._get_many(keys, False) if keys else []

    def get_buffer(self, key):
        """A BufferHandle (buffer protocol, ptr(), size()) or None."""
        return self._get_many([key], True)[0]

    def batch_get_buffer(self, keys):
        """list of BufferHandle, None where a key is missing."""
        return self._get_many(keys, True) if keys else []

    # ---- metadata calls ----------------------------------------------------

    def is_exist(self, key):
        """1, 0 or a negative code (grants a lease, as upstream)."""
        return _L.mooncake_store_is_exist(self._h, _key(key))

    def batch_is_exist(self, keys):
        n = len(keys)
        if not n:
            return []
        ka, _kb = _key_array(keys)
        res = (c_int * n)()
        rc = _L.mooncake_store_batch_is_exist(
            self._h, ka, n, res)
        return [rc] * n if rc < 0 else res[:]

    def get_size(self, key):
        return _L.mooncake_store_get_size(self._h, _key(key))

    def remove(self, key, force=False):
        return _L.mooncake_store_remove(self._h, _key(key), bool(force))

    def batch_remove(self, keys, force=False):
        n = len(keys)
        if not n:
            return []
        ka, _kb = _key_array(keys)
        res = (c_int * n)()
        rc = _L.mooncake_store_batch_remove(
            self._h, ka, n, bool(force), res)
        return [rc] * n if rc < 0 else res[:]

    def remove_by_regex(self, regex_pattern, force=False):
        """Number removed or a code (PCRE2 syntax)."""
        return _L.mooncake_store_remove_by_regex(
            self._h, _key(regex_pattern), bool(force))

    def remove_all(self, force=False):
        """Number removed or a code."""
        return _L.mooncake_store_remove_all(self._h, bool(force))

    def get_replica_desc(self, key):
        """list of ReplicaDescriptor (empty when the key is missing)."""
        kb = _key(key)
        cap = 4
        while True:
            out = (_lib.ReplicaDescC * cap)()
            n = _L.mooncake_store_get_replica_desc(self._h, kb, out, cap)
            if n < 0:
                return []
            if n <= cap:
                return [ReplicaDescriptor(d.endpoint.decode(errors="replace"),
                                          d.address, d.size, d.same_host)
                        for d in out[:n]]
            cap = n

    def batch_get_replica_desc(self, keys):
        """{key: [ReplicaDescriptor, ...]} for the keys that exist. One
        call per key: the C API has no batch form (python/README.md)."""
        out = {}
        for k in keys:
            d = self.get_replica_desc(k)
            if d:
                out[k] = d
        return out

    def alloc_from_mem_pool(self, size):
        """Not supported: 0 (upstream's failure value)."""
        return 0

