# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the store tests: a master and pool members."""
import pytest

from pool import Master, Member, cleanup_segments


@pytest.fixture
def master(procs, tmp_path):
    return Master(procs, tmp_path)


@pytest.fixture
def members(procs, tmp_path, master):
    """Three pool members of 32 MB each."""
    ms = [Member(procs, tmp_path, master) for _ in range(3)]
    yield ms
    procs.cleanup()
    cleanup_segments([m.port for m in ms])
