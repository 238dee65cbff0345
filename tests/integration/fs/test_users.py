# SPDX-License-Identifier: Apache-2.0
"""Another local user on a mount shared with allow_other: the kernel
checks the owner and mode bits shown (the mount turns on
default_permissions), so the other user reads what the bits allow and
cannot create, change or remove anything of the mount's owner. The other
user is a uid of the test's own, with no groups."""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

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


def test_umask_hides_files_from_other_users(shared):
    m = shared(opts="allow_other,umask=077")
    (m.kv / "secret").write_bytes(b"s")
    p = as_other(f"cat {m.kv}/secret")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr


def test_without_allow_other_nothing_is_reachable(shared):
    m = shared()
    (m.kv / "f").write_bytes(b"x")
    p = as_other(f"ls {m.kv}")
    assert p.returncode != 0 and "ermission denied" in p.stderr, p.stderr
