# SPDX-License-Identifier: Apache-2.0
"""`pip install ./python` works offline (the build backend is in-tree and
needs no package index) and the installed package finds the library
through MOONCAKE_LIB."""
import glob
import os
import subprocess

import pytest

SOURCE = os.environ.get("MC_SOURCE_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..")
BUILD = os.environ.get("MC_BUILD_DIR") or os.path.join(SOURCE, "build")


def test_pip_install_offline(tmp_path):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-m", "venv", "--help"],
                      capture_output=True).returncode:
        pytest.skip("python3-venv is not installed")
    venv = tmp_path / "venv"
    p = subprocess.run([py, "-m", "venv", str(venv)], capture_output=True,
                       text=True)
    if p.returncode or not (venv / "bin" / "pip").exists():
        pytest.skip(f"cannot make a venv with pip: {p.stderr.strip()}")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run([str(venv / "bin" / "pip"), "install",
                        os.path.join(SOURCE, "python")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    lib = os.path.join(BUILD, "mooncakefs", "lib", "libmooncake.so")
    if "asan" in BUILD or "tsan" in BUILD:
        pytest.skip("a sanitizer build's library cannot load into python3")
    assert glob.glob(lib), lib
    p = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import mooncake.store as s; "
                        "print(s.MooncakeDistributedStore().health_check())"],
                       capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, MOONCAKE_LIB=lib))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"  # not set up yet
