# SPDX-License-Identifier: Apache-2.0
"""The store client with CUDA device memory (issue 18), on CPUs through
the STAND-IN driver (tests/tools/fake_cuda.c, loaded by libte because
MC_CUDA_LIBRARY names it): a registered device buffer is put_from and
get_into like host memory, byte for byte, through shared memory and
through TCP; values written from host memory read into device memory
and back; put and get (the copying calls) with unregistered device
memory. It proves libmooncake's and libte's logic, not a GPU."""
import pytest

from mctest import FAKE_CUDA, binary
from pool import Master, Member, Shell, eventually

SIZES = [1, 4097, (4 << 20) + 123, (9 << 20) + 77]


@pytest.mark.parametrize("tcp", [False, True], ids=["shm", "tcp"])
def test_device_buffers_put_and_get(procs, tmp_path, tcp):
    env = {"MC_CUDA_LIBRARY": binary(*FAKE_CUDA)}
    if tcp:
        env["MC_FORCE_TCP"] = "1"
    m = Master(procs, tmp_path)
    Member(procs, tmp_path, m, size="64MB")
    eventually(lambda: len(m.segments()) == 1, what="1 segment")
    sh = Shell(procs, tmp_path, m, env=env)
    for i, size in enumerate(SIZES):
        sh.ok(f"gput g/{i} {size} {i + 1}")
        sh.ok(f"gcheck g/{i} {size} {i + 1}")
        sh.ok(f"check g/{i} {size} {i + 1}")  # host memory reads it too
    sh.ok(f"sput h/0 {SIZES[-1]} 9")
    sh.ok(f"gcheck h/0 {SIZES[-1]} 9")  # host-written, read into device
    # The copying calls (put, get) with unregistered device memory: the
    # library's staging copies reach it through the driver.
    sh.ok(f"gput s/0 {SIZES[2]} 21 staged")
    sh.ok(f"check s/0 {SIZES[2]} 21")
    sh.ok(f"gcheck s/0 {SIZES[2]} 21 staged")
    # A wrong seed is a mismatch: the comparison can fail.
    assert sh.cmd(f"gcheck h/0 {SIZES[-1]} 10").startswith("mismatch")
    sh.close()
