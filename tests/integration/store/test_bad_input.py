# SPDX-License-Identifier: Apache-2.0
"""Arguments every entry point refuses alike, and what a client that
cannot take the fast path still gets: an empty key and a replica_num out
of 1..8 are -600 INVALID_PARAMS from the CLI and the C API; a NUL byte
in a key sent to the admin HTTP, or two Content-Length headers, are 400;
a local user who may not map a member's shared memory reads over TCP.
(The Python package's side: tests/integration/python/test_store.py; the
metadata service's: tests/integration/metad/test_bad_input.py.)"""
import os
import shutil
import subprocess
import tempfile

import pytest

from mctest import SCALE, binary_for_others, raw, request
from pool import (CLI, Member, Shell, cleanup_segments, cli, eventually,
                  shm_segment)

OTHER = 54321  # a uid of the test's own, as tests/integration/fs/test_users


@pytest.fixture
def member(procs, tmp_path, master):
    m = Member(procs, tmp_path, master)
    eventually(lambda: len(master.segments()) == 1, what="1 segment")
    yield m
    procs.cleanup()
    cleanup_segments([m.port])


def status_of(resp):
    line = resp.split(b"\r\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1") else None


@pytest.mark.parametrize("args", [["info", ""], ["rm", ""],
                                  ["get", "", "OUT"], ["put", "IN", ""]])
def test_empty_key_is_600_in_every_command(master, tmp_path, args):
    src = tmp_path / "in"
    src.write_bytes(b"x")
    args = [str(src) if a == "IN" else str(tmp_path / "out") if a == "OUT"
            else a for a in args]
    p = cli(master, *args, check=False)
    assert p.returncode == 1, p
    assert p.stderr == f"mooncake: {args[0]}: empty key: invalid " \
        f"parameters (-600 INVALID_PARAMS)\n", p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ttl", ["0", "500ms"])
def test_master_refuses_a_client_ttl_below_a_second(ttl):
    """--client_ttl 0 was accepted: every member was dropped and
    re-mounted each second and acknowledged puts were lost."""
    import subprocess
    from mctest import binary
    p = subprocess.run([binary("master", "mooncake_master"),
                        "--client_ttl", ttl, "--db_path", "memory"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "'client_ttl' is out of range [1000," in p.stderr, p.stderr


@pytest.mark.parametrize("name,value", [
    ("default_kv_lease_ttl", "18446744073709551615"),
    ("max_kv_soft_pin_ttl", "9223372036854775807ms"),
    ("put_start_release_timeout_sec", "18446744073709551"),
    ("restore_grace", "5124095576h"),
    ("exist_max_idle", "1000000000001"),
])
@pytest.mark.parametrize("source", ["flag", "env", "file"])
def test_master_refuses_durations_that_overflow(tmp_path, name, value,
                                                source):
    """Durations had no upper bound: --default_kv_lease_ttl
    18446744073709551615 started a master whose leases (now + ttl)
    wrapped round and ended before they began, the same with the other
    durations added to the clock. Every source is refused alike, naming
    the option, the value and the range."""
    from mctest import binary
    args = [binary("master", "mooncake_master"), "--db_path", "memory",
            "--rpc_port", "0", "--metrics_port", "0"]
    env = dict(os.environ)
    if source == "flag":
        args.append(f"--{name}={value}")
    elif source == "env":
        env[f"MOONCAKE_MASTER_{name.upper()}"] = value
    else:
        (tmp_path / "m.json").write_text(f'{{"{name}": "{value}"}}')
        args += ["--config_path", str(tmp_path / "m.json")]
    p = subprocess.run(args, capture_output=True, text=True, timeout=30,
                       env=env)
    assert p.returncode == 2, p
    assert f"value '{value}' for '{name}' is out of range [0, " \
        f"1000000000000] ms" in p.stderr, p.stderr
    # the largest value is taken, as --dump_config shows
    p = subprocess.run(args[:1] + [f"--{name}=1000000000000ms",
                                   "--dump_config"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p
    assert f'"{name}": "1000000000000ms"' in p.stdout, p.stdout


def test_master_warns_of_a_zero_lease(tmp_path):
    """--default_kv_lease_ttl 0 is upstream's to take, but it leaves reads
    unprotected (eviction or a forced remove may reuse the memory being
    read) and a mount's written files unkept until published: the master
    says so at start (it said nothing)."""
    from mctest import binary
    p = subprocess.Popen([binary("master", "mooncake_master"), "--db_path",
                          "memory", "--rpc_port", "0", "--metrics_port", "0",
                          "--default_kv_lease_ttl=0"],
                         stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in p.stderr:
            lines.append(line)
            if "default_kv_lease_ttl 0" in line or "listening" in line:
                break
    finally:
        p.kill()
        p.wait()
    assert any("--default_kv_lease_ttl 0: reads get no lease" in ln
               for ln in lines), lines


@pytest.mark.parametrize("var,value,lo,hi", [
    ("MC_TE_META_CHECK_MS", "abc", 0, 86400000),
    ("MC_TE_META_CHECK_MS", "-1", 0, 86400000),
    ("MC_METADATA_CLEANUP_GRACE_MS", "-5", 0, 86400000),
    ("MC_METADATA_CLEANUP_GRACE_MS", "10x", 0, 86400000),
    ("MC_HTTP_REQUEST_DEADLINE_MS", "abc", 1000, 3600000),
    ("MC_HTTP_REQUEST_DEADLINE_MS", "2h", 1000, 3600000),
])
def test_our_ms_variables_are_refused_not_misread(var, value, lo, hi):
    """Our MC_*_MS variables were read with strtol: MC_TE_META_CHECK_MS
    "10s" was a metadata check every 10 ms and "abc" none at all,
    MC_METADATA_CLEANUP_GRACE_MS "-5" was 2^64 - 5 ms (never cleaned),
    MC_HTTP_REQUEST_DEADLINE_MS "2h" the default, silently. Each program
    that reads one refuses a bad value at start, naming it and the range
    (a unit is welcome: "10s")."""
    from mctest import binary
    exe = {"MC_TE_META_CHECK_MS": ("mooncakefs", "cli", "mooncake_client"),
           "MC_METADATA_CLEANUP_GRACE_MS": ("master", "mooncake_master"),
           "MC_HTTP_REQUEST_DEADLINE_MS": ("metad", "mooncake_metad")}[var]
    args = {"mooncake_client": ["--port", "0", "--global_segment_size",
                                "16MiB", "--metadata_server", "P2PHANDSHAKE",
                                "--master_server_address", "127.0.0.1:1"],
            "mooncake_master": ["--db_path", "memory", "--rpc_port", "0",
                                "--metrics_port", "0",
                                "--enable_http_metadata_server",
                                "--http_metadata_server_port", "0"],
            "mooncake_metad": ["--port", "0"]}[exe[-1]]
    p = subprocess.run([binary(*exe)] + args, capture_output=True,
                       text=True, timeout=30, env=dict(os.environ,
                                                       **{var: value}))
    assert p.returncode != 0, p
    assert f"{var}='{value}': must be a duration from {lo} to {hi} ms" \
        in p.stderr, p.stderr


@pytest.mark.parametrize("flag,needle", [
    ("--memory_allocator=slab", "--memory_allocator=slab: use offset or "
     "cachelib"),
    ("--allocation_strategy=best", "--allocation_strategy=best: use random"),
    ("--eviction_high_watermark_ratio=0", "every object would be evicted"),
    ("--db_path=", "--db_path is empty"),
])
def test_master_refuses_unknown_allocators(flag, needle):
    """A misspelt --memory_allocator was accepted silently; so were a
    watermark of 0 (every put evicted within a second) and an empty
    --db_path (an unset variable: no durable record, silently)."""
    import subprocess
    from mctest import binary
    p = subprocess.run([binary("master", "mooncake_master"),
                        "--db_path", "memory", flag, "--rpc_port", "0"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert needle in p.stderr, p.stderr


def test_member_upstream_flags():
    """mooncake_client takes upstream's --http_port and refuses, by name,
    what it does not have (--enable_offload, --enable_http_server): all
    three were unknown flags."""
    import subprocess
    from mctest import binary
    exe = binary("mooncakefs", "cli", "mooncake_client")
    for flag in ("--enable_offload=true", "--enable_http_server=true"):
        p = subprocess.run([exe, flag, "--http_port", "9300",
                            "--master_server_address", "127.0.0.1:1"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, p
        assert f"{flag.split('=')[0]} is not supported" in p.stderr, p.stderr


def test_cli_master_host_not_found():
    """A master address whose host DNS does not know was reported as "No
    such file or directory (-704 OBJECT_NOT_FOUND)", as if a key were
    missing."""
    import subprocess
    from mctest import binary
    for addr in ("nohost.invalid:50051", "garbage"):
        p = subprocess.run([binary("mooncakefs", "cli", "mooncake"),
                            "--master", addr, "status"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 1, p
        assert "host name not found" in p.stderr and "-704" not in \
            p.stderr, p.stderr


def test_cli_get_to_stdout_and_devices(master, member, tmp_path):
    """`mooncake get KEY -` wrote a file named "-", and get to /dev/null
    or a pipe failed "Invalid argument" (a device cannot be truncated):
    "-" is stdout now, and what is not a regular file is written in a
    stream. rm of a key read within the lease says what to do."""
    src = tmp_path / "in"
    src.write_text("hello, stream\n" * 1000)
    cli(master, "put", str(src), "s")
    p = cli(master, "get", "s", "-")
    assert p.stdout == src.read_text()
    assert not (tmp_path / "-").exists()
    cli(master, "get", "s", "/dev/null")
    p = cli(master, "rm", "s", check=False)
    assert p.returncode == 1 and "OBJECT_HAS_LEASE" in p.stderr, p.stderr
    assert "rm --force" in p.stderr, p.stderr
    cli(master, "--force", "rm", "s")


@pytest.mark.parametrize("n", ["0", "-1", "9"])
def test_cli_replicas_out_of_range(master, member, tmp_path, n):
    src = tmp_path / "in"
    src.write_bytes(b"x" * 100)
    p = cli(master, f"--replicas={n}", "put", str(src), "k", check=False)
    assert p.returncode == 2, p
    assert f"replica_num {n} is out of range (1 to 8)" in p.stderr, p.stderr
    assert "(-600 INVALID_PARAMS)" in p.stderr, p.stderr
    p = cli(master, "info", "k", check=False)
    assert "(-704 OBJECT_NOT_FOUND)" in p.stderr, p.stderr
    cli(master, "--replicas=1", "put", str(src), "k")


def test_c_api_replica_num_out_of_range(procs, tmp_path, master, member):
    """0 was taken for 1 and 9 for 8: now both are refused before any RPC,
    by every call that takes a config, and nothing is stored."""
    sh = Shell(procs, tmp_path, master)
    for n in (0, 9, 64):
        assert sh.code(f"put r{n} 100 1 {n}") == -600
        assert sh.code(f"sput r{n} 100 1 {n}") == -600
        reply = sh.cmd(f"bput 2 r{n}/ 100 1 {n}")
        assert reply.startswith("err -600") or \
            reply.split()[-1] == "-600,-600", reply
        for key in (f"r{n}", f"r{n}/0", f"r{n}/1"):
            assert sh.code(f"size {key}") == -704
    sh.ok("put r1 100 1 1")
    sh.ok("check r1 100 1")
    log = open(sh.log_path, errors="replace").read()
    assert "replica_num 0 is out of range (1 to 8)" in log, log
    sh.close()


def test_admin_http_nul_and_content_length(procs, tmp_path, master, member):
    """The master's admin HTTP (the same server as the metadata service):
    a raw NUL in the key is 400, not a lookup of the bytes before it, and a
    request with two Content-Length headers is 400."""
    sh = Shell(procs, tmp_path, master)
    sh.ok("put a 100 1")
    st, body = master.http("/query_key?key=a")
    assert st == 200, body
    resp = raw(master.admin_port, b"GET /query_key?key=a\x00b HTTP/1.1\r\n"
               b"Host: x\r\n\r\n")
    assert status_of(resp) == 400, resp[:300]
    resp = raw(master.admin_port, b"GET /query_key?key=a HTTP/1.1\r\n"
               b"Host: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n")
    assert status_of(resp) == 400, resp[:300]
    assert request(master.admin_port, "GET", "/health")[0] == 200
    sh.close()


def test_other_user_reads_over_tcp(procs, tmp_path, master, member):
    """A member run by root keeps its segment in a 0600 /dev/shm file: a
    reader on the same host running as another user cannot map it, and
    reads through the member's TCP server instead of failing with -800."""
    assert os.stat(shm_segment(member.name)).st_mode & 0o077 == 0
    if os.geteuid() != 0:
        pytest.skip("needs root to run a command as another user")
    data = os.urandom(3 << 20)
    src = tmp_path / "in"
    src.write_bytes(data)
    cli(master, "put", str(src), "shared/obj")
    out_dir = tempfile.mkdtemp(prefix="mc-other-")
    try:
        os.chmod(out_dir, 0o777)
        out = os.path.join(out_dir, "out")
        env = dict(os.environ, MOONCAKE_MASTER=master.addr,
                   MOONCAKE_TE_META_DATA_SERVER=master.metadata)
        p = subprocess.run([binary_for_others(*CLI), "--v=1", "get",
                            "shared/obj", out],
                           capture_output=True, text=True, env=env,
                           timeout=120 * SCALE, user=OTHER, group=OTHER,
                           extra_groups=[], cwd=out_dir)
        assert p.returncode == 0, p.stderr[-3000:]
        assert open(out, "rb").read() == data
        assert "reading it over tcp" in p.stderr, p.stderr[-3000:]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def test_master_that_cannot_start_leaves_no_new_record(tmp_path):
    """A master whose port is taken left an empty record and metadata
    store behind (files an operator then wonders about); one it did not
    make itself (an existing record) is kept."""
    import socket
    import subprocess
    from mctest import binary
    squat = socket.socket()
    squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squat.bind(("127.0.0.1", 0))
    squat.listen(1)
    port = squat.getsockname()[1]
    db = tmp_path / "m.db"

    def start():
        return subprocess.run(
            [binary("master", "mooncake_master"), "--rpc_address",
             "127.0.0.1", "--rpc_port", str(port), "--metrics_port", "0",
             "--db_path", str(db), "--enable_http_metadata_server",
             "--http_metadata_server_host", "127.0.0.1",
             "--http_metadata_server_port", "0"],
            capture_output=True, text=True, timeout=60)
    try:
        p = start()
        assert p.returncode == 1 and "Address already in use" in p.stderr
        assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())
        db.write_bytes(b"")  # the operator's own (an empty file here)
        p = start()
        assert p.returncode == 1 and db.exists()
    finally:
        squat.close()
