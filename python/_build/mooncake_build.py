# SPDX-License-Identifier: Apache-2.0
"""A PEP 517 build backend with no dependencies, so `pip install ./python`
works offline: pip's isolated build environment needs nothing from a
package index. It builds a pure-Python wheel of the `mooncake` package
(plus a libmooncake.so copied next to it, if any) and an sdist."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "mooncake_store_ctypes"
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
TAG = "py3-none-any"


def _metadata():
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return ("Metadata-Version: 2.1\n"
            f"Name: {NAME.replace('_', '-')}\n"
            f"Version: {VERSION}\n"
            "Summary: mooncake.store (MooncakeDistributedStore) over "
            "libmooncake.so via ctypes\n"
            "License: Apache-2.0\n"
            "Requires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _package_files():
    pkg = os.path.join(ROOT, "mooncake")
    for dirpath, _, files in os.walk(pkg):
        if "__pycache__" in dirpath:
            continue
        for f in sorted(files):
            if f.endswith((".py", ".so")):
                full = os.path.join(dirpath, f)
                yield full, os.path.relpath(full, ROOT)


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return "sha256=" + h.decode().rstrip("=")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory,
                                     config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return DIST_INFO


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    name = f"{NAME}-{VERSION}-{TAG}.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        def add(arc, data):
            z.writestr(arc, data)
            record.append(f"{arc},{_digest(data)},{len(data)}")
        for full, arc in _package_files():
            with open(full, "rb") as f:
                add(arc, f.read())
        add(f"{DIST_INFO}/METADATA", _metadata().encode())
        add(f"{DIST_INFO}/WHEEL",
            ("Wheel-Version: 1.0\nGenerator: mooncake_build\n"
             f"Root-Is-Purelib: true\nTag: {TAG}\n").encode())
        add(f"{DIST_INFO}/top_level.txt", b"mooncake\n")
        record.append(f"{DIST_INFO}/RECORD,,")
        z.writestr(f"{DIST_INFO}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md",
                    os.path.join("_build", "mooncake_build.py")):
            full = os.path.join(ROOT, rel)
            if os.path.exists(full):
                t.add(full, arcname=f"{base}/{rel}")
        for full, arc in _package_files():
            t.add(full, arcname=f"{base}/{arc}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
