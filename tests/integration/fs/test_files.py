# SPDX-License-Identifier: Apache-2.0
"""The mounted pool with real tools: cp, cat, cmp, ls, du, df, mv, rm,
xattrs, directories of many keys."""
import errno
import os
import subprocess
import threading
import time

from mount import Shell, write_random


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True,
                          check=True, timeout=300, **kw)


def test_cp_cat_cmp_sizes(mnt, tmp_path):
    for size in (0, 1, 4095, 4096, (1 << 20) + 1, 10 << 20, 256 << 20):
        src = tmp_path / f"src{size}"
        write_random(src, size, size)
        dst = mnt.kv / f"file{size}"
        run("cp", str(src), str(dst))
        run("cmp", str(src), str(dst))
        assert os.path.getsize(dst) == size
        out = subprocess.run(["cat", str(dst)], capture_output=True,
                             check=True).stdout
        assert len(out) == size
        src.unlink()
        os.unlink(dst)


def test_ls_du_df_agree_with_the_master(mnt, tmp_path, master):
    sizes = {"a": 1000, "b": 300000, "c": 5 << 20}
    for name, size in sizes.items():
        write_random(mnt.kv / name, size, 1)
    ls = run("ls", "-l", str(mnt.kv)).stdout.splitlines()
    listed = {l.split()[-1]: int(l.split()[4]) for l in ls[1:]}
    assert listed == sizes
    du = int(run("du", "-s", "-B1", "--apparent-size",
                 str(mnt.kv)).stdout.split()[0])
    assert du >= sum(sizes.values())  # each object once, not per replica
    assert du < sum(sizes.values()) + 64 * 1024
    st = os.statvfs(mnt.path)
    assert st.f_blocks * st.f_frsize == \
        master.metric("master_total_capacity_bytes") // 4096 * 4096
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    alloc = master.metric("master_allocated_bytes")
    assert abs(used - alloc) < 4096 * 2, (used, alloc)
    df = run("df", "-B1", str(mnt.path)).stdout.splitlines()[1].split()
    assert int(df[1]) == st.f_blocks * st.f_frsize


def test_cp_over_an_existing_file_replaces_it(mnt, tmp_path):
    first = tmp_path / "first"
    second = tmp_path / "second"
    write_random(first, 2 << 20, 1)
    write_random(second, 3 << 20, 2)
    run("cp", str(first), str(mnt.kv / "x"))
    run("cmp", str(first), str(mnt.kv / "x"))
    run("cp", str(second), str(mnt.kv / "x"))
    run("cmp", str(second), str(mnt.kv / "x"))
    assert os.path.getsize(mnt.kv / "x") == 3 << 20


def slow_reader(path, chunks, started, go, out):
    with open(path, "rb") as f:
        out.append(f.read(1 << 20))
        started.set()
        go.wait(30)
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            out.append(b)


def test_rm_and_mv_over_while_a_reader_reads(mnt, tmp_path):
    old = write_random(mnt.kv / "victim", 8 << 20, 5)
    new = write_random(tmp_path / "new", 4 << 20, 6)
    for action in ("rm", "mv"):
        if action == "mv":
            old = write_random(mnt.kv / "victim", 8 << 20, 7)
        started, go, out = threading.Event(), threading.Event(), []
        t = threading.Thread(target=slow_reader,
                             args=(mnt.kv / "victim", 8, started, go, out))
        t.start()
        assert started.wait(30)
        if action == "rm":
            os.unlink(mnt.kv / "victim")
            assert not os.path.exists(mnt.kv / "victim")
        else:
            run("cp", str(tmp_path / "new"), str(mnt.kv / "staged"))
            os.rename(mnt.kv / "staged", mnt.kv / "victim")
            assert open(mnt.kv / "victim", "rb").read() == new
        go.set()
        t.join(60)
        assert b"".join(out) == old, action


def test_xattrs(mounts, tmp_path):
    mnt = mounts(seg="512MiB", opts="xattr")
    write_random(mnt.kv / "xa", 12345, 1)
    names = os.listxattr(mnt.kv / "xa")
    assert "user.mooncake.replicas" in names
    assert os.getxattr(mnt.kv / "xa", "user.mooncake.key") == b"xa"
    reps = os.getxattr(mnt.kv / "xa", "user.mooncake.replicas").decode()
    assert "@0x" in reps and len(reps.strip().splitlines()) == 1
    assert os.getxattr(mnt.kv / "xa", "user.mooncake.pins") == b"none"
    with open(mnt.kv / "xa", "rb") as f:
        f.read(1)
        # The writer's RELEASE reaches the mount after its close()
        # returns (FUSE sends it asynchronously): its hold may still
        # count for a moment.
        deadline = time.monotonic() + 10
        while (os.getxattr(mnt.kv / "xa", "user.mooncake.holds") != b"1"
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert os.getxattr(mnt.kv / "xa", "user.mooncake.holds") == b"1"


def test_ls_l_sends_no_getxattr_without_the_option(mounts):
    """ls -l asks every file for security.selinux and
    system.posix_acl_access: without -o xattr the mount answers the first
    getxattr ENOSYS and the kernel sends no more (one round trip per file
    less); with it, every file costs round trips."""
    plain = mounts(seg="64MiB", name="plain")
    withx = mounts(seg="0", name="withx", opts="xattr")
    n = 300
    os.mkdir(plain.kv / "many")
    for i in range(n):
        (plain.kv / "many" / f"f{i}").write_bytes(b"x" * (i + 1))
    for m, most in ((plain, 1), (withx, None)):
        before = m.stats()["mount_getxattr_requests"]
        ls = run("ls", "-l", str(m.kv / "many")).stdout.splitlines()
        assert len(ls) == n + 1, ls[:3]
        sent = m.stats()["mount_getxattr_requests"] - before
        if most is not None:
            assert sent <= most, f"{sent} getxattr requests for ls -l"
        else:
            assert sent >= n, f"only {sent} getxattr requests"
    try:
        os.getxattr(plain.kv / "many" / "f0", "user.mooncake.key")
        raise AssertionError("getxattr answered without -o xattr")
    except OSError as e:
        assert e.errno == errno.EOPNOTSUPP, e
    assert os.getxattr(withx.kv / "many" / "f0",
                       "user.mooncake.key") == b"many/f0"
    assert run("cp", "-a", str(plain.kv / "many" / "f1"),
               str(plain.kv / "copy")).returncode == 0
    assert (plain.kv / "copy").read_bytes() == b"xx"


def test_directories_of_10k_keys(mnt, tmp_path, master, procs):
    sh = Shell(procs, tmp_path, master)
    sh.ok("bput 10000 big/k 16 3", timeout=300)
    names = os.listdir(mnt.kv / "big")
    assert len(names) == 10000
    assert sorted(names) == sorted(f"k{i}" for i in range(10000))
    ls = run("ls", "-l", str(mnt.kv / "big")).stdout.splitlines()
    assert len(ls) == 10001
    assert all(l.split()[4] == "16" for l in ls[1:])
    # Nested directories and mkdir.
    os.makedirs(mnt.kv / "d1" / "d2")
    write_random(mnt.kv / "d1" / "d2" / "f", 10, 1)
    assert os.listdir(mnt.kv / "d1") == ["d2"]
    assert os.listdir(mnt.kv / "d1" / "d2") == ["f"]
    os.mkdir(mnt.kv / "empty")
    assert "empty" in os.listdir(mnt.kv)
    os.rmdir(mnt.kv / "empty")
    assert "empty" not in os.listdir(mnt.kv)


def test_virtual_files(mnt, master):
    stats = open(mnt.path / ".mooncake" / "stats").read()
    assert "master_total_capacity_bytes" in stats
    cfg = open(mnt.path / ".mooncake" / "config").read()
    assert master.addr in cfg
    segs = open(mnt.path / ".mooncake" / "segments").read()
    assert "mounted" in segs
    assert sorted(os.listdir(mnt.path)) == [".mooncake", "ckpt", "kv"]


def test_virtual_files_closed_as_soon_as_read(mnt):
    """A reader that closes the moment its read returns: the release runs
    on another daemon thread while the one that replied may still be in
    its writev. The text must outlive that reply (an ASan build of the
    mount reported a use after free here, and the mount died: ENOTCONN);
    every read sees the whole text."""
    path = mnt.path / ".mooncake" / "config"
    want = open(path, "rb").read()
    errors = []

    def reader():
        try:
            for _ in range(300):
                fd = os.open(path, os.O_RDONLY)
                try:
                    got = os.read(fd, 1 << 16)
                finally:
                    os.close(fd)
                if got != want:
                    errors.append(got)
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
