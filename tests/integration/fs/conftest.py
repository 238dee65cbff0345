# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the filesystem tests: a master and a mount (as root; the
tests skip with the reason where FUSE cannot be used)."""
import pytest

from mount import Master, Mount, fuse_why


@pytest.fixture
def master(procs, tmp_path):
    why = fuse_why(daemon=False)
    if why:
        pytest.skip(why)
    return Master(procs, tmp_path)


@pytest.fixture
def mounts(procs, tmp_path, master):
    made = []

    def make(**kw):
        m = Mount(procs, tmp_path, master, **kw)
        made.append(m)
        return m
    yield make
    for m in made:
        m.cleanup()


@pytest.fixture
def mnt(mounts):
    return mounts(seg="512MiB")
