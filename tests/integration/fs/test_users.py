# SPDX-License-Identifier: Apache-2.0
"""Another local user on a mount shared with allow_other: the kernel
checks the owner and mode bits shown (the mount turns on
default_permissions), so the other user reads what the bits allow and
cannot create, change or remove anything of the mount's owner. The other
user is a uid of the test's own, with no groups."""
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest

from mount import Shell

OTHER = 54321


def as_other(cmd, cwd=None):
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, capture_output=True,
                          text=True, timeout=60, user=OTHER, group=OTHER,
                          extra_groups=[])


@pytest.fixture
def shared(mounts):
    """Mounts whose mount point other users can reach (pytest's own
    temporary directories are 0700)."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="mcfs-users-"))
    os.chmod(base, 0o755)
    made = []

    def make(**kw):
        made.append(mounts(path=base / f"mnt{len(made)}", **kw))
        return made[-1]
    yield make
    for m in made:  # unmounted before the directory goes
        m.cleanup()
    shutil.rmtree(base, ignore_errors=True)


def test_other_user_reads_and_changes_nothing(shared):
    m = shared(opts="allow_other")
    kv = m.kv
    (kv / "d").mkdir()
    (kv / "d" / "f").write_bytes(b"root's\n")
    p = as_other(f"cat {kv}/d/f")
    assert p.returncode == 0 and p.stdout == "root's\n", p.stderr
    for cmd in (f"echo x > {kv}/d/f", f"echo x >> {kv}/d/f",
                f"truncate -s 0 {kv}/d/f", f"rm -f {kv}/d/f",
                f"mv {kv}/d/f {kv}/d/g", f"echo x > {kv}/d/new",
                f"mkdir {kv}/d/sub", f"rmdir {kv}/d",
                f"echo x > {kv}/new"):
        p = as_other(cmd)
        assert p.returncode != 0, cmd
        assert "ermission denied" in p.stderr, (cmd, p.stderr)
    assert (kv / "d" / "f").read_bytes() == b"root's\n"
    assert sorted(os.listdir(kv / "d")) == ["f"]
    assert sorted(os.listdir(kv)) == ["d"]


def test_stored_modes_and_owners_hold(shared):
    """The bits are each file's own, stored by the master: a 0600 file is
    unreadable to another user, a 0777 directory takes their files (owned
    by them), and they cannot chmod or chown what is not theirs."""
    m = shared(opts="allow_other")
    kv = m.kv
    (kv / "secret").write_bytes(b"s")
    os.chmod(kv / "secret", 0o600)
    p = as_other(f"cat {kv}/secret")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr
    (kv / "pub").mkdir()
    os.chmod(kv / "pub", 0o777)
    p = as_other(f"echo mine > {kv}/pub/theirs && mkdir {kv}/pub/sub && "
                 f"chmod 600 {kv}/pub/theirs")
    assert p.returncode == 0, p.stderr
    st = os.stat(kv / "pub" / "theirs")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == \
        (OTHER, OTHER, 0o600)
    assert os.stat(kv / "pub" / "sub").st_uid == OTHER
    for cmd in (f"chmod 666 {kv}/secret", f"chown {OTHER} {kv}/secret",
                f"touch -d 2001-01-01 {kv}/secret", f"chmod 700 {kv}/pub"):
        p = as_other(cmd)
        assert p.returncode != 0, cmd
    assert stat.S_IMODE(os.stat(kv / "secret").st_mode) == 0o600
    # A second mount of the pool holds them to the same bits.
    m2 = shared(opts="allow_other")
    p = as_other(f"cat {m2.kv}/secret")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr
    p = as_other(f"cat {m2.kv}/pub/theirs")
    assert p.returncode == 0 and p.stdout == "mine\n", p.stderr


def test_a_write_by_another_user_ends_set_id_bits(shared):
    """As on Linux: a write by a process without CAP_FSETID clears the
    set-user-ID bit and the set-group-ID bit (where group execution is
    on), stored, so a second mount shows it too; a write by root does
    not."""
    m = shared(opts="allow_other")
    kv = m.kv
    for bits, left in ((0o4777, 0o777), (0o2777, 0o777), (0o6777, 0o777),
                       (0o2767, 0o2767)):
        f = kv / f"f{bits:o}"
        f.write_bytes(b"")
        os.chmod(f, bits)
        p = as_other(f"echo x >> {f}")
        assert p.returncode == 0, p.stderr
        assert stat.S_IMODE(os.stat(f).st_mode) == left, oct(bits)
        assert f.read_bytes() == b"x\n"
    f = kv / "rootwrites"
    f.write_bytes(b"")
    os.chmod(f, 0o4755)
    with open(f, "ab") as out:
        out.write(b"y")
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o4755
    m2 = shared(opts="allow_other")
    assert stat.S_IMODE(os.stat(m2.kv / "f4777").st_mode) == 0o777


def test_umask_hides_api_objects_from_other_users(shared, procs, tmp_path,
                                                  master):
    m = shared(opts="allow_other,umask=077")
    sh = Shell(procs, tmp_path, master)
    sh.ok("put secret 10 1")
    p = as_other(f"cat {m.kv}/secret")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr


def test_without_allow_other_nothing_is_reachable(shared):
    m = shared()
    (m.kv / "f").write_bytes(b"x")
    p = as_other(f"ls {m.kv}")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr
