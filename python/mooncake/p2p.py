# SPDX-License-Identifier: Apache-2.0
"""mooncake.p2p: checkpoints shared peer to peer (include/mooncake/ckpt.h).

Upstream's P2P Store (Go: Register, Unregister, List, GetReplica,
DeleteReplica) over the pool's master and our own holder servers, on a
set-up ``mooncake.store.MooncakeDistributedStore``. A checkpoint is a
named, immutable set of files (or buffers) published whole; any client
fetches it, and every client that fetched it serves it on to others until
it stops serving, so one publisher feeds many readers::

    store = MooncakeDistributedStore()
    store.setup("10.0.0.1", meta, 0, 16 << 20, "tcp", "", master)
    with P2PStore(store) as p2p:
        p2p.register("weights-v3", [t0, t1], [t0.nbytes, t1.nbytes])
        ...                                     # served while registered
        p2p.get_replica("weights-v2", [b0, b1], [b0.nbytes, b1.nbytes])

Upstream has no Python P2P API, so every method raises MooncakeError
(.code the upstream store code: -704 no such checkpoint, -705 the name is
taken, -600 bad arguments or sizes, -710 a shard no live holder has,
-801 checksum mismatch, -800 transfer failure, -1010 closed) instead of
returning a code. Names are 1 to 255 bytes without "/" (nor "." or
".."). A P2PStore is thread-safe; close() waits for the calls
in progress. Closing the store closes its P2PStores first.
"""
import collections
import ctypes
import json
import operator
import os
import threading
import weakref
from ctypes import byref, c_char_p, c_size_t, c_void_p

from . import _lib
from .store import (INVALID_PARAMS, INVALID_WRITE, OBJECT_NOT_FOUND,
                    UNAVAILABLE_IN_CURRENT_STATUS, MooncakeError, _address,
                    _array, strerror)

_L = _lib.lib
_free = ctypes.CDLL(None).free
_free.restype = None
_free.argtypes = [c_void_p]

__all__ = ["P2PStore", "PayloadInfo", "Progress", "MooncakeError"]

Progress = collections.namedtuple(
    "Progress", "bytes total shards nshards sources retries")
Progress.__doc__ = """What a publish_dir or get_dir has done so far:
bytes of total (summed when publishing, held when fetching), shards of
nshards, sources (holders read from right now), retries (shard fetches
that failed and went to another holder)."""


class PayloadInfo:
    """One checkpoint as list() sees it (upstream's PayloadInfo: name,
    total_size, size_list, max_shard_size), with ours: files, shards,
    holders (clients serving it now), lost_shards (shards no live holder
    has), link (the target of a link, else None) and created_ns. size_list
    (the regular files' sizes, in the checkpoint's order) and
    max_shard_size are None unless list() was asked for sizes."""
    __slots__ = ("name", "link", "total_size", "files", "shards",
                 "holders", "lost_shards", "created_ns", "size_list",
                 "max_shard_size")

    def __init__(self, e):
        self.name = e.name.decode()
        self.link = e.link.decode() if e.link else None
        self.total_size = e.total_size
        self.files = e.files
        self.shards = e.shards
        self.holders = e.holders
        self.lost_shards = e.lost_shards
        self.created_ns = e.created_ns
        self.size_list = None
        self.max_shard_size = None

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in
                           self.__slots__)
        return f"PayloadInfo({fields})"


def _name(name):
    if isinstance(name, str):
        name = name.encode()
    if not isinstance(name, bytes):
        raise TypeError(f"a checkpoint name is a str, not "
                        f"{type(name).__name__}")
    if b"\0" in name:
        raise MooncakeError(INVALID_PARAMS, f"{name!r}: a NUL in the name "
                            f"(INVALID_PARAMS -600)")
    return name


def _buffers(addr_list, size_list, writable):
    """(void *[], size_t[], n, keepalive) for C: addresses as ints, or
    buffer objects (bytearray, numpy arrays, memoryview; bytes too when
    only read), whose size is their nbytes when size_list is None."""
    addr_list = list(addr_list)
    if size_list is None:
        size_list = [None] * len(addr_list)
    else:
        size_list = list(size_list)
    if len(size_list) != len(addr_list):
        raise MooncakeError(INVALID_PARAMS,
                            f"{len(addr_list)} buffers but "
                            f"{len(size_list)} sizes (INVALID_PARAMS -600)")
    addrs, sizes, keep = [], [], []
    for a, size in zip(addr_list, size_list):
        try:
            mv = None if isinstance(a, int) else memoryview(a)
        except TypeError:
            mv = None
        if mv is None:  # an address (int, numpy integer, c_void_p.value)
            if size is None:
                raise MooncakeError(INVALID_PARAMS, "an address without a "
                                    "size (INVALID_PARAMS -600)")
            addrs.append(operator.index(a))
            sizes.append(operator.index(size))
            continue
        if not mv.c_contiguous:
            raise MooncakeError(INVALID_PARAMS, "a buffer that is not "
                                "contiguous (INVALID_PARAMS -600)")
        mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
        n = mv.nbytes if size is None else operator.index(size)
        if not 0 <= n <= mv.nbytes:
            raise MooncakeError(INVALID_PARAMS,
                                f"size {n} for a buffer of {mv.nbytes} "
                                f"bytes (INVALID_PARAMS -600)")
        if not mv.readonly:
            addr, view = _address(mv) if mv.nbytes else (0, None)
        elif not writable and isinstance(a, bytes):
            addr, view = ctypes.cast(c_char_p(a), c_void_p).value, a
        else:
            raise TypeError(f"{type(a).__name__}: a writable buffer is "
                            f"needed")
        addrs.append(addr)
        sizes.append(n)
        keep.append(view)
    n = len(addrs)
    return _array(c_void_p, addrs), _array(c_size_t, sizes), n, keep


class _Handle:
    """The C handle of a P2PStore, its store (kept alive until the handle
    is closed: mooncake_ckpt_t must not outlive its store), the buffer
    objects served from (kept until they are not) and the calls in
    progress, which close() waits for."""

    def __init__(self, store, ck):
        self.store = store
        self.ck = ck
        self.busy = 0
        self.cond = threading.Condition()
        self.kept = {}               # name -> buffer objects served from

    def keep(self, name, objs):
        with self.cond:
            if objs:
                self.kept[name] = objs
            else:
                self.kept.pop(name, None)

    def enter(self):
        with self.cond:
            if not self.ck:
                raise MooncakeError(UNAVAILABLE_IN_CURRENT_STATUS,
                                    "the P2PStore is closed "
                                    "(UNAVAILABLE_IN_CURRENT_STATUS -1010)")
            self.busy += 1
            return self.ck

    def leave(self):
        with self.cond:
            self.busy -= 1
            self.cond.notify_all()

    def close(self, wait=True):
        """Stop serving and free the C handle once no call is in progress
        (wait=False: left as it is when one is, as at interpreter exit,
        where daemon threads may be inside a call)."""
        with self.cond:
            ck, self.ck = self.ck, None
            while ck and self.busy and wait:
                self.cond.wait()
            if ck and self.busy:
                return
        if ck:
            _L.mooncake_ckpt_close(ck)
            self.kept.clear()
        deps = getattr(self.store, "_dependents", None)
        if deps is not None:
            deps.discard(self)


def _finalize(handle):
    # garbage collection (no call can be in progress: calls hold the
    # P2PStore) or interpreter exit (daemon threads may be in one)
    handle.close(wait=False)


class _Progress:
    """A Python progress callable as a mooncake_ckpt_progress_fn.

    libmooncake's fetching threads may report at the same time, and a
    report snapshot taken before another's can arrive after it; here the
    calls are made one at a time and a stale report (fewer shards done
    and retried than one already passed on) is dropped, so the callable
    sees bytes and shards that never go down. The first exception it
    raises is re-raised when the call returns (the transfer itself goes
    on; later reports are dropped)."""

    def __init__(self, fn):
        self.fn = fn
        self.error = None
        self.lock = threading.Lock()
        self.seen = -1
        # no callable: a NULL function pointer
        self.c = _lib.CKPT_PROGRESS_FN(self._call if fn else 0)

    def _call(self, _arg, p):
        p = p.contents
        with self.lock:
            if self.error is not None or p.shards + p.retries < self.seen:
                return
            self.seen = p.shards + p.retries
            try:
                self.fn(Progress(p.bytes, p.total, p.shards, p.nshards,
                                 p.sources, p.retries))
            except BaseException as e:  # noqa: B902 - re-raised by check()
                self.error = e

    def check(self):
        if self.error is not None:
            raise self.error


class P2PStore:
    """Checkpoints shared peer to peer over a set-up
    MooncakeDistributedStore (include/mooncake/ckpt.h).

    serve_host: where this handle's holder server listens and is reached
    ("" : the host of the store's local_hostname); serve_port: 0 for any
    free port; inflight: shards fetched at once (0: 4); shard_size: bytes
    per shard when publishing (0: 64 MiB; 64 KiB .. 1 GiB); timeout_ms:
    per read from a holder (0: 30000).

    Close it before closing its store (store.close() closes it first if
    not); it is closed on garbage collection too.
    """

    def __init__(self, store, serve_host="", serve_port=0, inflight=4,
                 shard_size=0, timeout_ms=0):
        host = serve_host.encode() if serve_host else None
        opt = _lib.CkptOptionsC(host, int(serve_port), int(inflight),
                                int(shard_size), int(timeout_ms))
        out = c_void_p()
        rc = _L.mooncake_ckpt_open(store._h, byref(opt), byref(out))
        if rc:
            raise MooncakeError(rc, f"P2PStore: {strerror(rc)} (is the "
                                f"store set up?)")
        self._hd = _Handle(store, out.value)
        deps = getattr(store, "_dependents", None)
        if deps is not None:
            deps.add(self._hd)
        self._finalizer = weakref.finalize(self, _finalize, self._hd)

    # ---- lifecycle -------------------------------------------------------

    def close(self):
        """Stop serving everything (the master forgets this holder) and
        free the handle; waits for calls in progress. Idempotent; later
        calls raise MooncakeError (-1010)."""
        self._hd.close()
        self._finalizer.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return not self._hd.ck

    @property
    def store(self):
        """The MooncakeDistributedStore this P2PStore works through."""
        return self._hd.store

    @property
    def endpoint(self):
        """"host:port" of this handle's holder server."""
        ck = self._hd.enter()
        try:
            return _L.mooncake_ckpt_endpoint(ck).decode()
        finally:
            self._hd.leave()

    def _call(self, what, fn, *args):
        """fn(ck, *args) with the handle held; its code raised."""
        ck = self._hd.enter()
        try:
            rc = fn(ck, *args)
        finally:
            self._hd.leave()
        if rc < 0:
            raise MooncakeError(rc, f"{what}: {strerror(rc)}")
        return rc

    def _serve(self, what, fn, name, buffers=None):
        """fn(ck, name, *C arrays of buffers) for what; then the buffer
        objects served from are kept (buffers) or let go (None)."""
        key = _name(name)
        if buffers is None:
            self._call(f"{what}({name!r})", fn, key)
            self._hd.keep(key, None)
            return
        bufs, sizes, n, keep = buffers
        self._call(f"{what}({name!r})", fn, key, bufs, sizes, n)
        self._hd.keep(key, keep)

    def _with_progress(self, what, fn, progress, *args):
        cb = _Progress(progress)
        self._call(what, fn, *args, cb.c, None)
        cb.check()

    # ---- upstream's P2P Store -----------------------------------------------

    def register(self, name, addr_list, size_list=None):
        """Publish buffers as checkpoint name (upstream's Register): they
        appear as files "0", "1", ... and are served from this memory,
        which must stay valid and unchanged until unregister(name) or
        close(). addr_list: addresses (ints, with size_list) or buffer
        objects (bytearray, numpy arrays, memoryview, bytes), whose sizes
        default to their nbytes."""
        self._serve("register", _L.mooncake_ckpt_publish_buffers, name,
                    _buffers(addr_list, size_list, False))

    def unregister(self, name):
        """Stop serving name here (upstream's Unregister): the master
        forgets this holder of it; other holders keep serving it."""
        self._serve("unregister", _L.mooncake_ckpt_unserve, name)

    def get_replica(self, name, addr_list, size_list=None):
        """Fetch checkpoint name (as register makes, one buffer per file)
        into buffers of exactly the files' sizes (else -600), and serve
        it from them until delete_replica(name) or close()."""
        self._serve("get_replica", _L.mooncake_ckpt_get_buffers, name,
                    _buffers(addr_list, size_list, True))

    def delete_replica(self, name):
        """Stop serving the replica of name fetched here (upstream's
        DeleteReplica); the buffers are the caller's again."""
        self._serve("delete_replica", _L.mooncake_ckpt_unserve, name)

    def list(self, prefix="", sizes=False):
        """The checkpoints (and links) whose names start with prefix, in
        name order, as PayloadInfo. sizes=True fills size_list and
        max_shard_size too (one info() call per checkpoint)."""
        out = []

        def one(_arg, e):
            out.append(PayloadInfo(e.contents))
        fn = _lib.CKPT_ENTRY_FN(one)
        self._call(f"list({prefix!r})", _L.mooncake_ckpt_list,
                   _name(prefix) if prefix else None, fn, None)
        if sizes:
            for p in out:
                if p.link is not None:
                    continue
                try:
                    d = self.info(p.name)
                except MooncakeError as e:
                    if e.code != OBJECT_NOT_FOUND:  # removed since
                        raise
                    continue
                p.max_shard_size = d.get("shard_size")
                p.size_list = [f["size"] for f in d.get("files", [])
                               if f["mode"] & 0o170000 == 0o100000]
        return out

    # ---- ours --------------------------------------------------------------

    def publish_dir(self, path, name, progress=None):
        """Publish the tree under path (regular files, directories,
        symlinks) as name, sealed at the end, and serve the files from
        where they are (a file changed since is refused by its shards'
        checksums, never served). progress(Progress) is called as the
        files are read for their checksums."""
        self._with_progress(f"publish_dir({name!r})",
                            _L.mooncake_ckpt_publish_dir, progress,
                            os.fsencode(path), _name(name))

    def get_dir(self, name, path, progress=None):
        """Fetch checkpoint name into path (made if missing, with its
        parents; it must be empty), with the files' modes and times, and
        serve it from there. A link is followed. progress(Progress) is called as shards land,
        from the fetching threads, one call at a time. A path that is not
        an empty directory raises INVALID_WRITE (-700, the C call's code)
        with the reason."""
        try:
            busy = os.path.isdir(path) and any(os.scandir(path))
        except OSError:
            busy = False  # the C call says why it cannot use path
        if busy:
            raise MooncakeError(INVALID_WRITE, f"get_dir({name!r}): "
                                f"{os.fsdecode(path)} is not empty: fetch "
                                "into an empty or new directory")
        self._with_progress(f"get_dir({name!r})", _L.mooncake_ckpt_get_dir,
                            progress, _name(name), os.fsencode(path))

    def link(self, name, target, replace=True):
        """A link name -> target (e.g. "llama-latest", seen as
        ckpt/llama-latest through a mount);
        replace: over a link of that name (never over a checkpoint)."""
        self._call(f"link({name!r})", _L.mooncake_ckpt_link, _name(name),
                   _name(target), bool(replace))

    def remove(self, name):
        """Unpublish name for everyone (its holders stop serving it)."""
        self._serve("remove", _L.mooncake_ckpt_remove, name)

    def info(self, name):
        """Everything about name as a dict: name, id, shard_size,
        total_size, shards, holders, lost_shards, created_ns, files
        (path, mode, size, mtime_ns, link), holder_list (client,
        endpoint, publisher, shards, active, served_bytes), and link for
        a link."""
        out = c_void_p()
        self._call(f"info({name!r})", _L.mooncake_ckpt_info, _name(name),
                   byref(out))
        try:
            return json.loads(ctypes.string_at(out.value))
        finally:
            _free(out.value)

    def __repr__(self):
        if self.closed:
            return "<P2PStore closed>"
        return f"<P2PStore {self.endpoint}>"
