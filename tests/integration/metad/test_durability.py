# SPDX-License-Identifier: Apache-2.0
"""The sqlite store: a restart keeps every entry, kill -9 loses no
acknowledged PUT, and a store file is owned by one process at a time."""
import os
import signal
import subprocess

import pytest

from mctest import METAD_CLI, binary, cli, fill_fs, request, small_tmpfs


def test_restart_keeps_every_entry(procs, tmp_path):
    store = f"sqlite:{tmp_path}/meta.db"
    d = procs.start_metad(tmp_path, "--store", store)
    r = cli(d.url, "write-seq", "keep/", "300")
    assert r.returncode == 0
    assert cli(d.url, "del", "keep/7").returncode == 0
    assert d.stop() == 0
    d = procs.start_metad(tmp_path, "--store", store)
    for i in range(300):
        st, body, _ = request(d.port, "GET", f"/metadata?key=keep%2F{i}")
        if i == 7:
            assert st == 404
        else:
            assert (st, body) == (200, b'{"seq":%d}' % i)
    assert "299 entries" in d.log()


def test_memory_store_forgets(procs, tmp_path):
    d = procs.start_metad(tmp_path)
    assert cli(d.url, "put", "x", "{}").returncode == 0
    d.stop()
    d = procs.start_metad(tmp_path)
    assert cli(d.url, "get", "x").returncode == 3


def test_kill9_loses_no_acknowledged_put(procs, tmp_path):
    store = f"sqlite:{tmp_path}/meta.db"
    d = procs.start_metad(tmp_path, "--store", store)
    writer = procs.popen([binary(*METAD_CLI), d.url, "write-seq", "ack/",
                          "1000000"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    acked = []
    # Blocking reads of the writer's output: each line is one acknowledged
    # PUT. The test's ctest timeout bounds this loop.
    while len(acked) < 400:
        line = writer.stdout.readline()
        assert line, "writer stopped early"
        if line.startswith(b"ack "):
            acked.append(int(line.split()[1]))
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    rest = writer.communicate(timeout=30)[0]
    acked += [int(x.split()[1]) for x in rest.splitlines()
              if x.startswith(b"ack ")]
    assert writer.returncode != 0  # it saw the server die
    d = procs.start_metad(tmp_path, "--store", store)
    for i in acked:
        st, body, _ = request(d.port, "GET", f"/metadata?key=ack%2F{i}")
        assert (st, body) == (200, b'{"seq":%d}' % i), i


def test_store_owned_by_one_process(procs, tmp_path):
    store = f"sqlite:{tmp_path}/meta.db"
    procs.start_metad(tmp_path, "--store", store)
    r = subprocess.run([binary("metad", "mooncake_metad"), "--host",
                        "127.0.0.1", "--port", "0", "--store", store],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "in use by another process" in r.stderr


def test_corrupt_store_is_refused(procs, tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not an sqlite database" * 100)
    r = subprocess.run([binary("metad", "mooncake_metad"), "--host",
                        "127.0.0.1", "--port", "0", "--store", f"sqlite:{bad}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert str(bad) in r.stderr or "sqlite" in r.stderr



@pytest.fixture
def small_fs(tmp_path):
    with small_tmpfs(tmp_path / "small") as d:
        yield d


def test_full_disk_keeps_serving_from_memory(procs, tmp_path, small_fs):
    """The store's disk fills up: PUT and DELETE still succeed (in memory,
    logged), GETs answer them, and once there is room again the next write
    records everything, so a restart finds exactly what was acknowledged.
    (A joining client's PUT of its rpc_meta must not fail on a full disk.)"""
    store = f"sqlite:{small_fs}/meta.db"
    d = procs.start_metad(tmp_path, "--store", store)
    assert request(d.port, "PUT", "/metadata?key=gone",
                   body=b"{}")[0] == 200
    fill_fs(small_fs)
    big = b'{"pad":"' + b"x" * 20000 + b'"}'
    for i in range(20):
        st, body, _ = request(d.port, "PUT", f"/metadata?key=full{i}",
                              body=big)
        assert st == 200, (i, st, body)
    assert request(d.port, "PUT", "/metadata?key=mooncake%2Frpc_meta%2Fn",
                   body=b'{"rpc_port":1}')[0] == 200
    assert request(d.port, "DELETE", "/metadata?key=gone")[0] == 200
    assert "cannot be written" in d.log()
    for i in range(20):
        assert request(d.port, "GET", f"/metadata?key=full{i}")[:2] == \
            (200, big)
    assert request(d.port, "GET", "/metadata?key=gone")[0] == 404
    os.unlink(small_fs / "filler")
    assert request(d.port, "PUT", "/metadata?key=after",
                   body=b"{}")[0] == 200
    assert "writable again" in d.log()
    assert d.stop() == 0
    d = procs.start_metad(tmp_path, "--store", store, name="metad2")
    for i in range(20):
        assert request(d.port, "GET", f"/metadata?key=full{i}")[:2] == \
            (200, big)
    assert request(d.port, "GET",
                   "/metadata?key=mooncake%2Frpc_meta%2Fn")[0] == 200
    assert request(d.port, "GET", "/metadata?key=gone")[0] == 404
    assert request(d.port, "GET", "/metadata?key=after")[0] == 200
