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

- ``protocol="rdma"`` moves values with one-sided RDMA between hosts
  (``device_name`` "" picks the devices; same-host members keep shared
  memory unless ``MC_FORCE_HCA=1``). Where it cannot serve, ``setup``
  raises NotSupportedError saying what is missing (no RDMA device, or no
  rdma transport in this build), instead of a crash or a bare code later;
  with ``MC_RDMA_FALLBACK_TCP=1`` (or upstream's ``MC_FORCE_TCP``) tcp
  serves instead, with a warning. CUDA
  device memory is accepted by ``register_buffer`` and the zero-copy
  calls (staged through pinned host buffers by the transfer engine).
- ``put``/``put_parts``/``put_batch`` and ``get``/``get_batch``/
  ``get_buffer``/``batch_get_buffer`` work through memory registered for
  the call (a copy of the values; the handles get_buffer returns), so
  values are not limited by ``local_buffer_size``.
- ``setup_dummy`` (standalone mode) is not supported.
"""
import atexit
import ctypes
import enum
import ipaddress
import json
import logging
import mmap
import operator
import os
import re
import socket
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
           "MooncakeError", "NotSupportedError", "strerror",
           "ObjectDataType", "SoftPinAction", "TaskType", "TaskStatus",
           "QueryTaskResponse", "bind_to_numa_node"]

# Upstream store codes used here (mooncake-store/include/types.h).
OK = 0
INTERNAL_ERROR = -1
NO_AVAILABLE_HANDLE = -200
INVALID_KEY = -400
INVALID_PARAMS = -600
INVALID_WRITE = -700
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


# ---- enums -----------------------------------------------------------------

class ObjectDataType(enum.IntEnum):
    """Upstream's ObjectDataType (ReplicateConfig.data_type): a label the
    pool keeps no policy for."""
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class SoftPinAction(enum.IntEnum):
    """Upstream's ReplicateConfig.soft_pin_action: ENABLE soft-pins the
    objects put (as with_soft_pin=True); PRESERVE and DISABLE do not (a
    new object starts unpinned)."""
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ReplicaStatus(enum.IntEnum):
    """Upstream's ReplicaStatus values (only COMPLETE replicas are ever
    reported)."""
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class TaskType(enum.IntEnum):
    """Upstream's TaskType (create_copy_task, create_move_task)."""
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(enum.IntEnum):
    """Upstream's TaskStatus (query_task)."""
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


class QueryTaskResponse:
    """Upstream's query_task result (fields only: tasks are refused)."""
    __slots__ = ("id", "type", "status", "created_at_ms_epoch",
                 "last_updated_at_ms_epoch", "assigned_client", "message")

    def __init__(self):
        self.id = ""
        self.type = TaskType.REPLICA_COPY
        self.status = TaskStatus.PENDING
        self.created_at_ms_epoch = 0
        self.last_updated_at_ms_epoch = 0
        self.assigned_client = ""
        self.message = ""


# pybind11's export_values(), in upstream's order: the members at module
# level too (TaskStatus.FAILED and .PROCESSING win over ReplicaStatus's,
# as upstream's).
globals().update({m.name: m for e in (ObjectDataType, ReplicaStatus,
                                      TaskType, TaskStatus) for m in e})



# ---- ReplicateConfig ------------------------------------------------------

class ReplicateConfig:
    """Upstream's ReplicateConfig: plain settable attributes.

    Honoured here: replica_num, with_soft_pin (ours, upstream's older
    name) and soft_pin_action=ENABLE, with_hard_pin, preferred_segments,
    preferred_segment (tried first) and prefer_alloc_in_same_node (this
    client's own segment is preferred). group_ids (strings, one per key
    or one for all): a group's objects are evicted together and a read of
    one refreshes the others' leases, as upstream's master. Accepted and
    without effect, since the pool has no such tier (python/README.md):
    nof_replica_num, preferred_nof_segments, dfs_replica_num,
    soft_pin_ttl_ms (the master's soft-pin TTL applies), data_type.
    """
    __slots__ = ("replica_num", "nof_replica_num", "dfs_replica_num",
                 "with_soft_pin", "with_hard_pin", "soft_pin_action",
                 "_soft_pin_ttl_ms", "preferred_segments",
                 "preferred_segment", "preferred_nof_segments",
                 "prefer_alloc_in_same_node", "data_type", "group_ids")
    _FIELDS = tuple(f.lstrip("_") for f in __slots__)

    @property
    def soft_pin_ttl_ms(self):
        """None (the master's soft-pin TTL) or an int from 0 to 2**64-1,
        as upstream's std::optional<uint64_t>: anything else is a
        TypeError when set."""
        return self._soft_pin_ttl_ms

    @soft_pin_ttl_ms.setter
    def soft_pin_ttl_ms(self, value):
        if value is not None:
            if isinstance(value, bool):
                raise TypeError("soft_pin_ttl_ms: an int or None")
            try:
                value = operator.index(value)
            except TypeError:
                raise TypeError("soft_pin_ttl_ms: an int or None") from None
            if not 0 <= value < 1 << 64:
                raise TypeError(f"soft_pin_ttl_ms={value}: out of range "
                                f"for uint64")
        self._soft_pin_ttl_ms = value

    def __init__(self, replica_num=1, with_soft_pin=False,
                 with_hard_pin=False, preferred_segments=None,
                 preferred_segment="", **kw):
        self.replica_num = replica_num
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.with_soft_pin = with_soft_pin
        self.with_hard_pin = with_hard_pin
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = None
        self.preferred_segments = list(preferred_segments or [])
        self.preferred_segment = preferred_segment
        self.preferred_nof_segments = []
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = None
        for k, v in kw.items():
            setattr(self, k, v)  # AttributeError for unknown fields

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in
                           self._FIELDS)
        return f"ReplicateConfig({fields})"

    __str__ = __repr__


_DEFAULT_CONFIG = ReplicateConfig()


# ---- replica descriptors ---------------------------------------------------

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


def _key_list(keys, what):
    """keys, where a list of keys is expected: a str or bytes given
    instead (each of its characters would be taken for a key) is a
    TypeError, as upstream's binding raises for it."""
    if isinstance(keys, (str, bytes, bytearray)):
        raise TypeError(f"{what}(): expected a list of keys, not "
                        f"{type(keys).__name__} {keys[:40]!r}")
    return keys


def _count(v):
    """v as a non-negative int (an address, offset or size), or None for
    a negative number or anything but an integer."""
    try:
        v = operator.index(v)
    except TypeError:
        return None
    return v if v >= 0 else None


def _int_arg(v, what, name):
    """v, an address or a size of a zero-copy call, as an int; TypeError
    naming the call and the argument for a negative number or anything but
    an integer (a float, None, a str), as upstream's binding raises (ctypes
    raised ArgumentError for a float, and took -1 for 2**64 - 1)."""
    n = _count(v)
    if n is None:
        raise TypeError(f"{what}(): {name} must be an int >= 0, not "
                        f"{type(v).__name__} {v!r}")
    return n


def _int_args(ctype, values, what, name):
    """_array() of values checked as _int_arg() checks each, before
    anything is done ("sizes[2]" names a bad one)."""
    try:
        return (ctype * len(values)).from_buffer(_u64array("Q", values))
    except (TypeError, OverflowError):
        return (ctype * len(values))(*[
            _int_arg(v, what, f"{name}[{i}]") for i, v in enumerate(values)])


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


def _group_ids(ids, n):
    """group_ids: None/empty, or strings, one per key (or one for all);
    the master evicts a group's objects together and refreshes their
    leases together. Anything else is logged and raises _BadConfig
    (INVALID_PARAMS), as a bad replica_num."""
    if not ids:
        return
    if isinstance(ids, (str, bytes)) or not all(
            isinstance(g, str) for g in ids) or len(ids) not in (1, n):
        log.warning("group_ids %r: expected a list of strings, one per "
                    "key (%d)", ids, n)
        raise _BadConfig()


_MISSING = object()
_live = weakref.WeakSet()

# libmooncake's MOONCAKE_SIZE_UNSET: the size from the configuration.
_SIZE_UNSET = (1 << 64) - 1


# A unit is K, M, G, T or P with an optional B, i or iB, or a bare B (not
# "iB" alone): what mc_parse_size() takes.
_SIZE_RE = re.compile(r"^[ \t]*\+?(\d+)(?:\.(\d+))?[ \t]*"
                      r"(?:([kmgtp])(?:ib|i|b)?|b)?[ \t]*$", re.IGNORECASE)


def parse_size(name, value):
    """A size argument as an int: an int, or a string of digits or with
    a unit ("4GB", "1.5 GiB", "64k"; K, M, G, T, P are powers of 1024
    with or without B/iB, as the C library's configuration reads them).
    TypeError names the argument for another type, ValueError for a
    string that is no size or a negative number."""
    if isinstance(value, bool):
        raise TypeError(f"setup(): {name} must be an int or a size string "
                        f"such as '4GB', not bool")
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode(errors="replace")
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m or (m.group(2) and not m.group(3)):
            raise ValueError(f"setup(): {name}={value!r} is not a size "
                             f"(an int, or a string such as '4GB')")
        shift = 10 * " kmgtp".index((m.group(3) or " ").lower())
        n = int(m.group(1)) << shift
        if m.group(2):
            n += (int(m.group(2)) << shift) // 10 ** len(m.group(2))
    else:
        try:
            n = operator.index(value)
        except TypeError:
            raise TypeError(f"setup(): {name} must be an int or a size "
                            f"string such as '4GB', not "
                            f"{type(value).__name__}") from None
        if n < 0:
            raise ValueError(f"setup(): {name}={n} is negative")
    # ctypes cuts a size_t to its low 64 bits (2**64 would be 0: no
    # segment, silently), and 2**64 - 1 is MOONCAKE_SIZE_UNSET.
    if n >= _SIZE_UNSET:
        raise ValueError(f"setup(): {name}={value!r} is too large (at most "
                         f"{_SIZE_UNSET - 1} bytes)")
    return n


def _host(host):
    """local_hostname as the C library parses it: a bare IPv6 address
    ("::1", what vLLM's get_ip() returns on IPv6 hosts) in brackets."""
    if not host or not isinstance(host, str) or host.startswith("["):
        return host
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            return f"[{host}]"
    except ValueError:
        pass
    return host


def _refuse_features(ssd, http):
    """NotSupportedError for the features this build lacks, at the call
    that turns them on."""
    if ssd:
        raise NotSupportedError(
            "setup(): enable_ssd_offload=True is not supported: the pool "
            "has no SSD tier yet (NOT_SUPPORTED -1012)")
    if http:
        raise NotSupportedError(
            "setup(): enable_client_http_server=True is not supported: "
            "this client has no HTTP server; the master's admin HTTP "
            "serves the pool's state (NOT_SUPPORTED -1012)")


_TENANT_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _tenant(tenant_id):
    """(tenant name or None, error): None for "default" (the keyword's
    default) or "", which leave the tenant to the configuration
    (tenant_id, MOONCAKE_TENANT_ID); a name of 1-64 of [A-Za-z0-9_.-],
    not "." or "..", is the tenant whose keys this store sees
    (docs/design.md "Tenants"); anything else is an error message."""
    if tenant_id is None or tenant_id in ("", "default"):
        return None, None
    if not isinstance(tenant_id, str) or \
            not _TENANT_RE.fullmatch(tenant_id) or tenant_id in (".", ".."):
        return None, (f"setup(): tenant_id={tenant_id!r}: a tenant is 1-64 "
                      f"of [A-Za-z0-9_.-], not '.' or '..' "
                      f"(INVALID_PARAMS -600)")
    return tenant_id, None


def _configured(key, env, value, default):
    """A setup() string as libmooncake resolves it (common/mc_cfg.c,
    mooncakefs/lib/store_cfg.c): the argument when not empty, else the
    MOONCAKE_* variable, else the key of MOONCAKE_CONFIG_PATH's file,
    else the default."""
    if value:
        return value
    if os.environ.get(env):
        return os.environ[env]
    path = os.environ.get("MOONCAKE_CONFIG_PATH")
    if path:
        try:
            with open(path) as f:
                v = json.load(f).get(key)
        except (OSError, ValueError, AttributeError):
            v = None
        if v and isinstance(v, str):
            return v
    return default


def _metadata_problem(conn):
    """Why the transfer engine cannot use the metadata connection string
    conn, in its own words (te_metadata_check), or None."""
    err = ctypes.create_string_buffer(512)
    fn = _L.mooncake_te_metadata_check
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    rc = fn(conn.encode(), err, 512)
    return err.value.decode(errors="replace") if rc else None


def _rdma_check(dev):
    """mooncake_te_rdma_check(): (code, reason); 0 when rdma serves, 1
    when tcp serves instead, as the user allows, < 0 when neither."""
    err = ctypes.create_string_buffer(512)
    rc = _L.mooncake_te_rdma_check(dev.encode() if dev else None, err, 512)
    return rc, err.value.decode(errors="replace")


def _reachable(address, timeout=3.0):
    """True when something accepts TCP connections at "host:port"."""
    if not isinstance(address, str) or ":" not in address:
        return False
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _protocol(proto, dev):
    """(protocol, why not): the protocol libmooncake sets up with, the
    argument else the configuration's (mooncakefs/lib/store.c,
    check_protocol), "tcp" for rdma where tcp stands in as the user
    allows (MC_RDMA_FALLBACK_TCP); and why it cannot serve, or None."""
    used = _configured("protocol", "MOONCAKE_PROTOCOL", proto, "tcp")
    if used == "rdma":
        rc, err = _rdma_check(_configured("device_name", "MOONCAKE_DEVICE",
                                          dev, ""))
        if rc < 0:
            return used, err
        return ("rdma" if rc == OK else "tcp"), None
    if used != "tcp":
        return used, "is not available in this build of libmooncake"
    return used, None


def _refusal(proto, dev, meta):
    """The words for setup's NOT_SUPPORTED (-1012), naming what
    libmooncake refused: the protocol (one this build lacks, or rdma
    where no device serves), else the metadata address."""
    used, why = _protocol(proto, dev)
    if why:
        return (f"setup(): protocol {used!r}: {why} (NOT_SUPPORTED -1012); "
                f"use protocol='tcp'")
    conn = _configured("metadata_server", "MOONCAKE_TE_META_DATA_SERVER",
                       meta, "P2PHANDSHAKE")
    why = _metadata_problem(conn) or "refused by libmooncake (see its log)"
    return f"setup(): metadata_server {conn!r}: {why} (NOT_SUPPORTED -1012)"


class _MemPool:
    """setup_dummy's mem_pool_size bytes: anonymous memory handed out by
    alloc_from_mem_pool from the start, 4 KiB aligned (upstream's pool is
    not freed piecemeal from Python either)."""

    def __init__(self, size):
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE |
                              mmap.MAP_ANONYMOUS)
        self._base = ctypes.addressof(c_char.from_buffer(self._map))
        self._size = size
        self._used = 0
        self._lock = threading.Lock()

    def alloc(self, size):
        if size <= 0:
            return 0
        with self._lock:
            if size > self._size - self._used:
                return 0
            addr = self._base + self._used
            self._used += (size + 4095) & ~4095
            return addr


def _release(handles):
    """A store that was garbage-collected: nobody can be calling it."""
    for h in handles:
        _L.mooncake_store_destroy(h)


@atexit.register
def _close_all():
    """At exit, every store still alive leaves the pool cleanly (its
    P2PStores closed first, its segment unmounted). Handles are not freed:
    daemon threads may still be inside a call; close() waits for them."""
    for store in list(_live):
        for dep in list(store._dependents):
            dep.close(wait=False)
        for h in store._handles:
            _L.mooncake_store_close(h)


def _fresh_locks_in_child():
    """fork() copies a lock another thread of the parent held (a setup,
    close or session call in progress) as taken, and no thread of the
    child will release it: a store's close() in the child hung on it.
    The child's inherited stores only answer -1010 and forget (libmooncake
    checks), so their locks start over free."""
    for store in list(_live):
        store._setup_lock = threading.Lock()
        store._sess_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_in_child)


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
        self._mem_pool = None        # setup_dummy's mem_pool_size memory
        self._home = None            # setup_dummy's mooncake_client
        self._sess_lock = threading.Lock()
        self._get_sessions = {}      # key bytes -> mooncake_object_t
        self._put_sessions = {}      # key bytes -> (mooncake_writer_t, size)
        # register_buffer's registrations as libmooncake holds them
        # (address -> size), and the views: ranges inside one of them,
        # registered with 0 and left as they were (register_over).
        self._regs = {}
        self._views = {}
        self._rdma = False           # set up over rdma (no views then)
        # What must close before this store does (mooncake.p2p's
        # P2PStore handles): closed first by close().
        self._dependents = weakref.WeakSet()
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
        setup({...}). Sizes are ints or size strings ("4GB", "512 MiB",
        str(int)). Empty strings fall back to the file named by
        MOONCAKE_CONFIG_PATH, then to MOONCAKE_* variables, then to the
        library's defaults; a size of 0 means none, as upstream. A bare
        IPv6 local_hostname ("::1") is taken as "[::1]". tenant_id="T"
        gives this store tenant T's own key namespace ("default": the
        configuration's tenant_id / MOONCAKE_TENANT_ID, else none; a bad
        name is INVALID_PARAMS). Returns 0 or a store code.

        Raises TypeError for an unknown keyword (Python does) or a
        missing argument, and NotSupportedError (not a TypeError, so
        connectors that retry without unknown keywords do not drop the
        feature silently) for what this build cannot do: RDMA,
        enable_ssd_offload=True, enable_client_http_server=True."""
        args = [local_hostname, metadata_server, global_segment_size,
                local_buffer_size, protocol, rdma_devices,
                master_server_addr]
        if isinstance(local_hostname, dict) and all(
                a is _MISSING for a in args[1:]):
            d = local_hostname
            if "local_hostname" not in d or "metadata_server" not in d:
                raise TypeError("setup(): the dict form needs "
                                "'local_hostname' and 'metadata_server'")
            known = {"local_hostname", "metadata_server",
                     "global_segment_size", "local_buffer_size", "protocol",
                     "rdma_devices", "device_name", "master_server_addr",
                     "master_server_address", "enable_ssd_offload",
                     "ssd_offload_path", "tenant_id",
                     "enable_client_http_server", "client_http_port"}
            for k in d:
                if k not in known:
                    log.info("setup(): dict key %r is not used here", k)
            args = [d["local_hostname"], d["metadata_server"],
                    d.get("global_segment_size", 16 << 20),
                    d.get("local_buffer_size", 16 << 20),
                    d.get("protocol", "tcp"),
                    d.get("rdma_devices", d.get("device_name", "")),
                    d.get("master_server_addr",
                          d.get("master_server_address", "127.0.0.1:50051"))]
            enable_ssd_offload = d.get("enable_ssd_offload",
                                       enable_ssd_offload)
            tenant_id = d.get("tenant_id", tenant_id)
            enable_client_http_server = d.get("enable_client_http_server",
                                              enable_client_http_server)
        names = ("local_hostname", "metadata_server", "global_segment_size",
                 "local_buffer_size", "protocol", "rdma_devices",
                 "master_server_addr")
        missing = [n for n, a in zip(names, args) if a is _MISSING]
        if missing:
            raise TypeError("setup() missing required argument(s): "
                            + ", ".join(repr(n) for n in missing))
        _refuse_features(enable_ssd_offload, enable_client_http_server)
        tenant, why = _tenant(tenant_id)
        if why:
            log.error("%s", why)
            return INVALID_PARAMS
        if engine is not None:
            log.warning("setup(): the transfer engine passed (%r) is not "
                        "shared: this store runs its own, so register its "
                        "buffers with register_buffer", engine)
        host, meta, seg, buf, proto, dev, master = args
        try:
            seg = parse_size("global_segment_size", seg)
            buf = parse_size("local_buffer_size", buf)
        except ValueError as e:
            # upstream returns an error for a size it cannot read ("50%")
            log.error("%s", e)
            return INVALID_PARAMS
        return self._setup(_host(host), meta, seg, buf, proto, dev, master,
                           tenant)

    def _setup(self, host, meta, seg, buf, proto, dev, master, tenant=None):
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
            # The tenant's key prefix is added and stripped by libmooncake
            # (one place for C and Python alike); None: the configuration's.
            rc = _L.mooncake_store_set_tenant(self._h, s(tenant))
            if rc == OK:
                rc = _L.mooncake_store_setup(self._h, s(host), s(meta), seg,
                                             buf, s(proto), s(dev),
                                             s(master))
            # register_buffer's record follows the transport: over rdma
            # a range inside a registration replaces it (register_over).
            self._rdma = rc == OK and _protocol(proto, dev)[0] == "rdma"
        if rc == NOT_SUPPORTED:
            raise NotSupportedError(_refusal(proto, dev, meta))
        if rc:
            log.error("setup failed: %s", strerror(rc))
        return rc

    def init_all(self, protocol, device_name, mount_segment_size=16 << 20):
        """Upstream's init_all: setup with everything else from the
        configuration (MOONCAKE_CONFIG_PATH, MOONCAKE_*)."""
        try:
            seg = parse_size("mount_segment_size", mount_segment_size)
        except ValueError as e:
            log.error("%s", e)
            return INVALID_PARAMS
        # local_buffer_size unset: the configuration's, not none.
        return self._setup("", "", seg, _SIZE_UNSET, protocol, device_name,
                           "")

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address,
                    ipc_socket_path=""):
        """Upstream's standalone ("dummy") client beside a local
        mooncake_client at server_address ("host:port", its transfer
        engine port): this store contributes no segment, so what it puts
        lands in the pool members' segments (the mooncake_client's
        among them). The master and metadata server come from the
        configuration (MOONCAKE_CONFIG_PATH, MOONCAKE_MASTER,
        MOONCAKE_TE_META_DATA_SERVER), as SGLang's standalone mode sets
        them. mem_pool_size bytes of host memory are reserved for
        alloc_from_mem_pool. Calls go straight to the pool, not through
        the mooncake_client over IPC (python/README.md); puts without a
        preferred segment prefer the mooncake_client's (its segment name
        is server_address), so values land in its memory as upstream's
        do. 0, or INVALID_PARAMS (-600) when nothing answers at
        server_address."""
        try:
            pool = parse_size("mem_pool_size", mem_pool_size)
            buf = parse_size("local_buffer_size", local_buffer_size)
        except ValueError as e:
            log.error("%s", e)
            return INVALID_PARAMS
        if not _reachable(server_address):
            log.error("setup_dummy(): no mooncake_client answers at %r",
                      server_address)
            return INVALID_PARAMS
        rc = self._setup(None, None, 0, buf, None, None, None)
        if rc == OK and pool:
            self._mem_pool = _MemPool(pool)
        if rc == OK:
            self._home = server_address
        return rc

    def close(self):
        """Leave the pool (waits for calls in progress). Idempotent; 0.
        Later calls return UNAVAILABLE_IN_CURRENT_STATUS (-1010); setup()
        may be called again. A P2PStore (mooncake.p2p) still open on it
        is closed first."""
        for dep in list(self._dependents):
            dep.close()
        with self._setup_lock:
            self._end_sessions()
            with self._sess_lock:
                # the handle's registrations go with it
                self._regs.clear()
                self._views.clear()
            self._closed = True
            self._home = None
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
        transport ("tcp", "rdma", "shm", "local") since setup, as a dict
        of read_bytes, write_bytes, read_requests, write_requests,
        failed_requests and served_bytes, and what it holds now
        (connections, registrations, inflight: rdma's queue pairs, memory
        regions and posted requests); None before setup, after close or
        for another name."""
        st = _lib.TransferStatsC()
        if _L.mooncake_store_transfer_stats(self._h, transport.encode(),
                                            ctypes.byref(st)):
            return None
        return {f: getattr(st, f) for f, _ in st._fields_}

    def location_cache_stats(self):
        """Ours: the location cache (docs/design.md, "One round trip per
        get") as a dict of keys (cached now), hits and misses (lookups),
        stale (hits that then asked the master), touched (cached keys
        read and renewed at the master, per key and round) and dropped
        (keys the master no longer had, or had another version of);
        None before setup or after close."""
        st = _lib.LocationCacheStatsC()
        if _L.mooncake_store_location_cache_stats(self._h,
                                                  ctypes.byref(st)):
            return None
        return {f: getattr(st, f) for f, _ in st._fields_}

    def set_timeouts(self, rpc_ms=0, transfer_ms=0):
        """Ours: RPC and transfer timeouts in ms (0 keeps the value)."""
        return _L.mooncake_store_set_timeouts(self._h, rpc_ms, transfer_ms)

    # ---- configuration ---------------------------------------------------

    def _cfg(self, config, n):
        """(pointer or None, keepalive) for a ReplicateConfig of a put of
        n keys; raises _BadConfig for a replica_num libmooncake would
        refuse or group_ids that do not match the keys."""
        if config is None or config is _DEFAULT_CONFIG:
            if not self._home:
                return None, None
            config = _DEFAULT_CONFIG
        _group_ids(config.group_ids, n)
        if config.soft_pin_ttl_ms is not None and \
                config.soft_pin_action != SoftPinAction.ENABLE:
            # upstream: a TTL only goes with soft_pin_action=ENABLE
            log.warning("soft_pin_ttl_ms without soft_pin_action=ENABLE")
            raise _BadConfig()
        replicas = _replica_num(config.replica_num)
        segs = []
        if config.preferred_segment:
            segs.append(config.preferred_segment)
        segs += [x for x in (config.preferred_segments or []) if x]
        if config.prefer_alloc_in_same_node:
            me = self._home or self.get_hostname()
            if me:
                segs.append(me)
        if self._home and not segs:
            # A setup_dummy store's puts go to its mooncake_client's
            # memory first, as upstream's go through that client.
            segs.append(self._home)
        segs = list(dict.fromkeys(segs))
        soft = bool(config.with_soft_pin) or \
            config.soft_pin_action == SoftPinAction.ENABLE
        groups = list(config.group_ids or [])
        if (replicas == 1 and not segs and not soft
                and not config.with_hard_pin and not groups):
            return None, None
        arr = (c_char_p * len(segs))(*[x.encode() for x in segs]) \
            if segs else None
        garr = (c_char_p * len(groups))(*[g.encode() for g in groups]) \
            if groups else None
        c = _lib.ReplicateConfigC(replicas,
                                  soft,
                                  bool(config.with_hard_pin), arr, len(segs),
                                  garr, len(groups))
        return byref(c), (c, arr, garr)

    # ---- zero-copy calls ---------------------------------------------------

    def register_buffer(self, buffer_ptr, size):
        """Register memory for the zero-copy calls: host memory, or CUDA
        device memory (a tensor's data_ptr(); the transfer engine stages
        it through pinned host buffers, docs/design.md "GPU memory"); 0 or
        a code. A range inside a registered buffer (a view of it) is 0
        and leaves that buffer registered as it is (over rdma it replaces
        it); one that overlaps registered buffers otherwise replaces them
        (their memory was freed without unregistering), -600 when a
        transfer still uses one. A device memory where the process has
        no CUDA driver raises NotSupportedError."""
        buffer_ptr = _int_arg(buffer_ptr, "register_buffer", "buffer_ptr")
        size = _int_arg(size, "register_buffer", "size")
        rc = _L.mooncake_store_register_buffer(self._h, buffer_ptr, size)
        if rc == NOT_SUPPORTED:
            raise NotSupportedError(
                f"register_buffer({buffer_ptr:#x}): device memory is not "
                f"supported by this build (NOT_SUPPORTED -1012)")
        if rc == OK:
            self._registered(buffer_ptr, size, True)
        return rc

    def unregister_buffer(self, buffer_ptr):
        """0 or a code (-600 for an address not registered). A view
        (register_buffer) that does not start where its buffer does is
        forgotten (0), its buffer staying registered; at the buffer's
        start address the buffer itself is unregistered."""
        buffer_ptr = _int_arg(buffer_ptr, "unregister_buffer", "buffer_ptr")
        with self._sess_lock:
            if self._views.pop(buffer_ptr, None) is not None:
                return OK
        rc = _L.mooncake_store_unregister_buffer(self._h, buffer_ptr)
        if rc == OK:
            self._unregistered(buffer_ptr)
        return rc

    # The record of registrations follows libmooncake's register_over
    # (mooncakefs/lib/store.c): the ranged calls check their ranges
    # against it, since the C library would copy into or out of any memory
    # through its staging buffer.

    def _registered(self, ptr, size, mine):
        """Record a register_buffer of [ptr, +size) that returned 0: a
        range inside a registration leaves it as it was (a view; rdma
        excepted), any other replaced the registrations it overlaps.
        mine: register_buffer's (recorded), else a copying call's
        registration for the call (unregistered before it returns)."""
        end = ptr + size
        with self._sess_lock:
            if not self._regs and not mine:
                return
            over = [a for a, n in self._regs.items()
                    if a < end and ptr < a + n]
            if len(over) == 1 and not self._rdma and over[0] <= ptr and \
                    end <= over[0] + self._regs[over[0]]:
                if mine and ptr != over[0]:
                    self._views[ptr] = size
                return
            for a in over:
                self._drop(a)
            if mine:
                self._regs[ptr] = size

    def _unregistered(self, ptr):
        """Record an unregister of ptr that returned 0."""
        with self._sess_lock:
            if ptr in self._regs:
                self._drop(ptr)

    def _drop(self, a):
        """Forget registration a and the views inside it; caller holds
        _sess_lock."""
        end = a + self._regs.pop(a)
        for v in [v for v in self._views if a <= v < end]:
            del self._views[v]

    def _register_for_call(self, base, size):
        """Register a copying call's own buffer: 0 or a code."""
        rc = _L.mooncake_store_register_buffer(self._h, base, size)
        if rc == OK and self._regs:
            self._registered(base, size, False)
        return rc

    def _unregister_for_call(self, base):
        if _L.mooncake_store_unregister_buffer(self._h, base) == OK and \
                self._regs:
            self._unregistered(base)

    def _capacity(self, ptr):
        """Bytes from ptr to the end of the buffer registered around it
        (register_buffer), 0 when none is."""
        with self._sess_lock:
            for a, n in self._regs.items():
                if a <= ptr < a + n:
                    return a + n - ptr
        return 0

    def put_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        buffer_ptr = _int_arg(buffer_ptr, "put_from", "buffer_ptr")
        size = _int_arg(size, "put_from", "size")
        try:
            cfg, _keep = self._cfg(config, 1)
        except _BadConfig:
            return INVALID_PARAMS
        return _L.mooncake_store_put_from(self._h, _key(key), buffer_ptr,
                                          size, cfg)

    def get_into(self, key, buffer_ptr, size):
        """Bytes read, or a code (-600 when the buffer is smaller than the
        object or not registered; nothing is written then)."""
        return _L.mooncake_store_get_into(
            self._h, _key(key), _int_arg(buffer_ptr, "get_into", "buffer_ptr"),
            _int_arg(size, "get_into", "size"))

    def batch_put_from(self, keys, buffer_ptrs, sizes,
                       config=_DEFAULT_CONFIG):
        n = len(_key_list(keys, "batch_put_from"))
        if not n:
            return []
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs = _int_args(c_void_p, buffer_ptrs, "batch_put_from",
                         "buffer_ptrs")
        sizes = _int_args(c_size_t, sizes, "batch_put_from", "sizes")
        try:
            cfg, _keep = self._cfg(config, n)
        except _BadConfig:
            return [INVALID_PARAMS] * n
        ka, _kb = _key_array(keys)
        res = (c_int * n)()
        rc = _L.mooncake_store_batch_put_from(self._h, ka, ptrs, sizes, n,
                                              cfg, res)
        return [rc] * n if rc < 0 else res[:]

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        n = len(_key_list(keys, "batch_get_into"))
        if not n:
            return []
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs = _int_args(c_void_p, buffer_ptrs, "batch_get_into",
                         "buffer_ptrs")
        sizes = _int_args(c_size_t, sizes, "batch_get_into", "sizes")
        ka, _kb = _key_array(keys)
        res = (c_int64 * n)()
        rc = _L.mooncake_store_batch_get_into(self._h, ka, ptrs, sizes, n,
                                              res)
        return [rc] * n if rc < 0 else res[:]

    @staticmethod
    def _flatten(what, all_buffer_ptrs, all_sizes):
        """CSR form of ptrs[][]/sizes[][]: (ptrs, sizes, n_parts); a key
        whose lists differ in length gets no parts (so -600). A pointer or
        size that is not an int >= 0 raises TypeError naming it."""
        counts, ptrs, sizes = [], [], []
        for p, s in zip(all_buffer_ptrs, all_sizes):
            if len(p) != len(s):
                counts.append(0)
                continue
            counts.append(len(p))
            ptrs += p
            sizes += s
        try:
            flat = (_int_args(c_void_p, ptrs, what, "all_buffer_ptrs"),
                    _int_args(c_size_t, sizes, what, "all_sizes"))
        except TypeError:
            # name the bad one as the caller wrote it: all_sizes[i][j]
            for i, (p, s) in enumerate(zip(all_buffer_ptrs, all_sizes)):
                if len(p) == len(s):
                    for j in range(len(p)):
                        _int_arg(p[j], what, f"all_buffer_ptrs[{i}][{j}]")
                        _int_arg(s[j], what, f"all_sizes[{i}][{j}]")
            raise
        return (flat[0] if ptrs else None, flat[1] if sizes else None,
                _array(c_size_t, counts))

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     config=_DEFAULT_CONFIG):
        """Object i is the concatenation of the buffers all_buffer_ptrs[i]
        (sizes all_sizes[i]); list of 0 or a code."""
        n = len(_key_list(keys, "batch_put_from_multi_buffers"))
        if not n:
            return []
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs, sizes, counts = self._flatten(
            "batch_put_from_multi_buffers", all_buffer_ptrs, all_sizes)
        try:
            cfg, _keep = self._cfg(config, n)
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
        n = len(_key_list(keys, "batch_get_into_multi_buffers"))
        if not n:
            return []
        if len(all_buffer_ptrs) != n or len(all_sizes) != n:
            return [INVALID_PARAMS] * n
        ptrs, sizes, counts = self._flatten(
            "batch_get_into_multi_buffers", all_buffer_ptrs, all_sizes)
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
            cfg, _keep = self._cfg(config, n)
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
        rc = self._register_for_call(base, len(region))
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
            self._unregister_for_call(base)
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
        if len(_key_list(keys, "put_batch")) != len(values):
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
                rc = self._register_for_call(addr, len(bufs[i]))
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
                self._unregister_for_call(addr)
            del views

    def _get_many(self, keys, handles):
        """Objects of keys as bytes (b"" when missing) or, with handles, as
        BufferHandle (None when missing). Sizes first (one batch_get_size),
        then one batch_get_into: into one region for bytes, straight into
        each handle otherwise. A key replaced by a larger object between
        the two (its read refused: the buffer is too small) is read again
        at its new size, up to three more times."""
        kb = _keys(keys)
        out = [None if handles else b""] * len(kb)
        todo = list(range(len(kb)))
        for _ in range(4):
            sizes = self._sizes([kb[i] for i in todo])
            got = self._get_sized([kb[i] for i in todo], sizes, handles)
            again = []
            for i, size, r in zip(todo, sizes, got):
                if r == INVALID_PARAMS and size > 0:
                    again.append(i)  # grew meanwhile (or a bad read)
                elif not isinstance(r, int):
                    out[i] = r
            if not again:
                break
            todo = again
        return out

    def _get_sized(self, kb, sizes, handles):
        """Read keys kb of the sizes given: per key its bytes (or
        BufferHandle), or a code (0 for a key not read: missing, empty)."""
        live = [i for i, s in enumerate(sizes) if s > 0]
        out = [0] * len(kb)
        if not live:
            return out
        if handles:
            bufs = [BufferHandle(s) if s > 0 else None for s in sizes]
            for i, r in self._read(kb, bufs, sizes, live).items():
                out[i] = r if r < 0 else bufs[i] if r == sizes[i] else \
                    BufferHandle(bufs[i][:r])
            return out
        region = bytearray(sum(sizes[i] for i in live))
        # One region, one registration: key i reads into region[off[i]:].
        offs, off = {}, 0
        for i in live:
            offs[i] = off
            off += sizes[i]
        mv = memoryview(region)
        base, view = _address(region)
        rc = self._register_for_call(base, len(region))
        if rc:
            return [rc] * len(kb)
        try:
            m = len(live)
            res = (c_int64 * m)()
            rc = _L.mooncake_store_batch_get_into(
                self._h, (c_char_p * m)(*[kb[i] for i in live]),
                _array(c_void_p, [base + offs[i] for i in live]),
                _array(c_size_t, [sizes[i] for i in live]), m, res)
        finally:
            self._unregister_for_call(base)
            del view
        for j, i in enumerate(live):
            r = rc if rc < 0 else res[j]
            out[i] = r if r < 0 else bytes(mv[offs[i]:offs[i] + r])
        mv.release()
        return out

    def get(self, key):
        """The object's bytes; empty bytes when it is missing or on any
        error (as upstream)."""
        return self._get_many([key], False)[0]

    def get_batch(self, keys):
        """list of bytes (empty for missing keys and errors)."""
        _key_list(keys, "get_batch")
        return self._get_many(keys, False) if keys else []

    def get_buffer(self, key):
        """A BufferHandle (buffer protocol, ptr(), size()) or None."""
        return self._get_many([key], True)[0]

    def batch_get_buffer(self, keys):
        """list of BufferHandle, None where a key is missing."""
        _key_list(keys, "batch_get_buffer")
        return self._get_many(keys, True) if keys else []

    # ---- metadata calls ----------------------------------------------------

    def is_exist(self, key):
        """1, 0 or a negative code (grants a lease, as upstream)."""
        return _L.mooncake_store_is_exist(self._h, _key(key))

    def batch_is_exist(self, keys):
        n = len(_key_list(keys, "batch_is_exist"))
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
        n = len(_key_list(keys, "batch_remove"))
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
        for k in _key_list(keys, "batch_get_replica_desc"):
            d = self.get_replica_desc(k)
            if d:
                out[k] = d
        return out

    def alloc_from_mem_pool(self, size):
        """An address of size bytes in the memory setup_dummy reserved
        (mem_pool_size), 4 KiB aligned; 0 when it is full or this store
        was not set up with setup_dummy (upstream's real client returns 0
        too). Register it with register_buffer before zero-copy calls."""
        pool = self._mem_pool
        return pool.alloc(int(size)) if pool else 0


    # ---- ranged reads: get_into_ranges and get sessions -------------------
    #
    # Over the C library's object handles (include/mooncake/store_fs.h):
    # mooncake_store_object_open fetches the replicas once and holds the
    # object (renewed in the background) until it is closed, so every
    # range read of it reads the same bytes even if the key is removed or
    # replaced meanwhile; mooncake_store_object_read copies one range.

    def _open(self, kb):
        """(handle, 0) or (None, code) for one encoded key."""
        if kb is None:
            return None, INVALID_PARAMS
        out = c_void_p()
        rc = _L.mooncake_store_object_open(self._h, kb, byref(out))
        return (out.value, 0) if rc == 0 else (None, rc)

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets,
                        all_src_offsets, all_sizes):
        """Copy byte ranges of objects into buffers: buffer i receives,
        for each key j of all_keys[i], the ranges
        [all_src_offsets[i][j][k], +all_sizes[i][j][k]) of the object at
        buffer_ptrs[i] + all_dst_offsets[i][j][k]. Returns results of the
        same shape: bytes copied per range, or a code (-704 missing key,
        -600 for mismatched lists). Offsets and sizes are non-negative
        ints: a range that is not, or passes the object's end, or the end
        of the buffer registered (register_buffer) around buffer_ptrs[i],
        is -600 and copies nothing; so is every range of a buffer not
        registered. Each key is looked up once per call."""
        n = len(buffer_ptrs)
        _key_list(all_keys, "get_into_ranges")
        for keys in all_keys:
            _key_list(keys, "get_into_ranges")
        shape_ok = (len(all_keys) == n and len(all_dst_offsets) == n and
                    len(all_src_offsets) == n and len(all_sizes) == n)

        def bad(keys, dsts):
            return [[INVALID_PARAMS] * len(d) for d in dsts] \
                if len(keys) == len(dsts) else \
                [[INVALID_PARAMS] for _ in keys]
        if not shape_ok:
            return [bad(k, d) for k, d in zip(all_keys, all_dst_offsets)] \
                if len(all_keys) == len(all_dst_offsets) else []
        opened = {}
        try:
            out = []
            for i in range(n):
                keys, dsts = all_keys[i], all_dst_offsets[i]
                srcs, sizes = all_src_offsets[i], all_sizes[i]
                if not (len(keys) == len(dsts) == len(srcs) == len(sizes)):
                    out.append(bad(keys, dsts))
                    continue
                base = _count(buffer_ptrs[i])
                cap = self._capacity(base) if base is not None else 0
                row = []
                for key, d, so, sz in zip(keys, dsts, srcs, sizes):
                    if not (len(d) == len(so) == len(sz)):
                        row.append([INVALID_PARAMS] * len(d))
                        continue
                    kb = _key(key)
                    if kb not in opened:
                        opened[kb] = self._open(kb)
                    obj, rc = opened[kb]
                    if obj is None:
                        row.append([rc] * len(d))
                        continue
                    size = _L.mooncake_store_object_size(obj)
                    got = []
                    for dd, o, z in zip(d, so, sz):
                        dd, o, z = _count(dd), _count(o), _count(z)
                        if dd is None or o is None or z is None or \
                                not cap or o + z > size or dd + z > cap:
                            got.append(INVALID_PARAMS)
                        else:
                            got.append(_L.mooncake_store_object_read(
                                obj, o, base + dd, z))
                    row.append(got)
                out.append(row)
            return out
        finally:
            for obj, _ in opened.values():
                if obj:
                    _L.mooncake_store_object_close(obj)

    def batch_get_session_start(self, keys):
        """Look each key up once and hold it for the ranged reads of
        batch_get_into_multi_buffer_ranges until batch_get_session_end:
        0 per key, or a code (-704 missing). A key already in a session
        is looked up again."""
        out = []
        for key in _key_list(keys, "batch_get_session_start"):
            kb = _key(key)
            obj, rc = self._open(kb)
            with self._sess_lock:
                old = self._get_sessions.pop(kb, None)
                if obj:
                    self._get_sessions[kb] = obj
            if old:
                _L.mooncake_store_object_close(old)
            out.append(rc)
        return out

    def _ranges(self, ptrs, sizes, offs, size):
        """One key's ranges as [(address, size, offset)], or None unless
        all are non-negative ints, each [offset, +size) inside the object
        (size bytes) and [address, +size) inside a buffer registered with
        register_buffer."""
        if not (len(ptrs) == len(sizes) == len(offs)):
            return None
        out = []
        for p, z, o in zip(ptrs, sizes, offs):
            p, z, o = _count(p), _count(z), _count(o)
            if p is None or z is None or o is None or o + z > size:
                return None
            cap = self._capacity(p)
            if not cap or z > cap:
                return None
            out.append((p, z, o))
        return out

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs,
                                           all_sizes, all_src_offsets):
        """For each key in a get session: copy [all_src_offsets[i][k],
        +all_sizes[i][k]) of its object to all_buffer_ptrs[i][k]. Bytes
        copied per key, or a code: -600 when the key has no session, the
        lists differ in length, or a range is not non-negative ints,
        passes the object's end or does not lie inside a buffer
        registered with register_buffer (nothing is copied for that
        key); -707 when its hold lapsed."""
        n = len(_key_list(keys, "batch_get_into_multi_buffer_ranges"))
        if len(all_buffer_ptrs) != n or len(all_sizes) != n or \
                len(all_src_offsets) != n:
            return [INVALID_PARAMS] * n
        out = []
        for key, ptrs, sizes, offs in zip(keys, all_buffer_ptrs, all_sizes,
                                          all_src_offsets):
            with self._sess_lock:
                obj = self._get_sessions.get(_key(key))
            ranges = self._ranges(
                ptrs, sizes, offs,
                _L.mooncake_store_object_size(obj)) if obj else None
            if ranges is None:
                out.append(INVALID_PARAMS)
                continue
            total = 0
            for p, z, o in ranges:
                r = _L.mooncake_store_object_read(obj, o, p, z)
                if r < 0:
                    total = r
                    break
                total += r
            if total == -707:
                with self._sess_lock:
                    self._get_sessions.pop(_key(key), None)
                _L.mooncake_store_object_close(obj)
            out.append(total)
        return out

    def batch_get_session_end(self, keys):
        """Release the keys' get sessions; 0."""
        _key_list(keys, "batch_get_session_end")
        with self._sess_lock:
            objs = [self._get_sessions.pop(_key(k), None) for k in keys]
        for obj in objs:
            if obj:
                _L.mooncake_store_object_close(obj)
        return OK

    # ---- put sessions -------------------------------------------------------
    #
    # Over the C library's writers: mooncake_store_writer_open reserves the
    # object's replicas (PutStart), writer_write fills ranges, and
    # writer_close commits (PutEnd) or revokes.

    def batch_put_session_start(self, keys, sizes, config=_DEFAULT_CONFIG):
        """Reserve objects of the given sizes, written later by
        batch_put_from_multi_buffer_ranges and made readable by
        batch_put_session_end: 0 per key or a code (-705 when the key
        exists, -200 when the pool is full, -600 for a size that is not a
        positive int: an empty object is refused, as by put)."""
        n = len(_key_list(keys, "batch_put_session_start"))
        if len(sizes) != n:
            return [INVALID_PARAMS] * n
        try:
            cfg, _keep = self._cfg(config, n)
        except _BadConfig:
            return [INVALID_PARAMS] * n
        out = []
        for key, size in zip(keys, sizes):
            kb = _key(key)
            size = _count(size)
            if kb is None or not size:
                out.append(INVALID_PARAMS)
                continue
            with self._sess_lock:
                busy = kb in self._put_sessions
            if busy:
                out.append(INVALID_PARAMS)
                continue
            w = c_void_p()
            rc = _L.mooncake_store_writer_open(self._h, kb, size, cfg,
                                               byref(w))
            if rc == 0:
                with self._sess_lock:
                    self._put_sessions[kb] = (w.value, size)
            out.append(rc)
        return out

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs,
                                           all_sizes, all_dst_offsets):
        """Write all_sizes[i][k] bytes at all_buffer_ptrs[i][k] to offset
        all_dst_offsets[i][k] of key i's reserved object: 0 per key or a
        code: -600 without a session, when the lists differ in length, or
        when a range is not non-negative ints, passes the object's end
        or does not lie inside a buffer registered with register_buffer
        (nothing is written for that key then)."""
        n = len(_key_list(keys, "batch_put_from_multi_buffer_ranges"))
        if len(all_buffer_ptrs) != n or len(all_sizes) != n or \
                len(all_dst_offsets) != n:
            return [INVALID_PARAMS] * n
        out = []
        for key, ptrs, sizes, offs in zip(keys, all_buffer_ptrs, all_sizes,
                                          all_dst_offsets):
            with self._sess_lock:
                w, size = self._put_sessions.get(_key(key), (None, 0))
            ranges = self._ranges(ptrs, sizes, offs, size) if w else None
            if ranges is None:
                out.append(INVALID_PARAMS)
                continue
            rc = OK
            for p, z, o in ranges:
                rc = _L.mooncake_store_writer_write(w, o, p, z)
                if rc:
                    break
            out.append(rc)
        return out

    def _end_put(self, keys, commit, what):
        out = []
        for key in _key_list(keys, what):
            with self._sess_lock:
                w, _ = self._put_sessions.pop(_key(key), (None, 0))
            out.append(_L.mooncake_store_writer_close(w, commit) if w
                       else INVALID_PARAMS)
        return out

    def batch_put_session_end(self, keys):
        """Commit the keys' reserved objects (readable from now on; bytes
        never written read as zeros): 0 per key or a code."""
        return self._end_put(keys, True, "batch_put_session_end")

    def batch_put_session_revoke(self, keys):
        """Drop the keys' reserved objects: 0 per key or a code."""
        return self._end_put(keys, False, "batch_put_session_revoke")

    def _end_sessions(self):
        """close(): release every session still open."""
        with self._sess_lock:
            objs = list(self._get_sessions.values())
            writers = [w for w, _ in self._put_sessions.values()]
            self._get_sessions.clear()
            self._put_sessions.clear()
        for obj in objs:
            _L.mooncake_store_object_close(obj)
        for w in writers:
            _L.mooncake_store_writer_close(w, False)

    # ---- upserts --------------------------------------------------------------
    #
    # Insert or replace: the value is put under a fresh temporary key, then
    # renamed over the key in one step (mooncake_store_rename replaces), so
    # readers see the old object or the new one, never a mix, and readers
    # holding the old one keep reading it.

    @staticmethod
    def _tmp_key(kb, short=False):
        """An upsert's temporary key: "<key>.mc-upsert.<16 hex>"; short,
        one no longer than the key (its head, then the tag), which fits
        wherever the key does (the master's max_key_length, a tenant's
        prefix), for a key the tag would make too long."""
        tag = b".mc-upsert." + os.urandom(8).hex().encode()
        return kb[:max(len(kb) - len(tag), 0)] + tag if short else kb + tag

    def _publish(self, pairs):
        """Rename each (tmp, key) whose put returned 0; codes per pair."""
        out = []
        for tmp, kb, rc in pairs:
            if rc == OK:
                rc = _L.mooncake_store_rename(self._h, tmp, kb, False)
                if rc:
                    _L.mooncake_store_remove(self._h, tmp, True)
            out.append(rc)
        return out

    def _upsert_many(self, keys, put):
        """put(tmp_keys, indices) -> codes; then the renames. A key whose
        temporary key is too long (-400) is put again under a short
        one."""
        kbs = [_key(k) for k in keys]
        codes = [INVALID_PARAMS] * len(keys)
        live = [i for i, kb in enumerate(kbs) if kb is not None]
        for short in (False, True):
            if not live:
                break
            tmps = [self._tmp_key(kbs[i], short) for i in live]
            res = put(tmps, live)
            done, again = [], []
            for i, tmp, rc in zip(live, tmps, res):
                if rc == INVALID_KEY and not short:
                    again.append(i)
                else:
                    done.append((i, tmp, rc))
            published = self._publish([(tmp, kbs[i], rc)
                                       for i, tmp, rc in done])
            for (i, _, _), rc in zip(done, published):
                codes[i] = rc
            live = again
        return codes

    def upsert(self, key, value, config=_DEFAULT_CONFIG):
        """put() that replaces an existing object: 0 or a code."""
        return self.upsert_batch([key], [value], config)

    def upsert_parts(self, key, *parts, config=_DEFAULT_CONFIG):
        return self._upsert_many(
            [key], lambda t, idx: self._put_parts_batch(t, [list(parts)],
                                                        config))[0]

    def upsert_batch(self, keys, values, config=_DEFAULT_CONFIG):
        """put_batch() that replaces: 0 when all succeeded, else the first
        failure's code."""
        if len(_key_list(keys, "upsert_batch")) != len(values):
            return INVALID_PARAMS
        if not keys:
            return OK
        res = self._upsert_many(
            keys, lambda t, idx: self._put_parts_batch(
                t, [[values[i]] for i in idx], config))
        return next((r for r in res if r), OK)

    def upsert_from(self, key, buffer_ptr, size, config=_DEFAULT_CONFIG):
        return self.batch_upsert_from(
            [key], [_int_arg(buffer_ptr, "upsert_from", "buffer_ptr")],
            [_int_arg(size, "upsert_from", "size")], config)[0]

    def batch_upsert_from(self, keys, buffer_ptrs, sizes,
                          config=_DEFAULT_CONFIG):
        """batch_put_from() that replaces: 0 or a code per key."""
        n = len(_key_list(keys, "batch_upsert_from"))
        if len(buffer_ptrs) != n or len(sizes) != n:
            return [INVALID_PARAMS] * n
        if not n:
            return []
        # checked before the temporary puts
        _int_args(c_void_p, buffer_ptrs, "batch_upsert_from", "buffer_ptrs")
        _int_args(c_size_t, sizes, "batch_upsert_from", "sizes")
        return self._upsert_many(
            keys, lambda t, idx: self.batch_put_from(
                t, [buffer_ptrs[i] for i in idx], [sizes[i] for i in idx],
                config))

    def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr,
                               size, metadata_size, config=_DEFAULT_CONFIG):
        """One object: metadata_size bytes at metadata_buffer_ptr, then
        size bytes at buffer_ptr (both registered); 0 or a code."""
        what = "put_from_with_metadata"
        buffer_ptr = _int_arg(buffer_ptr, what, "buffer_ptr")
        metadata_buffer_ptr = _int_arg(metadata_buffer_ptr, what,
                                       "metadata_buffer_ptr")
        size = _int_arg(size, what, "size")
        metadata_size = _int_arg(metadata_size, what, "metadata_size")
        return self.batch_put_from_multi_buffers(
            [key], [[metadata_buffer_ptr, buffer_ptr]],
            [[metadata_size, size]], config)[0]

    # ---- what this build does not have ---------------------------------------

    def get_offload_rpc_read_count(self):
        """Reads served from an SSD offload tier: 0, there is none."""
        return 0

    def _refuse(self, what, why):
        raise NotSupportedError(f"{what}: {why} (NOT_SUPPORTED -1012; "
                                f"python/README.md)")

    def mount_segment(self, *args, **kwargs):
        self._refuse("mount_segment", "extra segments are not supported; "
                     "setup() contributes one segment per client")

    unmount_segment = allocate_and_mount_segment = mount_segment
    unmount_and_free_segment = unmount_local_disk_segment = mount_segment

    def create_copy_task(self, *args, **kwargs):
        self._refuse("replica tasks", "the master has no task manager "
                     "(copy, move); use replica_num at put time")

    create_move_task = query_task = create_copy_task

    def batch_replica_clear(self, *args, **kwargs):
        self._refuse("batch_replica_clear", "clearing replicas per segment "
                     "is not supported; use remove or batch_remove")

    def _no_tensors(self, *args, **kwargs):
        self._refuse("tensor helpers", "torch tensors are not supported "
                     "by this package (host buffers only); use put_from / "
                     "get_into with the tensor's data_ptr()")


for _name in ("put_tensor", "get_tensor", "batch_put_tensor",
              "batch_get_tensor", "pub_tensor", "batch_pub_tensor",
              "put_tensor_with_tp", "get_tensor_with_tp",
              "batch_put_tensor_with_tp", "batch_get_tensor_with_tp",
              "pub_tensor_with_tp", "batch_pub_tensor_with_tp",
              "put_tensor_from", "batch_put_tensor_from",
              "put_tensor_with_tp_from", "batch_put_tensor_with_tp_from",
              "get_tensor_into", "batch_get_tensor_into",
              "get_tensor_with_tp_into", "batch_get_tensor_with_tp_into",
              "get_tensor_into_cuda", "batch_get_tensor_into_cuda",
              "put_tensor_with_parallelism", "get_tensor_with_parallelism",
              "batch_put_tensor_with_parallelism",
              "batch_get_tensor_with_parallelism",
              "put_tensor_with_parallelism_from",
              "batch_put_tensor_with_parallelism_from",
              "get_tensor_with_parallelism_into",
              "batch_get_tensor_with_parallelism_into",
              "upsert_tensor", "batch_upsert_tensor", "upsert_tensor_from",
              "batch_upsert_tensor_from", "upsert_pub_tensor",
              "batch_upsert_pub_tensor", "upsert_tensor_with_parallelism",
              "batch_upsert_tensor_with_parallelism",
              "upsert_tensor_with_parallelism_from",
              "batch_upsert_tensor_with_parallelism_from",
              "save_tensor_to_safetensor", "load_tensor_from_safetensor"):
    setattr(MooncakeDistributedStore, _name,
            MooncakeDistributedStore._no_tensors)


def bind_to_numa_node(node):
    """Run this process on the CPUs of NUMA node `node` (sysfs), as
    upstream's (which also prefers the node's memory; libnuma is not
    used here). Logs a warning and does nothing when the node is
    unknown."""
    try:
        with open(f"/sys/devices/system/node/node{int(node)}/cpulist") as f:
            text = f.read().strip()
    except (OSError, ValueError):
        log.warning("bind_to_numa_node(%r): no such NUMA node", node)
        return
    cpus = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    if cpus:
        os.sched_setaffinity(0, cpus)
