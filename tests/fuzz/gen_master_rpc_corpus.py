#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Write seed inputs for fuzz_master_rpc: frame sequences a real client
sends (mount, put start/end, get, exist, list, rename, remove, ...),
encoded by hand (protobuf wire format) so no protobuf package is needed.
Run: tests/fuzz/gen_master_rpc_corpus.py tests/fuzz/corpus/fuzz_master_rpc"""
import os
import struct
import sys


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_varint(n, v):
    return varint(n << 3) + varint(v)


def f_bytes(n, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(n << 3 | 2) + varint(len(b)) + b


def f_packed(n, vals):
    return f_bytes(n, b"".join(varint(v) for v in vals))


def frame(method, body, rid):
    return struct.pack("<IBBHIIQ", 0x3152434D, 1, 0, method, len(body), 0,
                       rid) + body


CID = bytes(range(16))
SID = bytes(range(16, 32))
seg = (f_bytes(1, SID) + f_bytes(2, "127.0.0.1:1") + f_bytes(3, "127.0.0.1:1")
       + f_varint(4, 0x7f0000000000) + f_varint(5, 1 << 20) + f_bytes(6, "tcp")
       + f_bytes(7, "h1"))
mount = frame(3, f_bytes(1, CID) + f_bytes(2, seg), 1)
remount = frame(4, f_bytes(1, CID) + f_bytes(2, seg), 2)

CID2 = bytes(range(32, 48))
seg2 = (f_bytes(1, bytes(range(48, 64))) + f_bytes(2, "127.0.0.1:2")
        + f_bytes(3, "127.0.0.1:2") + f_varint(4, 0x7f1000000000)
        + f_varint(5, 1 << 20) + f_bytes(6, "tcp") + f_bytes(7, "h2"))
REG = 0o100644
CKPT = (f_bytes(2, "c") + f_varint(3, 65536)
        + f_bytes(5, f_bytes(1, "w/a") + f_varint(2, REG)
                  + f_varint(3, 150000))
        + f_bytes(5, f_bytes(1, "w") + f_varint(2, 0o40755))
        + f_bytes(5, f_bytes(1, "l") + f_varint(2, 0o120777)
                  + f_bytes(5, "w/a"))
        + f_bytes(6, struct.pack("<3I", 1, 2, 3)))


def keys(*ks, force=False, hold=False, dir=False):
    b = f_bytes(1, CID) + b"".join(f_bytes(2, k) for k in ks)
    if force:
        b += f_varint(3, 1)
    if hold:
        b += f_varint(4, 1)
    if dir:
        b += f_varint(5, 1)
    return b


# Attr: a directory's mode, owner and the three times.
ATTR = (f_varint(1, 0o40755) + f_varint(2, 1000) + f_varint(3, 1000)
        + f_varint(4, 2) + f_varint(5, 1) + f_varint(6, 2) + f_varint(7, 3))


def put_start(method, ks, sizes, rid, replicas=1, groups=(), pin=True,
              reserve=0, unreachable=()):
    cfg = f_varint(1, replicas) + (f_varint(3, 1) if pin else b"")
    return frame(method, f_bytes(1, CID) + b"".join(f_bytes(2, k) for k in ks)
                 + f_packed(3, sizes) + f_bytes(4, cfg)
                 + b"".join(f_bytes(6, g) for g in groups)
                 + (f_varint(7, reserve) if reserve else b"")
                 + b"".join(f_bytes(9, e) for e in unreachable), rid)


def put_commit(key, slot, rid, reserve=0, release=(), cid=CID):
    return frame(16, f_bytes(1, cid) + f_bytes(2, key) + f_varint(3, slot)
                 + (f_varint(4, reserve) if reserve else b"")
                 + (f_packed(5, release) if release else b""), rid)


seeds = {
    "ready": frame(1, b"", 1) + frame(2, f_bytes(1, CID), 2),
    "mount_put_get": mount + put_start(10, ["a"], [4096], 2)
    + frame(11, keys("a"), 3) + frame(20, keys("a"), 4)
    + frame(22, keys("a"), 5) + frame(24, keys("a", "b"), 6)
    + frame(40, keys("a"), 7),
    "batch": mount + put_start(13, ["x/1", "x/2", "x/2", "y"], [10, 20, 30,
                                                               1 << 21], 2)
    + frame(14, keys("x/1", "x/2", "y"), 3)
    + frame(21, keys("x/1", "x/2", "nope", hold=True), 4)
    + frame(23, keys("x/1", "nope"), 5)
    + frame(31, keys("x/1", "x/2", "x/2", force=True), 6),
    "list_rename": mount + put_start(13, ["d/a", "d/b/c", "e"], [1, 2, 3], 2)
    + frame(14, keys("d/a", "d/b/c", "e"), 3)
    + frame(41, f_bytes(1, "d/") + f_bytes(2, "/") + f_varint(4, 1), 4)
    + frame(44, f_bytes(1, "d/a") + f_bytes(2, "e"), 5)
    + frame(41, f_bytes(1, "") + f_bytes(3, "d/"), 6)
    + frame(45, f_varint(1, 0), 7),
    "remove_all": mount + put_start(10, ["k"], [100], 2)
    + frame(11, keys("k"), 3) + frame(20, keys("k", hold=True), 4)
    + frame(42, f_packed(1, [1, 2]), 5) + frame(30, keys("k"), 6)
    + frame(32, f_varint(1, 1), 7)
    + frame(33, f_bytes(2, "^k.*$"), 8) + frame(43, f_packed(1, [1]), 9),
    "revoke_unmount": mount + remount + put_start(10, ["r"], [64], 3)
    + frame(12, keys("r"), 4) + frame(6, b"", 5)
    + frame(5, f_bytes(1, CID) + f_bytes(2, SID), 6),
    # The mount's namespace: attributes, directory records, a directory's
    # rename, a directory stat with its link count.
    "dirs_attrs": mount
    + frame(47, f_bytes(1, "p/") + f_bytes(2, ATTR), 2)
    + frame(47, f_bytes(1, "p/q/") + f_bytes(2, ATTR), 3)
    + frame(10, f_bytes(1, CID) + f_bytes(2, "p/f") + f_packed(3, [5])
            + f_bytes(4, f_varint(1, 1)) + f_bytes(5, ATTR), 4)
    + frame(11, keys("p/f"), 5)
    + frame(46, f_bytes(1, "p/f") + f_varint(2, 7) + f_bytes(3, ATTR), 6)
    + frame(46, f_bytes(1, "p/") + f_varint(2, 0x3f) + f_bytes(3, ATTR)
            + f_varint(4, 1), 7)
    + frame(22, keys("p", dir=True), 8)
    + frame(41, f_bytes(1, "p/") + f_bytes(2, "/") + f_varint(5, 1), 9)
    + frame(44, f_bytes(1, "p/") + f_bytes(2, "r/") + f_varint(4, 1), 10)
    + frame(48, keys("r/q/", dir=True), 11)
    + frame(48, keys("r/", dir=True), 12)
    + frame(1, b"", 13),
    # Group ids (one for all keys, one per key, a count that fits
    # neither, one too long); reads that touch a group; a put that
    # evicts from the 1 MiB segment, groups whole.
    "groups": mount
    + put_start(13, ["g1a", "g1b"], [300000, 300000], 2, groups=["g1"],
                pin=False)
    + frame(14, keys("g1a", "g1b"), 3)
    + put_start(13, ["g2a", "g2b"], [100000, 100000], 4,
                groups=["g2", "g2"], pin=False)
    + frame(14, keys("g2a", "g2b"), 5)
    + frame(20, keys("g2a"), 6) + frame(22, keys("g1b"), 7)
    + put_start(13, ["x", "y", "z"], [8, 8, 8], 8, groups=["a", "b"])
    + put_start(10, ["long"], [8], 9, groups=["L" * 1100])
    + put_start(10, ["big"], [600000], 10, pin=False)
    + frame(14, keys("big"), 11) + frame(30, keys("g2b", force=True), 12)
    + frame(32, f_varint(1, 1), 13),
    # remove_all and remove_by_regex scoped to a prefix, or leaving one
    # out (tenants).
    "tenant_remove": mount
    + put_start(13, [".tenants/A/k", ".tenants/B/k", "k"], [8, 8, 8], 2,
                pin=False)
    + frame(14, keys(".tenants/A/k", ".tenants/B/k", "k"), 3)
    + frame(33, f_bytes(2, "^k$") + f_bytes(3, ".tenants/A/"), 4)
    + frame(32, f_varint(1, 1) + f_bytes(4, ".tenants/"), 5)
    + frame(32, f_varint(1, 1) + f_bytes(3, ".tenants/B/"), 6),
    # Checkpoints: a create with files (64 KiB shards, 3 of them) and
    # the publisher as holder, a link and its replacement, list, info
    # with holders, holders added and dropped, sources (one shard, any),
    # done (fetched and held, unreachable, corrupt), remove; CkptRead is
    # not the master's.
    "checkpoints": frame(60, f_bytes(1, CID) + f_bytes(2, CKPT)
                         + f_bytes(3, "p:1"), 1)
    + frame(60, f_bytes(1, CID) + f_bytes(2, f_bytes(2, "latest")
                                          + f_bytes(9, "c")), 2)
    + frame(60, f_bytes(1, CID) + f_bytes(2, f_bytes(2, "latest")
                                          + f_bytes(9, "d"))
            + f_varint(4, 1), 3)
    + frame(61, f_bytes(1, "") + f_varint(3, 1), 4)
    + frame(62, f_bytes(1, "c") + f_varint(3, 1), 5)
    + frame(64, f_bytes(1, SID) + f_varint(2, 1) + f_bytes(3, "a:1")
            + f_bytes(4, b"\x05"), 6)
    + frame(65, f_varint(2, 1) + f_varint(3, 2), 7)
    + frame(65, f_bytes(1, CID2) + f_varint(2, 1) + f_varint(4, 1)
            + f_bytes(5, b"\x01") + f_bytes(6, "p:1"), 8)
    + frame(66, f_bytes(1, CID2) + f_varint(2, 1) + f_varint(3, 2)
            + f_bytes(4, SID) + f_varint(6, 65536) + f_bytes(7, "r:1"), 9)
    + frame(66, f_varint(2, 1) + f_bytes(4, CID) + f_varint(5, 1), 10)
    + frame(66, f_varint(2, 1) + f_varint(3, 1) + f_bytes(4, CID)
            + f_varint(5, 2), 11)
    + frame(64, f_bytes(1, SID) + f_varint(2, 1) + f_varint(5, 1), 12)
    + frame(62, f_varint(2, 1) + f_varint(3, 1), 13)
    + frame(63, f_bytes(2, "c"), 14)
    + frame(70, f_varint(1, 1), 15),
    # Reserved space for puts: slots from a PutStart, commits into them
    # (one that fills a slot, one of an existing key, one of a slot that
    # is not there, one of another client), more reserved on the way,
    # slots given back with and without a key.
    "put_slots": mount + put_start(10, ["s0"], [4096], 2, pin=False,
                                   reserve=2)
    + frame(11, keys("s0"), 3)
    + put_commit("s1", 1, 4, reserve=1)
    + put_commit("s1", 2, 5)
    + put_commit("s2", 77, 6)
    + put_commit("s3", 2, 7, cid=CID2)
    + put_commit("s4", 2, 8, release=[3, 99])
    + put_commit("", 0, 9, release=[1, 2, 3])
    + frame(20, keys("s1", "s4"), 10),
    # A writer that could not reach a segment: placed around it (field 9),
    # its owner marked until it pings; more names than are read (16).
    "unreachable": mount
    + frame(3, f_bytes(1, CID2) + f_bytes(2, seg2), 2)
    + put_start(10, ["u1"], [4096], 3, replicas=2,
                unreachable=["127.0.0.1:1"])
    + put_start(13, ["u2", "u3"], [64, 64], 4, unreachable=["nowhere:9"])
    + frame(2, f_bytes(1, CID), 5)
    + put_start(10, ["u4"], [64], 6,
                unreachable=[f"127.0.0.1:{i}" for i in range(20)])
    + frame(20, keys("u1", "u2", "u4"), 7),
    "unknown_method": frame(999, b"\x08\x01", 1) + frame(1, b"", 2),
    "bad_body": frame(10, b"\xff\xff\xff", 1),
    # Strings holding a NUL, at the top and nested (-600 before decoding).
    "nul_strings": mount + put_start(10, ["n\0ul"], [64], 2)
    + frame(30, keys("a\0"), 3)
    + frame(10, f_bytes(1, CID) + f_bytes(2, "ok") + f_packed(3, [8])
            + f_bytes(4, f_bytes(6, "seg\0x")), 4),
}

out = sys.argv[1] if len(sys.argv) > 1 else "corpus/fuzz_master_rpc"
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
