# SPDX-License-Identifier: Apache-2.0
"""Attributes through the mount: chmod, chown, touch -d, cp -p, tar -p
and rsync -a keep what they set; a file is created with its creator's
owner and mode; directories made with mkdir are records of the master
(seen by another mount, kept across a remount and a master kill -9);
a directory's mtime follows creates and removals; `mv dir1 dir2` moves
the whole directory at once; symbolic links are objects of their own kind;
objects put through the API show the
mount's defaults (file_mode=, dir_mode=, uid=, gid=)."""
import errno
import os
import shutil
import stat
import subprocess
import time

import pytest

from mount import Shell, wait_for

T2020 = 1577836800  # 2020-01-01T00:00:00Z


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def run(*cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                       **kw)
    assert p.returncode == 0, (cmd, p.stderr)
    return p.stdout


def test_chmod_chown_touch_are_stored(procs, tmp_path, master, mounts):
    m = mounts()
    f = m.kv / "f"
    f.write_bytes(b"data")
    assert mode(f) == 0o644
    os.chmod(f, 0o600)
    os.chown(f, 1234, 5678)
    run("touch", "-d", "2020-01-01 00:00:00 UTC", str(f))
    st = os.stat(f)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == \
        (0o600, 1234, 5678)
    assert int(st.st_mtime) == T2020 and int(st.st_atime) == T2020
    assert st.st_ctime > T2020  # the change itself is now
    assert f.read_bytes() == b"data"
    # Another mount sees the same (it is the master's, not this mount's).
    other = mounts(name="other")
    st2 = os.stat(other.kv / "f")
    assert (stat.S_IMODE(st2.st_mode), st2.st_uid, st2.st_gid,
            int(st2.st_mtime)) == (0o600, 1234, 5678, T2020)
    # ls -l (readdirplus) shows them too.
    out = run("ls", "-ln", str(other.kv))
    assert "-rw------- 1 1234 5678" in out, out
    # A rewrite keeps owner and mode, and the content's time is new.
    with open(f, "wb") as fp:
        fp.write(b"new")
    st = os.stat(f)
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == \
        (0o600, 1234, 5678)
    assert st.st_mtime > T2020 + 1000
    # .mooncake/ is the mount's own.
    with pytest.raises(PermissionError):
        os.chmod(m.path / ".mooncake" / "stats", 0o600)


def test_new_files_and_dirs_belong_to_their_creator(procs, tmp_path, master,
                                                    mounts):
    m = mounts()
    old = os.umask(0o027)
    try:
        (m.kv / "d").mkdir(0o775)
        (m.kv / "d" / "f").write_bytes(b"x")
        fd = os.open(m.kv / "d" / "g", os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
    finally:
        os.umask(old)
    assert mode(m.kv / "d") == 0o750
    assert mode(m.kv / "d" / "f") == 0o640
    assert mode(m.kv / "d" / "g") == 0o640
    # A set-group-ID directory hands its group down.
    os.chown(m.kv / "d", 0, 4321)
    os.chmod(m.kv / "d", 0o2775)
    (m.kv / "d" / "h").write_bytes(b"y")
    os.mkdir(m.kv / "d" / "sub")
    assert os.stat(m.kv / "d" / "h").st_gid == 4321
    assert os.stat(m.kv / "d" / "sub").st_gid == 4321
    assert os.stat(m.kv / "d" / "sub").st_mode & stat.S_ISGID


def test_directory_mtime_follows_its_entries(procs, tmp_path, master,
                                             mounts):
    m = mounts()
    d = m.kv / "d"
    d.mkdir()
    os.utime(d, (T2020, T2020))
    assert int(os.stat(d).st_mtime) == T2020
    (d / "f").write_bytes(b"x")
    t1 = os.stat(d).st_mtime
    assert t1 > T2020 + 1000
    os.utime(d, (T2020, T2020))
    os.unlink(d / "f")
    assert os.stat(d).st_mtime > T2020 + 1000
    os.utime(d, (T2020, T2020))
    (d / "sub").mkdir()
    assert os.stat(d).st_mtime > T2020 + 1000


def test_directory_times_stay_when_a_file_is_rewritten(mounts):
    """As on ext4 and tmpfs: rewriting a file in place (O_TRUNC, write,
    close; an append with fsync; truncate) changes the file, not its
    directory (make and rsync compare times). The mount publishes a
    version by renaming a hidden object over the name, and until
    2026-12-07 that rename moved the directory's mtime and ctime too."""
    m = mounts()
    d = m.kv / "d"
    d.mkdir()
    (d / "f").write_bytes(b"v1")
    os.utime(d, (T2020, T2020))
    before = os.stat(d)
    (d / "f").write_bytes(b"v2")
    with open(d / "f", "ab") as f:
        f.write(b"+")
        f.flush()
        os.fsync(f.fileno())
    os.truncate(d / "f", 2)
    # Seen by a mount that caches nothing of it yet.
    other = mounts(name="other")
    after = os.stat(other.kv / "d")
    assert (after.st_mtime_ns, after.st_ctime_ns) == \
        (before.st_mtime_ns, before.st_ctime_ns)
    assert (other.kv / "d" / "f").read_bytes() == b"v2"
    # A new name, a removal and a rename still change it.
    for change in (lambda: (d / "g").write_bytes(b"new"),
                   lambda: os.rename(d / "g", d / "h"),
                   lambda: os.unlink(d / "h")):
        os.utime(d, (T2020, T2020))
        change()
        assert os.stat(d).st_mtime > T2020 + 1000


def test_cp_p_tar_p_and_rsync_a_keep_modes_and_times(procs, tmp_path, master,
                                                     mounts):
    m = mounts()
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    files = {"a": (0o600, T2020), "sub/b": (0o751, T2020 + 86400),
             "c": (0o444, T2020 + 7)}
    for name, (md, t) in files.items():
        p = src / name
        p.write_bytes(name.encode() * 1000)
        os.chmod(p, md)
        os.utime(p, (t, t))
    os.chmod(src / "sub", 0o700)
    os.utime(src / "sub", (T2020 + 99, T2020 + 99))

    def check(dst):
        for name, (md, t) in files.items():
            st = os.stat(dst / name)
            assert stat.S_IMODE(st.st_mode) == md, (dst, name)
            assert int(st.st_mtime) == t, (dst, name)
            assert (dst / name).read_bytes() == name.encode() * 1000
        assert mode(dst / "sub") == 0o700
        assert int(os.stat(dst / "sub").st_mtime) == T2020 + 99

    run("cp", "-rp", str(src), str(m.kv / "cp"))
    check(m.kv / "cp")
    tarball = tmp_path / "t.tar"
    run("tar", "-C", str(src), "-cf", str(tarball), ".")
    (m.kv / "tar").mkdir()
    run("tar", "-C", str(m.kv / "tar"), "-xpf", str(tarball))
    check(m.kv / "tar")
    # And back out of the mount, unchanged.
    out = tmp_path / "out"
    run("cp", "-rp", str(m.kv / "tar"), str(out))
    check(out)
    assert shutil.which("rsync"), "rsync missing (scripts/setup.sh)"
    run("rsync", "-a", str(src) + "/", str(m.kv / "rsync"))
    check(m.kv / "rsync")


def test_directories_are_durable_records(procs, tmp_path, master, mounts):
    m = mounts()
    (m.kv / "empty").mkdir()
    (m.kv / "deep" / "er").mkdir(parents=True)
    os.chmod(m.kv / "empty", 0o711)
    # Another mount sees them at once: they are the master's.
    other = mounts(name="other")
    assert sorted(os.listdir(other.kv)) == ["deep", "empty"]
    assert mode(other.kv / "empty") == 0o711
    assert os.listdir(other.kv / "deep") == ["er"]
    # rmdir through the other mount: gone for both.
    os.rmdir(other.kv / "deep" / "er")
    # The change feed tells the first mount's kernel.
    wait_for(lambda: not (m.kv / "deep" / "er").exists(), timeout=10,
             what="rmdir seen by the other mount")
    with pytest.raises(OSError) as e:
        os.rmdir(m.kv / "nothing")
    assert e.value.errno == 2
    (m.kv / "empty" / "f").write_bytes(b"x")
    with pytest.raises(OSError) as e:
        os.rmdir(m.kv / "empty")
    assert e.value.errno == 39  # ENOTEMPTY
    os.unlink(m.kv / "empty" / "f")
    # A remount and a master kill -9 forget nothing.
    m.umount()
    other.umount()
    master.kill()
    master.start()
    m2 = mounts(name="again")
    assert sorted(os.listdir(m2.kv)) == ["deep", "empty"]
    assert mode(m2.kv / "empty") == 0o711
    os.rmdir(m2.kv / "empty")
    assert sorted(os.listdir(m2.kv)) == ["deep"]


def test_directory_link_counts(procs, tmp_path, master, mounts):
    """A directory's st_nlink is 2 + its subdirectories (those made with
    mkdir: directory records), kept by mkdir, rmdir and mv on this and
    another mount."""
    m, m2 = mounts(), mounts(name="mnt2")
    d = m.kv / "p"
    d.mkdir()
    for sub in ("a", "b", "c"):
        (d / sub).mkdir()
    (d / "a" / "deeper").mkdir()
    (d / "f").write_bytes(b"x")
    assert os.stat(d).st_nlink == 5
    assert os.stat(d / "a").st_nlink == 3
    os.rmdir(d / "c")
    assert os.stat(d).st_nlink == 4
    os.rename(d / "b", m.kv / "b")
    assert os.stat(d).st_nlink == 3
    wait_for(lambda: os.stat(m2.kv / "p").st_nlink == 3,
             what="the other mount's count")


def test_mv_of_a_directory_is_one_step(procs, tmp_path, master, mounts):
    m = mounts()
    a = m.kv / "a"
    (a / "sub").mkdir(parents=True)
    for i in range(200):
        (a / f"f{i}").write_bytes(b"%d" % i)
    (a / "sub" / "x").write_bytes(b"deep")
    os.chmod(a / "sub", 0o700)
    reader = open(a / "f7", "rb")
    p = subprocess.run(["mv", str(a), str(m.kv / "b")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert not a.exists()
    b = m.kv / "b"
    assert sorted(os.listdir(b)) == sorted([f"f{i}" for i in range(200)] +
                                           ["sub"])
    assert (b / "f150").read_bytes() == b"150"
    assert (b / "sub" / "x").read_bytes() == b"deep"
    assert mode(b / "sub") == 0o700
    assert reader.read() == b"7"  # an open file keeps reading
    reader.close()
    # Onto an existing directory: only when it is empty.
    (m.kv / "c").mkdir()
    (m.kv / "c" / "keep").write_bytes(b"k")
    with pytest.raises(OSError) as e:
        os.rename(b, m.kv / "c")
    assert e.value.errno == 39
    os.unlink(m.kv / "c" / "keep")
    os.rename(b, m.kv / "c")
    assert (m.kv / "c" / "f3").read_bytes() == b"3"
    assert not b.exists()
    # A file over a directory and a directory over a file refuse.
    (m.kv / "file").write_bytes(b"f")
    with pytest.raises(OSError) as e:
        os.rename(m.kv / "c", m.kv / "file")
    assert e.value.errno == 20  # ENOTDIR
    with pytest.raises(OSError) as e:
        os.rename(m.kv / "file", m.kv / "c")
    assert e.value.errno == 21  # EISDIR
    # Another mount sees the move.
    other = mounts(name="other")
    assert (other.kv / "c" / "sub" / "x").read_bytes() == b"deep"


def test_api_objects_show_the_mount_defaults(procs, tmp_path, master, mounts):
    m = mounts(opts="file_mode=0640,dir_mode=0750,uid=77,gid=88")
    sh = Shell(procs, tmp_path, master)
    sh.ok("put api/obj 100 1")
    st = os.stat(m.kv / "api" / "obj")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o640, 77, 88)
    st = os.stat(m.kv / "api")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o750, 77, 88)
    # chmod of an implicit directory makes it a record.
    os.chmod(m.kv / "api", 0o700)
    assert mode(m.kv / "api") == 0o700
    sh.ok("rm api/obj")
    assert os.listdir(m.kv) == ["api"]  # the record stays


def test_symbolic_links(procs, tmp_path, master, mounts):
    m = mounts()
    (m.kv / "d").mkdir()
    (m.kv / "d" / "target").write_bytes(b"pointed at")
    os.symlink("target", m.kv / "d" / "rel")
    os.symlink("/etc/hostname", m.kv / "abs")
    os.symlink("nowhere", m.kv / "dangling")
    assert os.readlink(m.kv / "d" / "rel") == "target"
    assert (m.kv / "d" / "rel").read_bytes() == b"pointed at"
    assert os.readlink(m.kv / "abs") == "/etc/hostname"
    st = os.lstat(m.kv / "d" / "rel")
    assert stat.S_ISLNK(st.st_mode) and st.st_size == len("target")
    assert not (m.kv / "dangling").exists()
    assert (m.kv / "dangling").is_symlink()
    with pytest.raises(FileExistsError):
        os.symlink("x", m.kv / "d" / "target")
    with pytest.raises(FileExistsError):
        os.symlink("x", m.kv / "d")
    with pytest.raises(OSError) as e:  # longer than a path may be
        os.symlink("t" * 4096, m.kv / "long")
    assert e.value.errno == 36  # ENAMETOOLONG
    # ls -l and find see them as links, from another mount too.
    other = mounts(name="other")
    out = run("ls", "-l", str(other.kv / "d"))
    assert "rel -> target" in out, out
    assert sorted(run("find", str(other.kv), "-type", "l").split()) == \
        sorted(str(other.kv / p) for p in ("abs", "dangling", "d/rel"))
    # A link moves and goes like any name; chown -h changes the link.
    os.rename(m.kv / "d" / "rel", m.kv / "d" / "rel2")
    assert os.readlink(m.kv / "d" / "rel2") == "target"
    os.chown(m.kv / "d" / "rel2", 99, 98, follow_symlinks=False)
    assert os.lstat(m.kv / "d" / "rel2").st_uid == 99
    assert os.stat(m.kv / "d" / "target").st_uid == 0
    os.unlink(m.kv / "d" / "rel2")
    assert (m.kv / "d" / "target").read_bytes() == b"pointed at"
    # tar keeps links.
    (m.kv / "x").mkdir()
    os.symlink("target", m.kv / "d" / "rel3")
    run("tar", "-C", str(m.kv), "-cf", str(tmp_path / "l.tar"), "d")
    run("tar", "-C", str(m.kv / "x"), "-xf", str(tmp_path / "l.tar"))
    assert os.readlink(m.kv / "x" / "d" / "rel3") == "target"


def test_names_too_long_and_files_too_large(procs, tmp_path, master,
                                           mounts):
    """A name over NAME_MAX (255) and a path whose key would be longer
    than the master accepts (--max_key_length, which the mount learns)
    are ENAMETOOLONG when they are made, not a file that vanishes at
    close; a size beyond the whole pool is EFBIG, and the file is as it
    was."""
    master.stop()
    master.start("--max_key_length", "300")
    m = mounts(seg="64MiB")
    (m.kv / ("n" * 255)).write_bytes(b"x")
    d = m.kv / "d" / ("a" * 200)  # key "d/aaa.../": 203 bytes
    d.mkdir(parents=True)
    for bad in (m.kv / ("n" * 256), d / ("k" * 98)):
        with pytest.raises(OSError) as e:
            bad.write_bytes(b"x")
        assert e.value.errno == errno.ENAMETOOLONG, bad
        with pytest.raises(OSError) as e:
            os.stat(bad)
        assert e.value.errno in (errno.ENAMETOOLONG, errno.ENOENT)
    (d / ("k" * 97)).write_bytes(b"fits")  # a key of 300 bytes
    for make in (lambda p: os.symlink("t", p), os.mkdir):
        with pytest.raises(OSError) as e:
            make(d / ("s" * 98))
        assert e.value.errno == errno.ENAMETOOLONG
    with pytest.raises(OSError) as e:
        os.rename(d / ("k" * 97), d / ("k" * 98))
    assert e.value.errno == errno.ENAMETOOLONG
    assert os.listdir(d) == ["k" * 97]
    assert (d / ("k" * 97)).read_bytes() == b"fits"
    f = m.kv / "big"
    f.write_bytes(b"small")
    with pytest.raises(OSError) as e:
        os.truncate(f, 1 << 40)
    assert e.value.errno == errno.EFBIG
    # A write that can never fit spoils what its handle builds: the
    # version would lack it (test_size_limits.py).
    fd = os.open(f, os.O_RDWR)
    os.pwrite(fd, b"S", 0)
    with pytest.raises(OSError) as e:
        os.pwrite(fd, b"a", 1 << 40)
    assert e.value.errno == errno.EFBIG
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EFBIG
    assert f.read_bytes() == b"small"
    assert (d / ("k" * 97)).read_bytes() == b"fits"  # nothing evicted


def test_tar_extracts_absolute_symbolic_links(procs, tmp_path, master,
                                              mounts):
    """GNU tar extracts an absolute (or '..') symbolic link through an
    empty placeholder file and replaces it only if the placeholder's inode
    number is unchanged at the end: a created file keeps its number after
    its publish (neither the close nor the change feed's event of its own
    version drop the kernel's entry)."""
    m = mounts()
    os.symlink("/etc/hostname", m.kv / "abs")
    run("tar", "-C", str(m.kv), "-cf", str(tmp_path / "l.tar"), "abs")
    (m.kv / "x").mkdir()
    run("tar", "-C", str(m.kv / "x"), "-xf", str(tmp_path / "l.tar"))
    assert os.readlink(m.kv / "x" / "abs") == "/etc/hostname"
    f = m.kv / "kept"
    with open(f, "wb") as out:
        out.write(b"x")
        ino = os.fstat(out.fileno()).st_ino
    time.sleep(0.5)  # the change feed brought the publish's event
    assert os.stat(f).st_ino == ino
    f.write_bytes(b"y")  # rewritten in place (O_TRUNC): the same file
    time.sleep(0.5)
    assert os.stat(f).st_ino == ino and f.read_bytes() == b"y"


def test_inode_number_kept_when_the_kernel_forgets(mnt):
    """A file created here keeps its inode number after the kernel drops
    its inode (drop_caches, or the change feed dropping the name's entry
    and the inode unused): pjdfstest's rename/10.t compares the numbers
    before and after renames (seen in CI: the late event of an earlier
    unlink of the same name dropped the new file's entry)."""
    f = mnt.kv / "forgotten"
    f.write_bytes(b"x")
    ino = os.stat(f).st_ino
    for step in ("drop", "rename", "drop", "rename back", "drop"):
        if step == "rename":
            os.rename(f, mnt.kv / "moved")
            f = mnt.kv / "moved"
        elif step == "rename back":
            os.rename(f, mnt.kv / "forgotten")
            f = mnt.kv / "forgotten"
        else:
            with open("/proc/sys/vm/drop_caches", "w") as drop:
                drop.write("2")  # unused dentries and inodes: FORGET
        assert os.lstat(f).st_ino == ino, step
    assert f.read_bytes() == b"x"
