# SPDX-License-Identifier: Apache-2.0
"""ckpt/ on the mount (issue 20): checkpoints published with `mooncake
ckpt publish` appear in every mount with their tree, sizes, modes and
times; ls, du, cat, cp -r, Python reads and numpy's mmap of a file fetch
its shards on demand from the holders; a mount that read a shard serves
it to others (the publisher can then go); files are read-only; links are
symlinks; `rm -r ckpt/NAME` unpublishes for every mount; the cache is
emptied at unmount."""
import errno
import filecmp
import hashlib
import json
import os
import pathlib
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
    mounts(name="b")  # a second mount beside a
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


def test_empty_checkpoint(procs, tmp_path, master, mounts):
    """A checkpoint of an empty directory lists as an empty directory
    (its file list was sorted from a NULL array: undefined behaviour,
    which UBSan stops on)."""
    src = tmp_path / "empty"
    src.mkdir()
    pub = Publisher(procs, tmp_path, master, src, "e1")
    a = mounts(name="a")
    assert os.listdir(a.path / "ckpt") == ["e1"]
    assert os.listdir(a.path / "ckpt" / "e1") == []
    assert stat.S_ISDIR(os.stat(a.path / "ckpt" / "e1").st_mode)
    pub.stop()


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

    def emptied():
        try:
            return not list(cache.rglob("weights.bin"))
        except FileNotFoundError:  # a directory removed while walked
            return False
    wait_for(emptied, timeout=20 * SCALE, what="the cache emptied")
    pub.stop()


def test_cache_that_cannot_be_used(procs, tmp_path, master, mounts):
    """A ckpt_cache= that cannot be made fails the mount, naming it; one
    that stops being writable (a read-only filesystem here) makes ckpt/
    answer an error, logged with the path's reason, where it listed an
    empty directory though checkpoints were published, and logged only
    FILE_OPEN_FAIL."""
    from mctest import small_tmpfs
    src = tmp_path / "model"
    make_model(src)
    pub = Publisher(procs, tmp_path, master, src, "ro1")
    p = subprocess.run(
        [binary("mooncakefs", "fuse", "mooncakefs"), master.addr,
         str(tmp_path), "-o",
         f"metadata={master.metadata},ckpt_cache=/proc/nope/cache"],
        capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert "ckpt_cache=/proc/nope/cache" in p.stderr, p.stderr
    with small_tmpfs(tmp_path / "ro") as d:
        a = mounts(name="a", opts=f"ckpt_cache={d}")
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        with pytest.raises(OSError) as e:
            os.listdir(a.path / "ckpt")
        assert e.value.errno == errno.EROFS, e.value
        wait_for(lambda: "Read-only file system" in a.log(),
                 what="the reason logged")
        assert "ckpt_cache=DIR" in a.log(), a.log()
        a.umount()
    pub.stop()


def tree_bytes(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            out[rel] = (os.readlink(p) if os.path.islink(p) else
                        open(p, "rb").read())
    return out


def test_publish_through_the_mount(procs, tmp_path, master, mounts):
    """cp -r into a hidden name, then mv to the final name: the other
    mount sees nothing until the mv, then the whole checkpoint."""
    src = tmp_path / "model"
    make_model(src)
    a = mounts(name="a")
    b = mounts(name="b")
    ck_a, ck_b = a.path / "ckpt", b.path / "ckpt"
    stage = ck_a / ".llama.tmp"
    # A half-copied checkpoint: some files in, others not yet.
    stage.mkdir()
    (stage / "config.json").write_text('{"layers": 32}\n')
    assert ".llama.tmp" in os.listdir(ck_a)
    assert os.listdir(ck_b) == []
    assert not os.path.exists(ck_b / ".llama.tmp")
    assert cli(master, "ckpt", "ls").stdout == ""
    subprocess.run(["cp", "-a", f"{src}/.", str(stage)], check=True)
    assert tree_bytes(stage) == tree_bytes(src)
    assert os.listdir(ck_b) == []
    # The seal.
    os.rename(stage, ck_a / "llama")
    assert ".llama.tmp" not in os.listdir(ck_a)
    wait_for(lambda: "llama" in os.listdir(ck_b), timeout=10 * SCALE,
             what="the sealed checkpoint in the other mount")
    assert tree_bytes(ck_b / "llama") == tree_bytes(src)
    assert stat.S_IMODE(os.stat(ck_b / "llama" / "config.json").st_mode) \
        == 0o440
    # The publishing mount reads it too (each open was EEXIST there: it
    # serves the checkpoint already), twice: its files closed between.
    for _ in range(2):
        assert tree_bytes(ck_a / "llama") == tree_bytes(src)
    inf = info(master, "llama")
    assert inf["shards"] >= 3 and inf["holders"] >= 1
    # A name that is taken cannot be sealed again.
    stage2 = ck_a / ".again"
    stage2.mkdir()
    (stage2 / "x").write_bytes(b"x")
    with pytest.raises(FileExistsError):
        os.rename(stage2, ck_a / "llama")
    # ln -s / ln -sfn at the top of ckpt/: links for every mount.
    os.symlink("llama", ck_a / "latest")
    wait_for(lambda: os.path.islink(ck_b / "latest"), timeout=10 * SCALE,
             what="the link in the other mount")
    assert (ck_b / "latest" / "config.json").read_text() == \
        '{"layers": 32}\n'
    os.rename(stage2, ck_a / "llama2")
    subprocess.run(["ln", "-sfn", "llama2", str(ck_a / "latest")],
                   check=True)
    assert os.readlink(ck_a / "latest") == "llama2"
    names = sorted(ln.split()[0] for ln in
                   cli(master, "ckpt", "ls").stdout.splitlines())
    assert names == ["latest", "llama", "llama2"]


def test_copy_to_final_name_then_seal(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    make_model(src)
    a = mounts(name="a")
    b = mounts(name="b")
    subprocess.run(["cp", "-r", str(src), str(a.path / "ckpt" / "direct")],
                   check=True)
    assert "direct" in os.listdir(a.path / "ckpt")
    assert not os.path.exists(b.path / "ckpt" / "direct")
    cli(master, "ckpt", "seal", "direct")
    wait_for(lambda: os.path.isdir(b.path / "ckpt" / "direct"),
             timeout=10 * SCALE, what="sealed")
    assert tree_bytes(b.path / "ckpt" / "direct") == tree_bytes(src)
    # Sealed: read-only now, also in the mount that staged it.
    with pytest.raises(OSError):
        (a.path / "ckpt" / "direct" / "new").write_text("x")
    p = cli(master, "ckpt", "seal", "nothing-here", check=False)
    assert p.returncode == 1
    # Sealed again (a retried script), by name or path: nothing changes
    # and it succeeds (was: exit 1, "no mount has it waiting" or "not a
    # checkpoint copied into a mount's ckpt/").
    for what in ("direct", str(b.path / "ckpt" / "direct")):
        p = cli(master, "ckpt", "seal", what, check=False)
        assert p.returncode == 0 and "published already" in p.stderr, \
            p.stderr
    assert tree_bytes(b.path / "ckpt" / "direct") == tree_bytes(src)


def test_rm_of_a_sealed_checkpoint_frees_its_files(procs, tmp_path, master,
                                                  mounts):
    """A checkpoint sealed through a mount is served from its files in
    the mount's cache; `rm -r ckpt/NAME` unpublished it but its files
    stayed there until the unmount, so a long-lived mount that publishes
    weights filled its disk. They go once no read of them is in flight."""
    src = tmp_path / "model"
    make_model(src)
    a = mounts(name="a")
    b = mounts(name="b")
    cache = tmp_path / "ckpt-cache"

    def sealed():
        return [p for p in cache.rglob("*") if p.parent.name == ".sealed"]
    stage = a.path / "ckpt" / ".w.tmp"
    subprocess.run(["cp", "-r", str(src), str(stage)], check=True)
    os.rename(stage, a.path / "ckpt" / "w")
    wait_for(lambda: "w" in os.listdir(b.path / "ckpt"), timeout=10 * SCALE,
             what="sealed")
    assert tree_bytes(b.path / "ckpt" / "w") == tree_bytes(src)
    assert len(sealed()) == 1
    subprocess.run(["rm", "-r", str(a.path / "ckpt" / "w")], check=True)
    wait_for(lambda: not sealed(), timeout=10 * SCALE,
             what="the sealed files removed")
    assert "w" not in os.listdir(a.path / "ckpt")


def test_reader_mount_killed_and_remounted(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    make_model(src)
    pub = Publisher(procs, tmp_path, master, src, "k1", "--shard_size",
                    "1MiB")
    b = mounts(name="b")
    assert (b.path / "ckpt" / "k1" / "sub" / "tok.bin").read_bytes()
    subprocess.run(["pkill", "-9", "-f", f"mooncakefs .* {b.path} "])
    wait_for(lambda: b.pid() is None, what="the mount's daemon gone")
    b.cleanup()
    b.mount()
    assert tree_bytes(b.path / "ckpt" / "k1") == tree_bytes(src)
    pub.stop()


def test_cache_cap_drops_least_recent(procs, tmp_path, master, mounts):
    src = tmp_path / "model"
    make_model(src)  # 4 MiB + 70 bytes of files
    p1 = Publisher(procs, tmp_path, master, src, "old", "--shard_size",
                   "1MiB")
    p2 = Publisher(procs, tmp_path, master, src, "new", "--shard_size",
                   "1MiB")
    cache = tmp_path / "cache"
    a = mounts(name="a", opts=f"ckpt_cache={cache},ckpt_cache_size=6MiB")
    ep = None

    def mine(name):
        return [h for h in info(master, name)["holder_list"]
                if not h["publisher"] and h["shards"]]

    assert tree_bytes(a.path / "ckpt" / "old") == tree_bytes(src)
    held = mine("old")
    assert held and held[0]["shards"] == 6
    ep = held[0]["endpoint"]
    # Reading the second one passes the cap: the first (no file open on
    # it) goes, here and at the master.
    assert tree_bytes(a.path / "ckpt" / "new") == tree_bytes(src)
    assert mine("new")[0]["endpoint"] == ep
    wait_for(lambda: not mine("old"), timeout=10 * SCALE,
             what="the least recent checkpoint dropped")
    sizes = {str(f.relative_to(cache)): f.stat().st_blocks * 512
             for f in cache.rglob("*")
             if f.is_file() and not f.is_symlink()}
    assert sum(sizes.values()) <= 6 * MiB + 64 * 1024, sizes
    # Still readable: fetched again.
    assert (a.path / "ckpt" / "old" / "sub" / "tok.bin").read_bytes() == \
        (src / "sub" / "tok.bin").read_bytes()
    p1.stop()
    p2.stop()


def test_another_local_user(procs, tmp_path, master, mounts):
    """allow_other: another user reads what the published modes allow
    (write bits off), and can neither stage, seal nor unpublish."""
    import shutil
    import tempfile
    from test_users import as_other
    src = tmp_path / "model"
    make_model(src)  # config.json 0640, the rest 0644
    pub = Publisher(procs, tmp_path, master, src, "u1")
    base = pathlib.Path(tempfile.mkdtemp(prefix="mcfs-ckpt-users-"))
    os.chmod(base, 0o755)
    m = mounts(path=base / "mnt", opts="allow_other")
    ck = m.path / "ckpt"
    try:
        r = as_other(f"sha256sum {ck}/u1/weights.bin && ls {ck}/u1")
        assert r.returncode == 0, r.stderr
        assert hashlib.sha256((src / "weights.bin").read_bytes()) \
            .hexdigest() in r.stdout
        r = as_other(f"cat {ck}/u1/config.json")
        assert r.returncode != 0 and "Permission denied" in r.stderr
        for cmd in (f"mkdir {ck}/.mine", f"rm -rf {ck}/u1",
                    f"ln -s u1 {ck}/mylink"):
            r = as_other(cmd)
            assert r.returncode != 0, cmd
        assert "u1" in cli(master, "ckpt", "ls").stdout
        assert os.listdir(ck) == ["u1"]
    finally:
        m.cleanup()
        shutil.rmtree(base, ignore_errors=True)
        pub.stop()
