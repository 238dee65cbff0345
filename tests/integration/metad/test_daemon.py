# SPDX-License-Identifier: Apache-2.0
"""mooncake_metad as an operator meets it: exact bind address, strict
flags and config files with named errors, gflags syntax, SIGHUP."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from mctest import METAD, binary, request, wait_for


def listeners(port):
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(line.split()[3] for line in out.splitlines() if line)


def test_binds_loopback_only(metad):
    assert listeners(metad.port) == [f"127.0.0.1:{metad.port}"]


def test_binds_wildcard_when_asked(procs, tmp_path):
    d = procs.start_metad(tmp_path, host="0.0.0.0")
    assert listeners(d.port) == [f"0.0.0.0:{d.port}"]


def run_metad(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([binary(*METAD), *args], capture_output=True,
                          text=True, timeout=30, env=e)


@pytest.mark.parametrize("args,needle", [
    (["--no_such_flag=1"], "no_such_flag"),
    (["--port", "70000"], "port"),
    (["--port=abc"], "port"),
    (["--max_body_size", "lots"], "max_body_size"),
    (["stray"], "stray"),
    (["--store", "redis://x"], "redis://x"),
    (["--threads"], "threads"),
])
def test_bad_flags_are_named(args, needle):
    r = run_metad("--host", "127.0.0.1", *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr


def test_config_file_strict(tmp_path):
    cfg = tmp_path / "metad.json"
    cfg.write_text(json.dumps({"port": 0, "colour": "blue"}))
    r = run_metad("--config_path", str(cfg))
    assert r.returncode == 2 and "colour" in r.stderr
    cfg.write_text(json.dumps({"port": "eighty"}))
    r = run_metad("--config_path", str(cfg))
    assert r.returncode == 2 and "port" in r.stderr
    cfg.write_text("{not json")
    r = run_metad(f"-config_path={cfg}")
    assert r.returncode == 2 and "line 1" in r.stderr


def test_precedence_file_env_flags(tmp_path):
    cfg = tmp_path / "metad.json"
    cfg.write_text(json.dumps({"port": 1111, "threads": 2,
                               "max_body_size": "2MB", "host": "127.0.0.1"}))
    r = run_metad("--config_path", str(cfg), "--dump_config",
                  env={"MOONCAKE_METAD_THREADS": "3"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["port"], d["threads"], d["max_body_size"]) == (1111, 3, 2 << 20)
    r = run_metad("--config_path", str(cfg), "-threads", "5", "--port=2222",
                  "--dump_config", env={"MOONCAKE_METAD_THREADS": "3"})
    d = json.loads(r.stdout)
    assert (d["port"], d["threads"]) == (2222, 5)


def test_gflags_syntax():
    r = run_metad("-port", "1234", "--store_full_sync", "-v", "--dump_config")
    d = json.loads(r.stdout)
    assert (d["port"], d["store_full_sync"], d["v"]) == (1234, True, 1)
    r = run_metad("--nostore_full_sync", "-v=2", "--max_body_size=1.5 MiB",
                  "--dump_config")
    d = json.loads(r.stdout)
    assert (d["store_full_sync"], d["v"]) == (False, 2)
    assert d["max_body_size"] == 3 << 19


def test_help_and_version():
    r = run_metad("--help")
    assert r.returncode == 0 and "--max_body_size" in r.stdout
    r = run_metad("--version")
    assert r.returncode == 0 and "mooncake_metad" in r.stdout


def test_port_in_use_is_clear(metad):
    r = run_metad("--host", "127.0.0.1", "--port", str(metad.port))
    assert r.returncode == 1
    assert f"127.0.0.1:{metad.port}" in r.stderr
    assert "in use" in r.stderr


def test_max_body_flag(procs, tmp_path):
    d = procs.start_metad(tmp_path, "--max_body_size", "1K")
    assert request(d.port, "PUT", "/metadata?key=a", body=b"x" * 1025)[0] == 413
    assert request(d.port, "PUT", "/metadata?key=a", body=b"x" * 1024)[0] == 200


def test_sighup_reopens_the_log_file(procs, tmp_path):
    """logrotate's postrotate sends SIGHUP: with --log_file the service
    reopens the file and keeps its entries (it stopped before)."""
    log = tmp_path / "svc.log"
    d = procs.start_metad(tmp_path, "--log_file", str(log))
    assert request(d.port, "PUT", "/metadata?key=k", body=b"v")[0] == 200
    os.rename(log, tmp_path / "svc.log.1")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: log.exists() and "log file reopened" in log.read_text(),
             what="log reopened")
    assert d.proc.poll() is None
    assert request(d.port, "GET", "/metadata?key=k")[:2] == (200, b"v")
    # With --syslog there is nothing to reopen: ignored, as a reload.
    s = procs.start_metad(tmp_path, "--syslog")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert s.proc.poll() is None
    assert request(s.port, "PUT", "/metadata?key=k", body=b"v")[0] == 200


@pytest.mark.parametrize("prog", ["metad", "master", "client"])
def test_dump_config_loads_back(tmp_path, prog):
    """--dump_config's output is a config file: it was refused ("expected
    a string value for 'config_path'": its unset strings are null)."""
    path = {"metad": METAD, "master": ("master", "mooncake_master"),
            "client": ("mooncakefs", "cli", "mooncake_client")}[prog]
    first = subprocess.run([binary(*path), "--dump_config"],
                           capture_output=True, text=True, timeout=30)
    assert first.returncode == 0, first.stderr
    cfg = tmp_path / "dumped.json"
    cfg.write_text(first.stdout)
    again = subprocess.run([binary(*path), "--config_path", str(cfg),
                            "--dump_config"],
                           capture_output=True, text=True, timeout=30)
    assert again.returncode == 0, again.stderr
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert b.pop("config_path") == str(cfg) and a.pop("config_path") is None
    assert a == b


def test_store_that_is_not_sqlite_is_named(tmp_path):
    """A --store file that is not an sqlite database: the message named
    no file ("metadata store: set WAL mode ...")."""
    bad = tmp_path / "notdb"
    bad.write_text("garbage\n" * 100)
    p = run_metad("--port", "0", "--store", f"sqlite:{bad}")
    assert p.returncode != 0, p
    assert f"metadata store {bad}: set WAL mode" in p.stderr, p.stderr


@pytest.mark.parametrize("prog", ["metad", "master", "client"])
def test_log_file_that_cannot_be_opened_is_a_usage_error(prog):
    """A --log_file in a directory that does not exist exited 1 (a runtime
    failure); it is the configuration's error: 2, naming the file."""
    path = {"metad": METAD, "master": ("master", "mooncake_master"),
            "client": ("mooncakefs", "cli", "mooncake_client")}[prog]
    p = subprocess.run([binary(*path), "--log_file", "/nonexistent/x.log"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "log file /nonexistent/x.log: No such file" in p.stderr, p.stderr


@pytest.mark.parametrize("prog", ["metad", "master"])
def test_token_file_open_to_others_is_a_usage_error(tmp_path, prog):
    """A token file readable by others (or not the owner's) is refused, as
    ssh refuses such a key; the service exited 1 (a runtime failure) where
    the configuration is wrong: 2."""
    path = {"metad": METAD, "master": ("master", "mooncake_master")}[prog]
    tok = tmp_path / "token"
    tok.write_text("ab" * 32 + "\n")
    os.chmod(tok, 0o644)
    p = subprocess.run([binary(*path), "--auth_token_file", str(tok),
                        *(["--db_path", "memory", "--rpc_port", "0",
                           "--metrics_port", "0"] if prog == "master" else
                          ["--port", "0"])],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "too open" in p.stderr, p.stderr


def test_log_file_on_full_disk_says_so(procs, tmp_path):
    """A --log_file whose disk is full lost every line silently: the first
    lost line is reported on stderr (naming the file, why and what to do),
    and once the file takes lines again it says how many were lost."""
    from mctest import fill_fs, small_tmpfs
    with small_tmpfs(tmp_path / "logfs") as fs:
        log = fs / "svc.log"
        d = procs.start_metad(tmp_path, "--log_file", str(log))
        wait_for(lambda: log.stat().st_size > 0, what="first log line")
        # The file's last page full too (tmpfs: no room, no new page).
        with open(log, "ab") as f:
            f.write(b"#" * (-log.stat().st_size % 4096))
        fill_fs(fs)
        d.proc.send_signal(signal.SIGHUP)  # logs "log file reopened"
        stderr = tmp_path / "metad.log"
        what = f"log file {log}: cannot write: No space left on device"
        wait_for(lambda: what in stderr.read_text(), what="stderr report")
        d.proc.send_signal(signal.SIGHUP)
        (fs / "filler").unlink()
        d.proc.send_signal(signal.SIGHUP)
        lost = re.compile(r"log lines lost before this one: (\d+) "
                          r"\(the log file (\S+) could not be written\)")
        wait_for(lambda: lost.search(log.read_text()), what="the loss")
        m = lost.search(log.read_text())
        assert int(m.group(1)) >= 1 and m.group(2) == str(log), m.group(0)
        assert stderr.read_text().count(what) == 1  # once, not a line each
        assert d.proc.poll() is None
