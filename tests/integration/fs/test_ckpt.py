# SPDX-License-Identifier: Apache-2.0
"""ckpt/ on the mount (issue 20): checkpoints published with `mooncake
ckpt publish` appear in every mount with their tree, sizes, modes and
times; ls, du, cat, cp -r, Python reads and numpy's mmap of a file fetch
its shards on demand from the holders; a mount that read a shard serves
it to others (the publisher can then go); files are read-only; links are
symlinks; `rm -r ckpt/NAME` unpublishes for every mount; the cache is
emptied at unmount."""
import filecmp
import hashlib
import json
import os
import signal
import stat
import subprocess

import numpy as np
import pytest

from mctest import binary
from mount import SCALE, wait_for

CLI = ("mooncakefs", "cli", "mooncake")
MiB = 1 << 20


def cli(master, *args, check=True):
    env = dict(os.environ, MOONCAKE_MASTER=master.addr,
               MOONCAKE_TE_META_DATA_SERVER=master.metadata)
    p = subprocess.run([binary(*CLI), *args], capture_output=True,
                       text=True, env=env, timeout=120 * SCALE)
    if check:
        assert p.returncode == 0, f"{args}: {p.stderr}"
    return p


class Publisher:
    def __init__(self, procs, tmp_path, master, src, name, *args):
        env = dict(os.environ, MOONCAKE_MASTER=master.addr,
                   MOONCAKE_TE_META_DATA_SERVER=master.metadata)
        self.procs = procs
        self.proc = procs.popen(
            [binary(*CLI), "ckpt", "publish", str(src), name, *args],
            env=env, stdout=subprocess.PIPE,
            stderr=open(tmp_path / f"pub-{name}.log", "wb"), text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("serving"), (
            line + (tmp_path / f"pub-{name}.log").read_text())
        self.endpoint = line.split()[-1]

    def stop(self):
        self.procs.kill(self.proc, signal.SIGTERM)


def make_model(root):
    rng = np.random.default_rng(7)
    root.mkdir()
    (root / "sub").mkdir()
    weights = rng.standard_normal(3 * MiB // 4, dtype=np.float32)
    weights.tofile(root / "weights.bin")          # 3 MiB: 3 shards
    (root / "config.json").write_text('{"layers": 32}\n')
    (root / "sub" / "tok.bin").write_bytes(rng.bytes(MiB + 17))
    (root / "empty").write_bytes(b"")
    os.chmod(root / "config.json", 0o640)
    os.symlink("weights.bin", root / "latest.bin")
    return weights


def info(master, name):
    return json.loads(cli(master, "ckpt", "info", name).stdout)


def test_browse_read_mmap_copy(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    weights = make_model(src)
    pub = Publisher(procs, tmp_path, master, src, "m1", "--shard_size",
                    "1MiB")
    a = mounts(name="a")
    b = mounts(name="b")
    ck = a.path / "ckpt"
    assert os.listdir(ck) == ["m1"]
    assert sorted(os.listdir(ck / "m1")) == [
        "config.json", "empty", "latest.bin", "sub", "weights.bin"]
    st = os.stat(ck / "m1" / "weights.bin")
    assert st.st_size == 3 * MiB
    assert st.st_mtime_ns == os.stat(src / "weights.bin").st_mtime_ns
    # Read-only: the mode loses its write bits, writes are refused.
    assert stat.S_IMODE(os.stat(ck / "m1" / "config.json").st_mode) == 0o440
    with pytest.raises(OSError):
        open(ck / "m1" / "config.json", "r+b")
    with pytest.raises(OSError):
        (ck / "m1" / "new").write_text("x")
    assert os.readlink(ck / "m1" / "latest.bin") == "weights.bin"
    # Python reads, numpy's mmap, du.
    assert (ck / "m1" / "config.json").read_text() == '{"layers": 32}\n'
    mm = np.memmap(ck / "m1" / "weights.bin", dtype=np.float32, mode="r")
    assert np.array_equal(mm, weights)
    del mm
    du = subprocess.run(["du", "-sb", str(ck / "m1")], capture_output=True,
                        text=True, check=True).stdout.split()[0]
    assert int(du) >= 4 * MiB
    # cp -r through the other mount: the whole tree, byte for byte.
    subprocess.run(["cp", "-a", str(ck / "m1"), str(tmp_path / "copy")],
                   check=True, cwd=tmp_path)
    cmp = filecmp.dircmp(src, tmp_path / "copy")
    assert not cmp.diff_files and not cmp.left_only and not cmp.right_only
    assert (tmp_path / "copy" / "sub" / "tok.bin").read_bytes() == \
        (src / "sub" / "tok.bin").read_bytes()
    # Both mounts hold what they read and serve it: the publisher can go.
    inf = info(master, "m1")
    assert inf["holders"] >= 2, inf
    pub.stop()
    wait_for(lambda: info(master, "m1")["holders"] == len(
        [h for h in info(master, "m1")["holder_list"] if h["shards"]]),
        what="publisher gone")
    c = mounts(name="c")
    data = (c.path / "ckpt" / "m1" / "sub" / "tok.bin").read_bytes()
    assert hashlib.sha256(data).digest() == hashlib.sha256(
        (src / "sub" / "tok.bin").read_bytes()).digest()


def test_links_and_rm_r(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    make_model(src)
    pub = Publisher(procs, tmp_path, master, src, "v1")
    a = mounts(name="a")
    b = mounts(name="b")
    cli(master, "ckpt", "link", "latest", "v1")
    ck = a.path / "ckpt"
    wait_for(lambda: "latest" in os.listdir(ck), timeout=5 * SCALE,
             what="the link listed")
    assert os.readlink(ck / "latest") == "v1"
    assert (ck / "latest" / "config.json").read_text() == \
        '{"layers": 32}\n'
    # The other mount has it cached (looked up, read).
    assert (b.path / "ckpt" / "v1" / "config.json").read_text()
    # rm -r of the checkpoint unpublishes it for every mount.
    subprocess.run(["rm", "-rf", str(ck / "v1")], check=True)
    names = [ln.split()[0] for ln in
             cli(master, "ckpt", "ls").stdout.splitlines()]
    assert names == ["latest"]
    assert not os.path.exists(ck / "v1")
    # The link dangles now, as a symlink would.
    assert os.path.islink(ck / "latest")
    assert not os.path.exists(ck / "latest")
    # The change feed drops it from the other mount's kernel cache (the
    # entry would otherwise stay for entry_timeout, 60 s).
    wait_for(lambda: not os.path.exists(b.path / "ckpt" / "v1"),
             timeout=10 * SCALE, what="gone from the other mount")
    os.unlink(ck / "latest")
    assert cli(master, "ckpt", "ls").stdout == ""
    pub.stop()


def test_cache_emptied_at_unmount(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    make_model(src)
    pub = Publisher(procs, tmp_path, master, src, "c1")
    cache = tmp_path / "cache"
    a = mounts(name="a", opts=f"ckpt_cache={cache}")
    assert (a.path / "ckpt" / "c1" / "weights.bin").stat().st_size
    (a.path / "ckpt" / "c1" / "weights.bin").read_bytes()
    held = [p for p in cache.rglob("weights.bin")]
    assert held and held[0].stat().st_size == 3 * MiB
    a.umount()
    wait_for(lambda: not list(cache.rglob("weights.bin")),
             timeout=20 * SCALE, what="the cache emptied")
    pub.stop()
