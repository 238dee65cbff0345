# SPDX-License-Identifier: Apache-2.0
"""File locks on the mount, kept by the daemon per name (mooncakefs/fuse/
locks.c): flock(1) and Python's fcntl.flock/lockf between processes.
One name is several kernel inodes here (a version each, a writer's own),
so locks the kernel kept on its inodes let two processes hold one lock
file at once: four flock(1) loops incrementing a counter under a lock
file they created lost increments."""
import fcntl
import os
import subprocess
import sys
import time

import pytest


def sh(cmd, cwd, timeout=120):
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, cwd=cwd,
                       timeout=timeout)
    assert p.returncode == 0, f"{cmd}: {p.stderr.decode(errors='replace')}"
    return p.stdout


def py(code, timeout=60):
    """A Python child (another process: its own lock owner)."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_flock_counter_under_a_fresh_lock_file(mnt):
    """Four processes, 25 increments each, under a lock file that does not
    exist yet (the first to lock creates it while the others open it) and
    a counter file rewritten at every step (a new version each time)."""
    count = ("for i in $(seq 25); do flock cnt.lock sh -c "
             "'n=$(cat cnt 2>/dev/null || echo 0); echo $((n+1)) > cnt'; "
             "done")
    sh(f"for j in 1 2 3 4; do ({count}) & done; wait", mnt.kv)
    assert (mnt.kv / "cnt").read_bytes() == b"100\n"


def test_flock_conflicts_waits_and_is_interrupted(mnt):
    kv = mnt.kv
    holder = subprocess.Popen(["flock", "L", "sleep", "3"], cwd=kv)
    try:
        time.sleep(0.5)
        # Non-blocking: refused while held.
        assert subprocess.run(["flock", "-n", "L", "true"],
                              cwd=kv).returncode == 1
        # Shared against exclusive: refused too.
        assert subprocess.run(["flock", "-s", "-n", "L", "true"],
                              cwd=kv).returncode == 1
        # A waiter interrupted (SIGINT) ends at once, not when granted.
        t0 = time.monotonic()
        r = subprocess.run(["timeout", "-s", "INT", "0.5", "flock", "L",
                            "true"], cwd=kv)
        assert r.returncode == 124
        assert time.monotonic() - t0 < 2
        # A waiter is granted once the holder is done.
        t0 = time.monotonic()
        sh("flock L true", kv)
        assert time.monotonic() - t0 > 1
    finally:
        holder.wait(10)
    # Shared locks share.
    sh("flock -s L sleep 1 & sleep 0.3; flock -s -n L true; wait", kv)


def test_flock_survives_a_new_version_of_its_file(mnt):
    """The lock is the name's: writing the lock file (a new version, a new
    inode) while it is held does not let another process in."""
    kv = mnt.kv
    (kv / "lk").write_bytes(b"1")
    f = open(kv / "lk", "rb")
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
        (kv / "lk").write_bytes(b"2")
        out = py(f"""
import fcntl
f = open({str(kv / 'lk')!r}, 'rb')
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print('taken')
except BlockingIOError:
    print('held')
""")
        assert out == "held"
    finally:
        f.close()  # releases it
    out = py(f"""
import fcntl
f = open({str(kv / 'lk')!r}, 'rb')
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print('taken')
""")
    assert out == "taken"


def test_flock_held_by_a_writer(mnt):
    """A process holding the lock through a descriptor open for writing
    (whose inode lookups no longer return) and another opening the name
    to read it (on an inode of its own): one lock all the same."""
    kv = mnt.kv
    (kv / "wl").write_bytes(b"1")
    fd = os.open(kv / "wl", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out = py(f"""
import fcntl, os
fd = os.open({str(kv / 'wl')!r}, os.O_RDONLY)
for how in (fcntl.LOCK_EX, fcntl.LOCK_SH):
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        print('taken')
    except BlockingIOError:
        print('held')
""")
        assert out.split() == ["held", "held"], out
    finally:
        os.close(fd)


def test_posix_locks(mnt):
    """fcntl record locks (lockf): byte ranges per process, conflicts,
    F_GETLK naming the holder, released when the holder closes any
    descriptor of the file."""
    kv = mnt.kv
    path = str(kv / "rec")
    (kv / "rec").write_bytes(b"x" * 100)
    f = open(path, "r+b")
    try:
        fcntl.lockf(f, fcntl.LOCK_EX, 10, 0)  # bytes 0-9
        out = py(f"""
import fcntl, struct
f = open({path!r}, 'r+b')
res = []
for start in (0, 5, 10, 50):
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, start)
        res.append('ok')
        fcntl.lockf(f, fcntl.LOCK_UN, 10, start)
    except OSError:
        res.append('busy')
lk = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)
t, w, s, l, pid = struct.unpack('hhqqi', fcntl.fcntl(f, fcntl.F_GETLK, lk))
print(' '.join(res), t == fcntl.F_WRLCK, s, l, pid)
""")
        assert out == f"busy busy ok ok True 0 10 {os.getpid()}", out
        # Any close by the holder ends its locks.
        os.close(os.open(path, os.O_RDONLY))
        out = py(f"""
import fcntl
f = open({path!r}, 'r+b')
fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
print('taken')
""")
        assert out == "taken"
    finally:
        f.close()


def test_locks_follow_a_rename(mnt):
    """A lock held on a file that is then renamed (alone, or with its
    directory) is the new name's: another process cannot take it there,
    and can once it is released."""
    kv = mnt.kv
    (kv / "d").mkdir()
    (kv / "d" / "a").write_bytes(b"1")
    f = open(kv / "d" / "a", "rb")
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
        os.rename(kv / "d" / "a", kv / "d" / "b")
        os.rename(kv / "d", kv / "e")
        probe = f"""
import fcntl
f = open({str(kv / 'e' / 'b')!r}, 'rb')
try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print('taken')
except BlockingIOError:
    print('held')
"""
        assert py(probe) == "held"
    finally:
        f.close()
    assert py(probe) == "taken"


def test_a_holder_killed_lets_the_lock_go(mnt):
    """kill -9 of a process holding a flock or a POSIX lock (its
    descriptors closed by the kernel: release and flush) leaves the lock
    free; a waiter killed -9 leaves nothing behind either."""
    kv = mnt.kv
    for lk in ("fcntl.flock(f, fcntl.LOCK_EX)",
               "fcntl.lockf(f, fcntl.LOCK_EX)"):
        holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, sys, time
f = open({str(kv / 'k')!r}, 'a+')
{lk}
print('locked', flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        waiter = subprocess.Popen([sys.executable, "-c", f"""
import fcntl
f = open({str(kv / 'k')!r}, 'a+')
{lk}
"""])
        time.sleep(0.3)
        waiter.kill()
        waiter.wait(10)
        holder.kill()
        holder.wait(10)
        take = lk.replace("LOCK_EX)", "LOCK_EX | fcntl.LOCK_NB)")
        assert py(f"""
import fcntl
f = open({str(kv / 'k')!r}, 'a+')
{take}
print('taken')
""") == "taken"


def test_flock_protects_appends_to_the_locked_file(mnt):
    """Four shell loops append a line each to the file they lock, 50 times
    (open, flock, append, close): every line lands, whole, once. A writer
    opened before the lock was granted used to append to its copy of the
    version it opened and publish over the others' lines (59 of 200
    left)."""
    # An open of a name four writers keep publishing may still fail
    # ESTALE (docs/design.md "Errors"): the loop opens again then, as
    # the line was not written (a failed echo would write it twice).
    sh("rm -f slog; for t in A B C D; do (for i in $(seq 50); do "
       "until ( flock 9; echo \"$t $i\" >&9 ) 9>>slog 2>/dev/null; do "
       "sleep 0.01; done; done) & done; wait", mnt.kv, timeout=300)
    lines = (mnt.kv / "slog").read_text().splitlines()
    want = [f"{t} {i}" for t in "ABCD" for i in range(1, 51)]
    assert [x for x in want if x not in lines] == []
    assert sorted(lines) == sorted(want)
    for t in "ABCD":  # each loop's lines in its order
        mine = [int(x.split()[1]) for x in lines if x.startswith(t)]
        assert mine == list(range(1, 51))


@pytest.mark.parametrize("unlock", [False, True])
def test_lockf_protects_a_read_modify_write_of_the_locked_file(mnt, unlock):
    """Three processes, 100 increments each of a counter kept in the file
    they lock (open O_RDWR, lockf, read, write, close): 300. The lock was
    granted after the open had copied the version of that moment. With
    unlock, each unlocks before its close: the unlock publishes. (Under
    such churn of one name an open may answer ESTALE, docs/design.md
    "Errors": retried.)"""
    path = str(mnt.kv / "ctr")
    with open(path, "w") as f:
        f.write("0")
    code = f"""
import errno, fcntl, os
def opened():
    for _ in range(20):
        try:
            return os.open({path!r}, os.O_RDWR)
        except OSError as e:
            if e.errno != errno.ESTALE:
                raise
    return os.open({path!r}, os.O_RDWR)
for _ in range(100):
    fd = opened()
    fcntl.lockf(fd, fcntl.LOCK_EX)
    n = int(os.pread(fd, 64, 0) or b"0")
    os.pwrite(fd, str(n + 1).encode(), 0)
    if {unlock}:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    os.close(fd)
"""
    ps = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(3)]
    for p in ps:
        assert p.wait(300) == 0
    with open(path) as f:
        assert f.read() == "300"
