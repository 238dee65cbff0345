# SPDX-License-Identifier: Apache-2.0
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from netns import can_make_namespaces  # noqa: E402
from bed import Bed  # noqa: E402


@pytest.fixture
def bed(procs, tmp_path):
    why = can_make_namespaces()
    if why:
        pytest.skip(why)
    with Bed(procs, tmp_path) as b:
        yield b
