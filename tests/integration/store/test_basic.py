# SPDX-License-Identifier: Apache-2.0
"""Three pool members on loopback: puts and gets with checksums, replicas
on distinct segments, batches with hits and misses, leases, the admin
HTTP, malformed frames, and the CLI. And the master's heap on huge pages
(it re-executes itself with glibc's tunable unless told otherwise), and
SIGHUP (logrotate's postrotate)."""
import json
import os
import random
import signal
import socket
import struct
import subprocess

import pytest

from mctest import binary, wait_for
from pool import CLI, MASTER, Master, Member, Shell, cli, eventually


def test_random_puts_and_gets_verify(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 3, what="3 segments")
    rng = random.Random(7)
    objs = {}
    for i in range(60):
        size = rng.choice([1, 100, 4096, 65536, 1 << 20, 3 << 20]) + \
            rng.randrange(64)
        objs[f"obj/{i}"] = (size, i + 1)
        sh.ok(f"put obj/{i} {size} {i + 1}")
    for key, (size, seed) in rng.sample(sorted(objs.items()), len(objs)):
        sh.ok(f"check {key} {size} {seed}")
        assert sh.ok(f"size {key}") == str(size)
    # A put of an existing key succeeds and does not overwrite it.
    sh.ok("put obj/0 77 999")
    k0size, k0seed = objs["obj/0"]
    sh.ok(f"check obj/0 {k0size} {k0seed}")
    assert master.metric("master_key_count") == len(objs)
    sh.close()


def test_replicas_on_distinct_segments(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 3, what="3 segments")
    for i in range(10):
        sh.ok(f"put rep/{i} 200000 {i} 3")
        desc = sh.ok(f"desc rep/{i}").split()
        assert int(desc[0]) == 3, desc
        endpoints = [d.split("@")[0] for d in desc[1:]]
        assert len(set(endpoints)) == 3, endpoints
        assert set(endpoints) == {m.name for m in members}
        sh.ok(f"check rep/{i} 200000 {i}")
    # 3 x 20 MiB: written in parts, each the next bytes of all three
    # replicas side by side (docs/design.md "Writes into placed space").
    sh.ok("rmall force")
    sh.ok(f"put big {20 << 20} 77 3")
    assert int(sh.ok("desc big").split()[0]) == 3
    sh.ok(f"check big {20 << 20} 77")


def test_batches_with_hits_and_misses(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    reply = sh.ok("bput 16 b/ 65536 5")
    assert all(c == "0" for c in reply.split()[-1].split(",")), reply
    reply = sh.ok("bget 16 b/ 65536 5")
    assert all(c == "65536" or c == "0" for c in
               reply.split()[-1].split(",")), reply
    # Keys 16..23 were never put: misses in the same batch as hits.
    reply = sh.cmd("bget 24 b/ 65536 5")
    codes = reply.split()[-1].split(",")
    assert len(codes) == 24, reply
    assert all(int(c) >= 0 for c in codes[:16]), reply
    assert all(c == "-704" for c in codes[16:]), reply
    keys = [f"b/{i}" for i in range(20)]
    assert sh.exist(keys) == [1] * 16 + [0] * 4
    assert sh.exist([]) == []
    # Duplicate keys in one batch: one object, no error.
    sh.ok("put dup 100 1")
    assert sh.exist(["dup", "dup", "nope"]) == [1, 1, 0]


def test_leases_and_remove(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    sh.ok("put leased 1000 3")
    sh.ok("get leased")  # grants a 10 s lease
    assert sh.code("rm leased") == -706
    sh.ok("rm leased force")
    assert sh.exist(["leased"]) == [0]
    assert sh.code("get leased") == -704
    assert sh.code("rm leased") == -704
    sh.ok("put re 1000 4")
    assert sh.ok("rmre ^r.$ force") == "1"
    sh.ok("put a1 10 1")
    sh.ok("put a2 10 2")
    assert int(sh.ok("rmall force")) >= 2
    assert master.metric("master_key_count") == 0


def test_the_process_keeps_its_name(master):
    """The master re-executes itself to put its heap on huge pages (and
    an HA leader that loses its lease, to restart as a standby): through
    /proc/self/exe, which named the process "exe", so pgrep, pkill,
    killall, ps -C and ss -p did not find mooncake_master."""
    with open(f"/proc/{master.proc.pid}/comm") as f:
        assert f.read().strip() == "mooncake_master"


def test_sighup_reopens_the_log_file(procs, tmp_path):
    """logrotate moves a log away and sends SIGHUP (postrotate): the
    master and a pool member stopped (the member left the pool with its
    objects). With a --log_file they reopen it and go on; with --syslog,
    or stderr that is not a terminal (journald, a redirection: a reload
    or a stray HUP), they ignore it; only on a terminal (it hung up) does
    SIGHUP stop them, exit 0."""
    m = Master(procs, tmp_path, "--log_file", str(tmp_path / "m.log"))
    mem = Member(procs, tmp_path, m, extra=("--log_file",
                                            str(tmp_path / "c.log")))
    sh = Shell(procs, tmp_path, m)
    sh.ok("put rot/a 4096 1")
    for name, proc in (("m", m.proc), ("c", mem.proc)):
        os.rename(tmp_path / f"{name}.log", tmp_path / f"{name}.log.1")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(tmp_path / f"{name}.log") and
                 "log file reopened" in
                 open(tmp_path / f"{name}.log").read(),
                 what=f"{name}.log reopened")
        assert proc.poll() is None
        assert "log file reopened" not in \
            open(tmp_path / f"{name}.log.1").read()
    assert mem.name in m.segments()
    assert sh.code("get rot/a") == 0
    mem.stop()
    assert "leaving the pool" in open(tmp_path / "c.log").read()
    for name, extra in (("plain", ()), ("syslog", ("--syslog",))):
        other = Master(procs, tmp_path, *extra, name=name)
        other.proc.send_signal(signal.SIGHUP)
        if not extra:
            wait_for(lambda: "SIGHUP ignored" in other.log(),
                     what="SIGHUP ignored")
        assert other.http("/health")[0] == 200
        assert other.proc.poll() is None
    main, sub = os.openpty()
    tty = procs.popen([binary(*MASTER), "--rpc_address", "127.0.0.1",
                       "--rpc_port", "0", "--metrics_port", "0",
                       "--db_path", "memory"], stdout=sub, stderr=sub)
    os.close(sub)
    out = b""
    while b"serving RPC" not in out:
        out += os.read(main, 4096)
    tty.send_signal(signal.SIGHUP)
    assert tty.wait(30) == 0
    os.close(main)


UPSTREAM_FLAGS = [
    # mooncake.md 3.13: companions of features this master does not have,
    # at upstream's defaults; each one made the master exit 2.
    "--offload_on_evict=false", "--offload_force_evict=false",
    "--offloading_queue_limit=50000", "--offload_cap_ratio=0.5",
    "--promotion_on_hit=false", "--promotion_admission_threshold=2",
    "--promotion_queue_limit=50000", "--promotion_max_per_heartbeat=1",
    "--quota_bytes=0", "--enable_disk_eviction=true",
    "--global_file_segment_size=9223372036854775807",
    "--tenant_quota_connector_type=file", "--tenant_quota_connector_uri=",
    "--cxl_path=/dev/dax0.0", "--cxl_size=8GiB",
    "--nof_eviction_ratio=0.05", "--nof_eviction_high_watermark_ratio=0.9",
    "--max_total_finished_tasks=10000", "--max_total_pending_tasks=10000",
    "--max_total_processing_tasks=10000", "--pending_task_timeout_sec=300",
    "--processing_task_timeout_sec=300", "--max_retry_attempts=10",
    "--dynamic_replication_mode=off", "--kv_events_bind_endpoint=",
    "--kv_events_backend_id=", "--snapshot_interval_seconds=300",
    "--snapshot_retention_count=3", "--oplog_batch_max_entries=100",
    "--oplog_poll_interval_ms=1000",
]


def test_upstream_command_lines_start(procs, tmp_path):
    """operations.md: every upstream mooncake_master command line starts
    it unchanged; these flags were refused (exit 2, unknown flag)."""
    m = Master(procs, tmp_path, *UPSTREAM_FLAGS)
    st, body = m.http("/health")
    assert st == 200, body


def test_rpc_interface_binds_its_address(procs, tmp_path):
    """--rpc_interface (upstream's) was accepted and did nothing: the RPC
    listened on every interface. It binds the interface's IPv4 address;
    an interface that does not exist is a configuration error."""
    pf, log = tmp_path / "rpc.port", tmp_path / "iface.log"
    with open(log, "wb") as f:
        p = procs.popen([binary(*MASTER), "--rpc_interface", "lo",
                         "--rpc_port", "0", "--metrics_port", "0",
                         "--db_path", "memory", "--port_file", str(pf)],
                        stdout=f, stderr=f)
    wait_for(lambda: pf.exists() and pf.read_text().strip(),
             what="master port file")
    assert "serving RPC on 127.0.0.1:" in log.read_text(), log.read_text()
    procs.kill(p, signal.SIGTERM)
    p = subprocess.run([binary(*MASTER), "--rpc_interface", "nosuch0",
                        "--rpc_port", "0", "--metrics_port", "0",
                        "--db_path", "memory"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "--rpc_interface nosuch0: no such interface" in p.stderr


def test_admin_http(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    sh.ok("put web/x 1234 1")
    eventually(lambda: len(master.segments()) == 3, what="3 segments")
    assert sorted(master.segments()) == sorted(m.name for m in members)
    st, body = master.http("/query_key?key=web/x")
    assert st == 200 and '"size_":1234' in body, body
    st, body = master.http("/query_key?key=nope")
    assert st == 404 and "-704" in body
    st, body = master.http("/batch_query_keys?keys=web/x,nope")
    assert st == 200 and '"web/x"' in body and '"nope"' in body
    st, body = master.http("/get_all_keys")
    assert st == 200 and "web/x" in body.splitlines()
    for name in ("master_total_capacity_bytes", "master_allocated_bytes",
                 "master_key_count", "master_active_clients",
                 "master_put_start_requests_total",
                 "master_get_replica_list_requests_total"):
        master.metric(name)
    assert master.metric("master_total_capacity_bytes") == 3 * 32 * 10**6 \
        or master.metric("master_total_capacity_bytes") >= 3 * 32 * 10**6
    st, body = master.http("/health")
    assert st == 200 and '"ok"' in body
    # Upstream's view pages (404 before 2026-12-06).
    import json
    assert master.http("/role") == (200, "leader")
    assert master.http("/ha_status") == (200, "serving")
    assert json.loads(master.http("/leader")[1]) == {"present": False}
    name = members[0].name
    st, body = master.http(f"/query_segment?segment={name}")
    lines = body.splitlines()
    assert st == 200 and lines[0] == name, body
    assert lines[1].startswith("Used(bytes): ") and \
        lines[2].startswith("Capacity(bytes) : "), body
    assert int(lines[2].split(": ")[1]) >= 32 * 10**6
    assert master.http("/query_segment?segment=nope")[0] == 404
    st, body = master.http("/get_segments_detail")
    d = json.loads(body)
    assert st == 200 and d["total_segments"] == 3, body
    seg = {x["segment_name"]: x for x in d["segments"]}[name]
    assert seg["status"] == "OK" and seg["protocol"] == "tcp", seg
    assert seg["allocator_capacity_bytes"] >= 32 * 10**6
    assert seg["base_address"].startswith("0x") and seg["te_endpoint"]
    # The exposition format: one TYPE line and one sample per name (the
    # batch methods' requests_total came twice: strict parsers refused
    # the whole scrape).
    st, text = master.http("/metrics")
    types = [ln.split()[2] for ln in text.splitlines()
             if ln.startswith("# TYPE ")]
    samples = [ln.split()[0] for ln in text.splitlines()
               if ln and not ln.startswith("#")]
    dup = {n for n in types if types.count(n) > 1}
    assert not dup, sorted(dup)
    dup = {n for n in samples if samples.count(n) > 1}
    assert not dup, sorted(dup)


def frame(method, body, rid=1, magic=0x3152434D, version=1, kind=0):
    return struct.pack("<IBBHIIQ", magic, version, kind, method, len(body), 0,
                       rid) + body


def closed_by_master(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        s.settimeout(10)
        try:
            return s.recv(4096) == b""
        except ConnectionResetError:
            return True
    finally:
        s.close()


def test_malformed_frames_close_only_that_connection(procs, tmp_path,
                                                     master, members):
    sh = Shell(procs, tmp_path, master)
    sh.ok("put keep 4096 9")
    bad = [
        b"GET / HTTP/1.1\r\n\r\n" + b"x" * 8,           # not our magic
        frame(10, b"", version=9),                       # unknown version
        frame(10, b"", kind=1),                          # a response
        frame(10, b"\xff\xff\xff\xff"),                  # body does not decode
        struct.pack("<IBBHIIQ", 0x3152434D, 1, 0, 10, 1 << 30, 0, 1),  # huge
    ]
    for data in bad:
        assert closed_by_master(master.rpc_port, data), data[:16]
    # An unknown method is answered, not dropped: code -1012.
    s = socket.create_connection(("127.0.0.1", master.rpc_port), timeout=10)
    s.sendall(frame(4242, b""))
    hdr = s.recv(24)
    assert len(hdr) == 24 and struct.unpack("<H", hdr[6:8])[0] == 4242
    s.close()
    # Others are served throughout.
    sh.ok("check keep 4096 9")
    assert "keys 1" in cli(master, "status").stdout


def test_key_with_a_nul_is_refused_on_the_wire(procs, tmp_path, master,
                                               members):
    """A hand-built PutStart whose key holds a NUL (our clients refuse such
    keys before sending) is -600, and stores nothing under the key's
    prefix (decoding into C strings made it "a")."""
    sh = Shell(procs, tmp_path, master)
    key = b"nul/a\0b"
    cid = bytes(range(16))
    body = (b"\x0a\x10" + cid + b"\x12" + bytes([len(key)]) + key +
            b"\x18\x80\x20")  # client_id, keys, sizes (4096)
    s = socket.create_connection(("127.0.0.1", master.rpc_port), timeout=10)
    try:
        s.sendall(frame(10, body))
        hdr = s.recv(24)
        (n,) = struct.unpack("<I", hdr[8:12])
        resp = s.recv(n)
    finally:
        s.close()
    # Field 1, the code: -600 as a (sign-extended, 10-byte) varint.
    assert resp == b"\x08" + bytes([0xa8, 0xfb] + [0xff] * 7 + [0x01]), resp
    assert sh.exist(["nul/a"]) == [0]
    assert cli(master, "ls", "nul/").stdout.strip() == ""


def test_cli(procs, tmp_path, master, members):
    src = tmp_path / "src.bin"
    src.write_bytes(random.Random(3).randbytes(3 << 20))
    cli(master, "put", str(src), "files/a")
    cli(master, "put", str(src), "files/b", "--replicas", "2")
    out = cli(master, "status").stdout
    assert "keys 2" in out and "clients" in out
    for m in members:
        assert m.name in out
    ls = cli(master, "ls", "files/").stdout.split("\n")
    assert [l.split()[-1] for l in ls if l] == ["files/a", "files/b"]
    info = cli(master, "info", "files/b").stdout
    assert "replicas  2" in info and str(3 << 20) in info
    dst = tmp_path / "dst.bin"
    cli(master, "get", "files/a", str(dst))
    assert dst.read_bytes() == src.read_bytes()
    # An empty object (a mount's empty file): an empty file, not "dst:
    # Invalid argument" (an mmap of 0 bytes).
    sh = Shell(procs, tmp_path, master)
    sh.ok(f"wclose {sh.ok('wopen files/empty 0')} commit")
    sh.ok("close")
    cli(master, "get", "files/empty", str(dst))
    assert dst.read_bytes() == b""
    cli(master, "rm", "files/empty")
    p = cli(master, "info", "nope", check=False)
    assert p.returncode == 1 and "-704" in p.stderr \
        and "OBJECT_NOT_FOUND" in p.stderr
    cli(master, "rm", "files/a", "--force")
    p = cli(master, "get", "files/a", str(dst), check=False)
    assert p.returncode == 1 and "OBJECT_NOT_FOUND" in p.stderr
    p = cli(master, "frobnicate", check=False)
    assert p.returncode == 2
    # Flags between positional arguments, as gflags takes them (was:
    # "put flags before positional arguments", exit 2).
    cli(master, "put", "--replicas", "2", str(src), "files/c")
    assert "replicas  2" in cli(master, "info", "files/c").stdout
    cli(master, "rm", "--force", "files/c")
    assert "files/c" not in cli(master, "ls", "files/").stdout
    # A key with a newline or an escape cannot forge ls lines or reach
    # the terminal: shown as \ooo, as ls -b does.
    cli(master, "put", str(src), "files/nl\n   999 fake\x1b[2J")
    out = cli(master, "ls", "files/nl").stdout
    assert out.count("\n") == 1 and "\x1b" not in out, out
    assert "files/nl\\012   999 fake\\033[2J" in out, out
    cli(master, "rm", "--force", "files/nl\n   999 fake\x1b[2J")
    # MC_LOG_LEVEL sets the CLI's level as the daemons' (was: WARN,
    # whatever it said; only -v changed it).
    env = dict(os.environ, MOONCAKE_MASTER=master.addr,
               MOONCAKE_TE_META_DATA_SERVER=master.metadata)
    quiet = subprocess.run([binary(*CLI), "get", "files/b", str(dst)],
                           capture_output=True, text=True, env=env,
                           timeout=60)
    loud = subprocess.run([binary(*CLI), "get", "files/b", str(dst)],
                          capture_output=True, text=True, timeout=60,
                          env=dict(env, MC_LOG_LEVEL="debug"))
    assert quiet.returncode == 0 and loud.returncode == 0, loud.stderr
    assert " D " not in quiet.stderr and " D " in loud.stderr, loud.stderr
    # Addresses named only by the MOONCAKE_CONFIG_PATH file, as vLLM's
    # and LMCache's is written (was: the CLI's defaults won over it).
    conf = tmp_path / "mooncake.json"
    conf.write_text(json.dumps({
        "master_server_address": master.addr,
        "metadata_server": master.metadata, "local_hostname": "127.0.0.1",
        "lmcache_only_key": 1}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MOONCAKE_")}
    env["MOONCAKE_CONFIG_PATH"] = str(conf)
    for args in (["status"], ["get", "files/b", str(dst)]):
        p = subprocess.run([binary(*CLI), *args], capture_output=True,
                           text=True, env=env, timeout=60)
        assert p.returncode == 0, (args, p.stderr)
    assert f"master {master.addr}" in subprocess.run(
        [binary(*CLI), "status"], capture_output=True, text=True, env=env,
        timeout=60).stdout
    # LMCache's storage_root_dir (upstream's disk replicas) was ignored
    # without a word: setup says they are not supported.
    env["MOONCAKE_STORAGE_ROOT_DIR"] = str(tmp_path / "disk")
    p = subprocess.run([binary(*CLI), "get", "files/b", str(dst)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and "disk replicas" in p.stderr, p.stderr
    assert not (tmp_path / "disk").exists()
    # The CLI runs above left the pool as they closed: only the members
    # count as clients, long before client_ttl (10 s) would drop them.
    eventually(lambda: master.metric("master_active_clients")
               == len(members), timeout=5, what="CLI clients gone")



def test_master_heap_on_huge_pages(procs, tmp_path, monkeypatch):
    """(/proc/PID/environ cannot show it: glibc rewrites the variable in
    place as it reads it; the master logs what it runs with.)"""
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        if "[never]" in f.read():
            pytest.skip("transparent huge pages are off on this kernel")
    # By default: re-executed with the tunable added to what the
    # environment had, which it logs.
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    m = Master(procs, tmp_path, name="huge")
    assert "heap on transparent huge pages (GLIBC_TUNABLES=glibc.malloc." \
        "arena_max=2:glibc.malloc.hugetlb=1)" in open(m.log_path).read()
    # Off, or the user's own setting of the tunable: left as it is.
    off = Master(procs, tmp_path, "--malloc_huge_pages=false", name="off")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    own = Master(procs, tmp_path, name="own")
    for x in (off, own):
        assert "huge pages" not in open(x.log_path).read()
    # It cannot re-execute (no /proc in its mount namespace): it says so
    # and serves all the same.
    monkeypatch.delenv("GLIBC_TUNABLES")
    log_path = tmp_path / "noproc.log"
    with open(log_path, "wb") as log:
        p = procs.popen(
            ["unshare", "-m", "sh", "-c",
             'mount -t tmpfs none /proc && exec "$0" "$@"', binary(*MASTER),
             "--rpc_address", "127.0.0.1", "--rpc_port", "0",
             "--metrics_host", "127.0.0.1", "--metrics_port", "0",
             "--db_path", "memory"], stdout=log, stderr=log)
    wait_for(lambda: "serving RPC" in open(log_path).read() or
             p.poll() is not None, what="the master without /proc serving")
    text = open(log_path).read()
    assert "cannot re-execute with the heap on huge pages" in text, text
    assert "serving RPC" in text, text
    procs.kill(p)
