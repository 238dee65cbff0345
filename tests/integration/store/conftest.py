# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the store tests: a master and pool members."""
import os

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


@pytest.fixture(autouse=True, scope="module")
def no_spinner_table_left(request):
    """A module that runs mooncake programs as another user (its OTHER
    uid) leaves that user's table of spinner slots behind
    (/dev/shm/mc-spinners.<uid>, mc_busy_poll.h): it goes with the
    module."""
    yield
    uid = getattr(request.module, "OTHER", None)
    if uid is not None:
        try:
            os.unlink(f"/dev/shm/mc-spinners.{uid}")
        except FileNotFoundError:
            pass
