# SPDX-License-Identifier: Apache-2.0
"""mooncake.engine: upstream's ``TransferEngine`` over libte.

A drop-in for ``mooncake.engine`` of upstream's mooncake-transfer-engine
wheel, written with ctypes over the transfer engine that libmooncake.so
exports (include/mooncake/te_so.h, forwards of include/mooncake/te.h):
the same class, method names, argument orders and return conventions
(0 or a negative number; batch ids; ``get_notifies`` lists of
``TransferNotify``). vLLM's MooncakeConnector and SGLang's mooncake
disaggregation backend import it.

Transports: ``protocol="tcp"`` lets the engine pick per request, as
libmooncake's store does: TCP (upstream's framing, so upstream peers
interoperate), shared memory to a peer on this host whose buffer is
shareable (``allocate_managed_buffer`` memory is), or memcpy to this
engine itself. ``"shm"`` pins shared memory. RDMA, EFA, NVLink, HIP and
CUDA streams raise NotSupportedError when asked for (python/README.md).

Calls release the GIL (ctypes does); an engine may be used from any
number of threads.
"""
import ctypes
import enum
import errno
import functools
import ipaddress
import json
import logging
import os
import threading
import time
import weakref
from array import array as _u64array
from ctypes import byref, c_int, c_uint64, c_void_p

from . import _lib
from .store import NotSupportedError, _host

_L = _lib.bind_te()
log = logging.getLogger("mooncake.engine")

__all__ = ["TransferEngine", "TransferNotify", "TransferOpcode",
           "InnerTransferEngine",
           "NotSupportedError", "SUPPORT_CUDA", "SUPPORT_EFA",
           "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_INTRA_NVLINK"]

# Upstream's compile-time feature flags: this build has none of them.
SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_MNNVL = False
SUPPORT_INTRA_NVLINK = False

# Upstream's transfer engine codes (mooncake-transfer-engine error.h).
ERR_INVALID_ARGUMENT = -1
ERR_TOO_MANY_REQUESTS = -2
ERR_ADDRESS_NOT_REGISTERED = -3
ERR_BATCH_BUSY = -4
ERR_DEVICE_NOT_FOUND = -6
ERR_ADDRESS_OVERLAPPED = -7
ERR_METADATA = -200
ERR_MEMORY = -302
ERR_NOT_IMPLEMENTED = -303

P2PHANDSHAKE = "P2PHANDSHAKE"
# include/mooncake/mc_err.h
_MC_ENOTREG = -4014
_MC_ENOTSUPPORTED = -4018
_MC_EFORKED = -4028
_RDMA_FALLBACK = 1           # te_rdma_check(): tcp serves, as allowed
_TE_READ, _TE_WRITE = 0, 1
_TE_WAITING, _TE_COMPLETED, _TE_TIMEOUT, _TE_FAILED = 0, 4, 5, 6
_ERRLEN = 512


class TransferOpcode(enum.IntEnum):
    """Upstream's TransferOpcode: ``Read`` and ``Write`` (the binding's
    names), with ``READ``/``WRITE`` as in upstream's documentation."""
    Read = 0
    Write = 1
    READ = 0
    WRITE = 1


# pybind11's export_values(): the members at module level too.
Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification: ``name`` and ``msg`` (strings), sent with
    ``transfer_sync``/``batch_transfer_sync`` once their data has landed,
    received with ``get_notifies``."""
    __slots__ = ("name", "msg")

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"

    def __eq__(self, other):
        return (isinstance(other, TransferNotify) and
                (self.name, self.msg) == (other.name, other.msg))

    __hash__ = None


def _err(buf):
    return buf.value.decode(errors="replace")


# The mc_err.h codes libte returns (include/mooncake/mc_err.h).
_MC_WORDS = {
    -4005: "MC_ENOSEGMENT: segment not found",
    -4008: "MC_ETRANSFER: data transfer failed",
    -4012: "MC_EHTTP: unexpected HTTP status",
    -4013: "MC_EMETACONFLICT: metadata entry already held by another peer",
    -4014: "MC_ENOTREG: address is not in registered memory",
    -4018: "MC_ENOTSUPPORTED: not supported by this build or peer",
    -4019: "MC_EAUTHREQUIRED: authentication required",
    -4020: "MC_EAUTHFAILED: authentication failed",
    -4021: "MC_EAUTHOFF: the peer does not authenticate",
    _MC_EFORKED: "MC_EFORKED: made before fork() and used in the child",
}

# fork(): a child has none of an engine's threads and shares its sockets
# and memory with the parent, so an engine initialized before a fork
# (multiprocessing's fork start method, a DataLoader's workers, a
# pre-forking server) refuses every call in the child (libte answers
# MC_EFORKED too) and closing it there, or the child's exit, only forgets
# it: the parent's engine, its metadata entry and connections stay.
_forks = 0


def _count_fork():
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_count_fork)


def _why(rc):
    """Words for a libte code (a negative errno or an mc_err.h code)."""
    if -4000 < rc < 0:
        return f"{errno.errorcode.get(-rc, rc)} ({os.strerror(-rc)})"
    return _MC_WORDS.get(rc, f"error {rc}")


def _peer_name(name):
    """A target name as libte parses it: "::1:1234" (what f"{ip}:{port}"
    gives for an IPv6 ip) becomes "[::1]:1234"."""
    if name.startswith("[") or name.count(":") < 2:
        return name
    host, _, port = name.rpartition(":")
    if port.isdigit():
        try:
            ipaddress.IPv6Address(host)
            return f"[{host}]:{port}"
        except ValueError:
            pass
    return _host(name)


def _u64(values):
    """A ctypes uint64 array of ints (addresses or lengths)."""
    n = len(values)
    try:
        return (c_uint64 * n).from_buffer(_u64array("Q", values))
    except (TypeError, OverflowError):
        return (c_uint64 * n)(*[int(v) for v in values])


def _ptrs(values):
    n = len(values)
    try:
        return (c_void_p * n).from_buffer(_u64array("Q", values))
    except (TypeError, OverflowError):
        return (c_void_p * n)(*[int(v) for v in values])


def _destroy(state):
    """Free an engine's C objects (close(), garbage collection, and the
    interpreter's exit), once the calls in progress have returned: a
    thread mid-transfer (a daemon thread at exit) must not find the engine
    freed under it (it crashed, SIGSEGV)."""
    if state.forks != _forks:
        # The parent's, in a child: its lock may be held by a thread the
        # child lacks; nothing of it is ours to free.
        state.eng = None
        return
    with state.lock:
        eng = state.eng
        state.eng = None
        state.closing = True     # later calls raise "closed"
        # A call returns within its transfer deadline (every wait of
        # ours has one); one that does not leaves the engine unfreed.
        if not state.idle.wait_for(lambda: not state.calls,
                                   state.wait_s):
            log.warning("close(): %d calls still in progress after "
                        "%.0f s: the engine is left as it is",
                        state.calls, state.wait_s)
            return
        batches = [b for _, b in state.free_batches] + [
            b.batch for b in state.batches.values()]
        state.free_batches.clear()
        state.batches.clear()
        segs = list(state.segs.values())
        state.segs.clear()
        regions = list(state.regions)
        state.regions.clear()
        large = list(state.large)
        state.large.clear()
        state.handed.clear()
    if not eng:
        return
    for b in batches + state.zombies:
        # -EBUSY (requests still in flight) leaves it; te_engine_destroy
        # then waits for nothing of ours.
        _L.mooncake_te_batch_result(b, 0, 5000)
        _L.mooncake_te_batch_destroy(b)
    state.zombies.clear()
    for s in segs:
        _L.mooncake_te_segment_close(s)
    for addr in regions + large:
        _L.mooncake_te_unregister(eng, addr)
        _L.mooncake_te_mem_free(eng, addr)
    _L.mooncake_te_engine_destroy(eng)


def _refuse_forked(st):
    """RuntimeError for an engine initialized before a fork of which this
    is the child (checked before st.lock: a parent's thread may have held
    it at the fork)."""
    if st.eng and st.forks != _forks:
        raise RuntimeError(
            "TransferEngine: initialized before fork() and used in the "
            "child (MC_EFORKED -4028): make and initialize a "
            "TransferEngine in the child")


def _entered(method):
    """A method counted in _State.calls while it runs (close waits)."""
    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        st = self._st
        _refuse_forked(st)
        with st.lock:
            if st.closing:
                raise RuntimeError("TransferEngine: closed")
            st.calls += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            with st.lock:
                st.calls -= 1
                if not st.calls:
                    st.idle.notify_all()
    return counted


class InnerTransferEngine:
    """What TransferEngine.get_engine() returns: an opaque handle that
    keeps its engine alive."""
    __slots__ = ("_owner",)

    def __init__(self, owner):
        self._owner = owner

    def __repr__(self):
        return f"<InnerTransferEngine {self._owner.get_session_id()}>"


class _Batch:
    __slots__ = ("batch", "n", "total", "start", "cap")

    def __init__(self, batch, n, total, cap):
        self.batch = batch
        self.n = n
        self.total = total
        self.cap = cap
        self.start = time.monotonic()


class _State:
    """What the finalizer frees: everything but the Python object."""

    def __init__(self):
        self.lock = threading.Lock()
        self.eng = None
        self.forks = _forks       # _forks when made (the fork check)
        self.calls = 0            # method calls in progress (_entered)
        self.closing = False      # close() began: no new calls
        self.idle = threading.Condition(self.lock)   # calls fell to 0
        self.wait_s = 90.0        # how long close waits for them
        self.segs = {}            # target name -> te_segment *
        self.free_batches = []    # (capacity, te_batch *) to reuse
        self.batches = {}         # batch id -> _Batch (async)
        self.zombies = []         # batches given up on while in flight
        self.regions = []         # managed slab regions
        self.large = []           # managed buffers above the largest slab
        self.free_lists = {}      # slab size -> [addresses]
        self.handed = {}          # managed buffers handed out -> length


# Managed buffers: slabs of powers of two from 4 KiB to 4 MiB, carved
# from 64 MiB regions of shareable memory (te_mem_alloc), registered once;
# larger buffers get a region each. Freed slabs go back to their list.
_SLAB_MIN = 4 << 10
_SLAB_MAX = 4 << 20
_REGION = 64 << 20


def _slab_size(length):
    size = _SLAB_MIN
    while size < length:
        size <<= 1
    return size


class TransferEngine:
    """Upstream's TransferEngine: initialize, register memory, then read
    and write peers' registered memory by segment name and address."""
    TransferOpcode = TransferOpcode

    def __init__(self):
        self._st = _State()
        self._protocol = ""
        self._rpc_port = -1
        t = os.environ.get("MC_TRANSFER_TIMEOUT")
        try:
            self._timeout_s = max(5, int(t)) if t else 30
        except ValueError:
            self._timeout_s = 30
        self._next_id = 1
        self._st.wait_s = 2 * self._timeout_s + 30
        self._finalizer = weakref.finalize(self, _destroy, self._st)

    # ---- initialisation ------------------------------------------------

    def initialize(self, local_hostname, metadata_server, protocol,
                   device_name):
        """Start the engine: 0, or -1 (the cause is logged). The
        metadata server is a connection string as upstream's:
        "P2PHANDSHAKE", "http://host:port/metadata", "etcd://host:port"
        or a scheme-less etcd address. With P2PHANDSHAKE peers name this
        engine "<local_hostname>:<get_rpc_port()>"."""
        return self._init(local_hostname, metadata_server, protocol,
                          device_name)

    def initialize_ext(self, local_hostname, metadata_server, protocol,
                       device_name, metadata_type):
        """initialize() with the metadata type given apart: "etcd",
        "http" (a server without "://" becomes "<type>://<server>")."""
        conn = metadata_server
        if conn != P2PHANDSHAKE and "://" not in conn and metadata_type:
            conn = f"{metadata_type}://{conn}"
        return self._init(local_hostname, conn, protocol, device_name)

    def _init(self, local_hostname, metadata, protocol, device_name):
        proto = (protocol or "tcp").lower()
        devices = None
        if proto == "rdma":
            # rdma where this host has a device (device_name: upstream's
            # list, "" for any); tcp only where the user allows it
            # (MC_FORCE_TCP, MC_RDMA_FALLBACK_TCP=1).
            err = ctypes.create_string_buffer(_ERRLEN)
            devices = (device_name or "").encode() or None
            rc = _L.mooncake_te_rdma_check(devices, err, _ERRLEN)
            if rc < 0:
                raise NotSupportedError(
                    f"TransferEngine.initialize(): {_err(err)} "
                    f"(NOT_SUPPORTED -1012)")
            proto = "tcp" if rc == _RDMA_FALLBACK else "rdma"
        if proto == "rdma":
            transport = b"rdma"
        elif proto in ("tcp", ""):
            transport = None       # the engine picks per request
        elif proto in ("shm", "local"):
            transport = proto.encode()
        else:
            raise NotSupportedError(
                f"TransferEngine.initialize(): protocol {protocol!r} is not "
                f"available in this build (tcp, rdma and shm only; "
                f"NOT_SUPPORTED -1012)")
        if self._st.eng:
            log.error("initialize(): the engine is already initialized")
            return -1
        if not local_hostname or not metadata:
            log.error("initialize(): local_hostname and metadata_server "
                      "are required")
            return -1
        name = local_hostname
        ip = None
        host, port = name, 0
        if not name.startswith("[") and name.count(":") >= 2:
            b = _host(name)      # "::1", else "::1:port"
            name = b if b != name else _peer_name(name)
        if name.startswith("["):
            host, _, rest = name[1:].partition("]")
            if rest.startswith(":") and rest[1:].isdigit():
                port = int(rest[1:])
            ip = host
        elif ":" in name:
            host, _, p = name.rpartition(":")
            port = int(p) if p.isdigit() else 0
        # With a metadata service the name's port is the RPC port, as
        # upstream; with P2PHANDSHAKE a free one is taken (the name then
        # becomes ip:rpcport).
        rpc_port = port if metadata != P2PHANDSHAKE else 0
        eng = c_void_p()
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = _L.mooncake_te_engine_create(
            metadata.encode(), name.encode(),
            ip.encode() if ip else None, rpc_port, transport, devices,
            byref(eng),
            err, _ERRLEN)
        if rc:
            if rc == _MC_ENOTSUPPORTED:
                raise NotSupportedError(
                    f"TransferEngine.initialize(): {_err(err)}")
            log.error("TransferEngine.initialize(%r, %r): %s: %s",
                      local_hostname, metadata, _why(rc), _err(err))
            return -1
        self._st.eng = eng.value
        self._st.forks = _forks
        self._protocol = proto
        addr = _L.mooncake_te_engine_rpc_address(eng).decode()
        self._rpc_port = int(addr.rpartition(":")[2])
        return 0

    def _eng(self):
        eng = self._st.eng
        _refuse_forked(self._st)
        if not eng:
            raise RuntimeError("TransferEngine: not initialized (call "
                               "initialize() first)")
        return eng

    def transfer_stats(self, transport):
        """Ours: what this engine moved through one transport ("tcp",
        "rdma", "shm", "local") as a dict (read_bytes, write_bytes,
        read_requests, write_requests, failed_requests, served_bytes) and
        what it holds now (connections, registrations, inflight: rdma's
        queue pairs, memory regions and posted requests), and
        caller_requests (requests moved on the calling thread: tcp's
        transfer_sync* to one peer on an idle connection); None for a
        transport this build lacks."""
        st = _lib.TransferStatsC()
        if _L.mooncake_te_counters(self._eng(), transport.encode(),
                                   ctypes.byref(st)):
            return None
        return {f: getattr(st, f) for f, _ in st._fields_}

    def get_rpc_port(self):
        """The RPC (handshake) port peers reach this engine on."""
        self._eng()
        return self._rpc_port

    def get_session_id(self):
        """Ours: this engine's segment name, what peers pass as
        target_hostname (with P2PHANDSHAKE, "ip:rpcport")."""
        return _L.mooncake_te_engine_name(self._eng()).decode()

    def close(self):
        """Ours: stop the engine and free what it holds (managed buffers
        included) once the calls in progress on other threads returned;
        later calls raise RuntimeError. It is also done when the object
        is collected and at the interpreter's exit. Idempotent."""
        self._finalizer()

    def get_engine(self):
        """An InnerTransferEngine naming this engine, for
        MooncakeDistributedStore.setup(..., engine) as SGLang passes it.
        The store does not share it: it runs its own engine and logs so
        (python/README.md), so memory registered here is not registered
        with the store; register store buffers with register_buffer."""
        self._eng()
        return InnerTransferEngine(self)

    def get_engine_ptr(self):
        """The address of the libte engine (an int), valid while this
        engine lives."""
        return self._eng()

    # ---- memory ----------------------------------------------------------

    def register_memory(self, buffer_addr, capacity, location="*"):
        """Register [buffer_addr, +capacity) so peers may read and write
        it: 0, ERR_ADDRESS_OVERLAPPED (-7) over a registered range, -1.
        CUDA device memory is registered too (transfers from and to it are
        staged through pinned host memory, or copied by the driver between
        processes of one host)."""
        eng = self._eng()
        buffer_addr = int(buffer_addr)
        rc = _L.mooncake_te_register(eng, buffer_addr, int(capacity),
                                     (location or "*").encode(), 1)
        if rc == _MC_ENOTSUPPORTED:
            raise NotSupportedError(
                f"register_memory({buffer_addr:#x}): device memory is not "
                f"supported by this build (NOT_SUPPORTED -1012)")
        return self._te_code(rc, "register_memory")

    def unregister_memory(self, buffer_addr):
        """0, ERR_ADDRESS_NOT_REGISTERED (-3), ERR_BATCH_BUSY (-4) while a
        transfer uses it."""
        rc = _L.mooncake_te_unregister(self._eng(), int(buffer_addr))
        return self._te_code(rc, "unregister_memory")

    def batch_register_memory(self, buffer_addresses, capacities,
                              location="*"):
        """Register each buffer; on a failure the ones registered by this
        call are unregistered and its code returned."""
        if len(buffer_addresses) != len(capacities):
            return ERR_INVALID_ARGUMENT
        done = []
        for a, c in zip(buffer_addresses, capacities):
            rc = self.register_memory(a, c, location)
            if rc:
                for d in done:
                    _L.mooncake_te_unregister(self._st.eng, d)
                return rc
            done.append(int(a))
        return 0

    def batch_unregister_memory(self, buffer_addresses):
        """Unregister each; 0, or the first failure's code (the others are
        still unregistered)."""
        first = 0
        for a in buffer_addresses:
            rc = self.unregister_memory(a)
            first = first or rc
        return first

    @staticmethod
    def _te_code(rc, what):
        """libte's code as upstream's engine code."""
        if rc == 0:
            return 0
        code = {-errno.EEXIST: ERR_ADDRESS_OVERLAPPED,
                -errno.ENOENT: ERR_ADDRESS_NOT_REGISTERED,
                -errno.EBUSY: ERR_BATCH_BUSY,
                -errno.ENOMEM: ERR_MEMORY,
                -errno.E2BIG: ERR_TOO_MANY_REQUESTS,
                _MC_ENOTREG: ERR_ADDRESS_NOT_REGISTERED}.get(
                    rc, ERR_INVALID_ARGUMENT)
        log.warning("%s: %s", what, _why(rc))
        return code

    def allocate_managed_buffer(self, length):
        """An address of length bytes of registered, zeroed memory that
        peers on this host reach over shared memory; 0 on failure. Free it
        with free_managed_buffer(address, length)."""
        length = int(length)
        eng = self._eng()
        if length <= 0:
            return 0
        st = self._st
        if length > _SLAB_MAX:
            addr = self._new_region(eng, length)
            if addr:
                with st.lock:
                    st.large.append(addr)
                    st.handed[addr] = length
            return addr
        size = _slab_size(length)
        with st.lock:
            free = st.free_lists.setdefault(size, [])
            if free:
                addr = free.pop()
                st.handed[addr] = length
                return addr
        base = self._new_region(eng, _REGION)
        if not base:
            return 0
        with st.lock:
            st.regions.append(base)
            free = st.free_lists.setdefault(size, [])
            free.extend(range(base + _REGION - size, base - 1, -size))
            addr = free.pop()
            st.handed[addr] = length
            return addr

    @staticmethod
    def _new_region(eng, length):
        out = c_void_p()
        rc = _L.mooncake_te_mem_alloc(eng, length, None, byref(out))
        if rc:
            log.error("allocate_managed_buffer(%d): %s", length, _why(rc))
            return 0
        rc = _L.mooncake_te_register(eng, out.value, length, b"*", 1)
        if rc:
            log.error("allocate_managed_buffer(%d): register: %s", length,
                      _why(rc))
            _L.mooncake_te_mem_free(eng, out.value)
            return 0
        return out.value

    def free_managed_buffer(self, buffer_addr, length):
        """0, or ERR_INVALID_ARGUMENT (-1), freeing nothing, for an
        address allocate_managed_buffer did not return for that length
        (or one freed already)."""
        buffer_addr, length = int(buffer_addr), int(length)
        eng = self._eng()
        st = self._st
        with st.lock:
            if st.handed.get(buffer_addr) != length:
                return ERR_INVALID_ARGUMENT
            del st.handed[buffer_addr]
            if length <= _SLAB_MAX:
                st.free_lists.setdefault(_slab_size(length), []).append(
                    buffer_addr)
                return 0
            st.large.remove(buffer_addr)
        _L.mooncake_te_unregister(eng, buffer_addr)
        _L.mooncake_te_mem_free(eng, buffer_addr)
        return 0

    def get_first_buffer_address(self, segment_name):
        """The address of the first buffer a segment publishes, 0 when it
        cannot be opened or has none."""
        seg = self._segment(segment_name)
        if not seg:
            return 0
        addrs = (c_uint64 * 1)()
        n = _L.mooncake_te_segment_buffers(seg, addrs, None, 1)
        return addrs[0] if n > 0 else 0

    def write_bytes_to_buffer(self, dest_address, src_ptr, length):
        """Copy length bytes of the bytes-like src_ptr to dest_address;
        0, or -1 when src_ptr is shorter than length."""
        mv = memoryview(src_ptr).cast("B")
        length = int(length)
        if length < 0 or length > mv.nbytes:
            return ERR_INVALID_ARGUMENT
        if length:
            src = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv) \
                if mv.readonly else (ctypes.c_char * mv.nbytes).from_buffer(mv)
            ctypes.memmove(int(dest_address), src, length)
        return 0

    def read_bytes_from_buffer(self, source_address, length):
        """length bytes at source_address, as bytes."""
        return ctypes.string_at(int(source_address), int(length))

    # ---- segments ----------------------------------------------------------

    def _segment(self, target):
        """The cached te_segment of a target name (opened on first use),
        or None (logged)."""
        if not isinstance(target, str) or not target:
            log.warning("open segment %r: the target must be a segment name "
                        "(a str, \"host:port\")", target)
            return None
        st = self._st
        with st.lock:
            seg = st.segs.get(target)
        if seg:
            return seg
        eng = self._eng()
        out = c_void_p()
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = _L.mooncake_te_segment_open(eng, _peer_name(target).encode(),
                                         byref(out), err, _ERRLEN)
        if rc:
            log.warning("open segment %r: %s: %s", target, _why(rc),
                        _err(err))
            return None
        with st.lock:
            have = st.segs.get(target)
            if have is None:
                st.segs[target] = out.value
                return out.value
        _L.mooncake_te_segment_close(out.value)
        return have

    def send_probe(self, peer_server_name):
        """0 when the peer answers (its segment opens afresh), -1 else."""
        if not isinstance(peer_server_name, str) or not peer_server_name:
            log.warning("send_probe(%r): the peer must be a segment name "
                        "(a str, \"host:port\")", peer_server_name)
            return -1
        out = c_void_p()
        err = ctypes.create_string_buffer(_ERRLEN)
        rc = _L.mooncake_te_segment_open(
            self._eng(), _peer_name(peer_server_name).encode(), byref(out),
            err, _ERRLEN)
        if rc:
            return -1
        _L.mooncake_te_segment_close(out.value)
        return 0

    # ---- transfers --------------------------------------------------------

    def _take_batch(self, n):
        st = self._st
        with st.lock:
            for i, (cap, b) in enumerate(st.free_batches):
                if cap >= n:
                    del st.free_batches[i]
                    return cap, b
        cap = max(n, 16)
        out = c_void_p()
        rc = _L.mooncake_te_batch_create(self._eng(), cap, byref(out))
        if rc:
            log.warning("batch_create(%d): %s", cap, _why(rc))
            return 0, None
        return cap, out.value

    def _give_batch(self, cap, b):
        if _L.mooncake_te_batch_reset(b):
            # still in flight (a timeout): never reused, freed at close
            with self._st.lock:
                self._st.zombies.append(b)
            return
        with self._st.lock:
            if len(self._st.free_batches) < 8:
                self._st.free_batches.append((cap, b))
                return
        _L.mooncake_te_batch_destroy(b)

    def _submit(self, target, buffers, peer_addresses, lengths, opcode,
                what, in_call=False):
        """(cap, batch, total bytes) with the requests started, or None.
        in_call: submit and wait in one call (te_batch_transfer: the engine
        may move them on this thread), for a caller that waits at once."""
        n = len(buffers)
        if n != len(peer_addresses) or n != len(lengths):
            log.error("%s: buffers, peer_buffer_addresses and lengths have "
                      "different sizes", what)
            return None
        if n == 0:
            return None
        seg = self._segment(target)
        if not seg:
            return None
        cap, b = self._take_batch(n)
        if not b:
            return None
        lens = _u64(lengths)
        op = _TE_WRITE if int(opcode) == TransferOpcode.Write else _TE_READ
        if in_call:
            rc = _L.mooncake_te_batch_transfer_arrays(
                b, op, seg, _ptrs(buffers), _u64(peer_addresses), lens, n,
                self._deadline_ms(sum(lens)))
        else:
            rc = _L.mooncake_te_batch_submit_arrays(
                b, op, seg, _ptrs(buffers), _u64(peer_addresses), lens, n)
        if rc:
            log.warning("%s to %r: %s", what, target, _why(rc))
            self._give_batch(cap, b)
            return None
        return cap, b, sum(lens)

    def _deadline_ms(self, total):
        # upstream: the transfer timeout plus 1 ns per byte (1 GiB/s)
        return int(self._timeout_s * 1000 + total / 1e6) + 1

    def _sync(self, target, buffers, peer_addresses, lengths, opcode,
              notify, what):
        got = self._submit(target, buffers, peer_addresses, lengths, opcode,
                           what, in_call=True)
        if got is None:
            return -1
        cap, b, total = got
        rc = _L.mooncake_te_batch_result(b, len(buffers),
                                         self._deadline_ms(total))
        self._give_batch(cap, b)
        if rc:
            # The segment stays cached: other threads may be using it, and
            # libte resolves a peer again once it has gone stale.
            log.warning("%s to %r: %s", what, target, _why(rc))
            return -1
        if notify is not None:
            return self._notify(target, notify, what)
        return 0

    def _notify(self, target, notify, what):
        seg = self._segment(target)
        if not seg:
            return -1
        rc = _L.mooncake_te_notify(self._eng(), seg,
                                   str(notify.name).encode(),
                                   str(notify.msg).encode())
        if rc:
            log.warning("%s: notify %r: %s", what, target, _why(rc))
            return -1
        return 0

    def transfer_sync_write(self, target_hostname, buffer,
                            peer_buffer_address, length, transport_hint=""):
        """Write length bytes at local buffer to the peer's address; 0 or
        -1."""
        return self._sync(target_hostname, [buffer], [peer_buffer_address],
                          [length], TransferOpcode.Write, None,
                          "transfer_sync_write")

    def transfer_sync_read(self, target_hostname, buffer,
                           peer_buffer_address, length, transport_hint=""):
        """Read length bytes at the peer's address into buffer; 0 or -1."""
        return self._sync(target_hostname, [buffer], [peer_buffer_address],
                          [length], TransferOpcode.Read, None,
                          "transfer_sync_read")

    def transfer_sync(self, target_hostname, buffer, peer_buffer_address,
                      length, opcode, notify=None, transport_hint=""):
        """One transfer; with notify, the peer gets it once the data has
        landed. 0 or -1."""
        return self._sync(target_hostname, [buffer], [peer_buffer_address],
                          [length], opcode, notify, "transfer_sync")

    def batch_transfer_sync_write(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        return self._sync(target_hostname, buffers, peer_buffer_addresses,
                          lengths, TransferOpcode.Write, None,
                          "batch_transfer_sync_write")

    def batch_transfer_sync_read(self, target_hostname, buffers,
                                 peer_buffer_addresses, lengths,
                                 transport_hint=""):
        return self._sync(target_hostname, buffers, peer_buffer_addresses,
                          lengths, TransferOpcode.Read, None,
                          "batch_transfer_sync_read")

    def batch_transfer_sync(self, target_hostname, buffers,
                            peer_buffer_addresses, lengths, opcode,
                            notify=None, transport_hint=""):
        return self._sync(target_hostname, buffers, peer_buffer_addresses,
                          lengths, opcode, notify, "batch_transfer_sync")

    def _async(self, target, buffers, peer_addresses, lengths, opcode, what):
        got = self._submit(target, buffers, peer_addresses, lengths, opcode,
                           what)
        if got is None:
            return None
        cap, b, total = got
        with self._st.lock:
            bid = self._next_id
            self._next_id += 1
            self._st.batches[bid] = _Batch(b, len(buffers), total, cap)
        return bid

    def batch_transfer_async_write(self, target_hostname, buffers,
                                   peer_buffer_addresses, lengths,
                                   transport_hint=""):
        """Start the writes; a batch id for get_batch_transfer_status, or
        0 on failure (upstream's)."""
        return self._async(target_hostname, buffers, peer_buffer_addresses,
                           lengths, TransferOpcode.Write,
                           "batch_transfer_async_write") or 0

    def batch_transfer_async_read(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        return self._async(target_hostname, buffers, peer_buffer_addresses,
                           lengths, TransferOpcode.Read,
                           "batch_transfer_async_read") or 0

    def batch_transfer_async(self, target_hostname, buffers,
                             peer_buffer_addresses, lengths, opcode,
                             transport_hint=""):
        return self._async(target_hostname, buffers, peer_buffer_addresses,
                           lengths, opcode, "batch_transfer_async") or 0

    def transfer_submit_write(self, target_hostname, buffer,
                              peer_buffer_address, length,
                              transport_hint=""):
        """Start one write; a batch id for transfer_check_status, or -1."""
        bid = self._async(target_hostname, [buffer], [peer_buffer_address],
                          [length], TransferOpcode.Write,
                          "transfer_submit_write")
        return bid if bid else -1

    def _finish(self, bid):
        with self._st.lock:
            bt = self._st.batches.pop(bid, None)
        if bt:
            self._give_batch(bt.cap, bt.batch)

    def get_batch_transfer_status(self, batch_ids):
        """Wait for every batch: 0 when all completed, -1 when one failed
        or timed out (all of them are released either way; an unknown id
        is a failure)."""
        failed = False
        for bid in batch_ids:
            with self._st.lock:
                bt = self._st.batches.get(bid)
            if bt is None:
                failed = True
                continue
            if not failed:
                left = self._deadline_ms(bt.total) - int(
                    (time.monotonic() - bt.start) * 1000)
                rc = _L.mooncake_te_batch_result(bt.batch, bt.n,
                                                 max(left, 0))
                if rc:
                    log.warning("batch %d: %s", bid, _why(rc))
                    failed = True
            self._finish(bid)
        return -1 if failed else 0

    def transfer_check_status(self, batch_id):
        """1 completed, 0 in progress, -1 failed, -2 timed out (the id is
        released unless 0 is returned)."""
        with self._st.lock:
            bt = self._st.batches.get(batch_id)
        if bt is None:
            return -1
        code = c_int()
        rc = _L.mooncake_te_batch_status(bt.batch, 0, byref(code), None,
                                         None)
        if rc:
            self._finish(batch_id)
            return -1
        if code.value == _TE_WAITING:
            elapsed = (time.monotonic() - bt.start) * 1000
            if elapsed <= self._deadline_ms(bt.total):
                return 0
            code.value = _TE_TIMEOUT
        self._finish(batch_id)
        return {_TE_COMPLETED: 1, _TE_TIMEOUT: -2}.get(code.value, -1)

    # ---- CUDA streams: not in this build -----------------------------------

    def _no_cuda(self, *args, **kwargs):
        raise NotSupportedError(
            "TransferEngine: transfers on CUDA streams are not supported "
            "(this build has no CUDA; SUPPORT_CUDA is False; "
            "NOT_SUPPORTED -1012)")

    transfer_write_on_cuda = _no_cuda
    transfer_read_on_cuda = _no_cuda
    batch_transfer_write_on_cuda = _no_cuda
    batch_transfer_read_on_cuda = _no_cuda

    def warmup_efa_segment(self, segment_name):
        """0: no EFA transport in this build (upstream's value then)."""
        return 0

    # ---- topology and notifications ---------------------------------------

    def get_local_topology(self, device_name=None):
        """This host's topology as JSON text: NUMA nodes and NICs from
        sysfs, and where RDMA devices exist "rdma" (the devices and
        upstream's priority_matrix)."""
        p = _L.mooncake_te_topology_json()
        if not p:
            raise MemoryError("te_topology_json")
        try:
            text = ctypes.string_at(p).decode()
        finally:
            _L.mooncake_te_free(p)
        if device_name:
            wanted = set(device_name.split(","))
            topo = json.loads(text)
            topo["nics"] = [n for n in topo.get("nics", [])
                            if n.get("name") in wanted]
            text = json.dumps(topo)
        return text

    def get_notifies(self):
        """Notifications received since the last call, oldest first: a
        list of TransferNotify."""
        eng = self._eng()
        out = []
        k = 64
        names = (c_void_p * k)()
        msgs = (c_void_p * k)()
        while True:
            n = _L.mooncake_te_notifications(eng, names, msgs, k)
            for i in range(max(n, 0)):
                out.append(TransferNotify(
                    ctypes.string_at(names[i]).decode(errors="replace"),
                    ctypes.string_at(msgs[i]).decode(errors="replace")))
                _L.mooncake_te_free(names[i])
                _L.mooncake_te_free(msgs[i])
            if n < k:
                return out


# Every public method but close() is counted while it runs, so close()
# (and the finalizer at the interpreter's exit) frees the engine only
# once no thread is inside it.
for _name, _fn in list(vars(TransferEngine).items()):
    if (not _name.startswith("_") and _name != "close" and
            callable(_fn) and not isinstance(_fn, type)):
        setattr(TransferEngine, _name, _entered(_fn))
del _name, _fn
