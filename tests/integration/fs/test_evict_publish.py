# SPDX-License-Identifier: Apache-2.0
"""A file that fills the pool survives its close, at the master's default
high watermark (90%): the watermark makes room by evicting older data,
never the file just written (nor the empty version a shell's redirection
published before it, which frees nothing), so a shell redirection, dd, cp
and Python that write a whole segment's worth find the file there after
their close succeeds. Until 2026-12-07 such a write sometimes failed at
close with ENOENT (the committed temporary object was evicted before the
rename that publishes it) or the file vanished right after (the master's
log: "evicted 1 objects (0 bytes)"). Writers at once whose files fit the
pool together all publish (the committed temporary object has a publish
lease until its rename); those that do not fit get ENOSPC."""
import os
import subprocess
import threading

import pytest

from mount import random_bytes, time

MiB = 1 << 20
SEG = 16 * MiB  # the mount's segment, the pool's only one
ROUNDS = 10


def run(*argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def settle():
    """Long enough for the master's eviction (a run every 10 ms) to have
    acted many times over."""
    time.sleep(0.3)


def tools(src, f):
    return {
        "redirect": ("bash", "-c", f"head -c {SEG} {src} > {f}"),
        "dd": ("dd", f"if={src}", f"of={f}", "bs=1M", "status=none"),
        "cp": ("cp", str(src), str(f)),
        "python": ("python3", "-c", f"open('{f}', 'wb').write("
                   f"open('{src}', 'rb').read())"),
    }


@pytest.mark.parametrize("tool", ["redirect", "dd", "cp", "python"])
def test_a_file_of_the_whole_pool_survives_its_close(master, mounts,
                                                     tmp_path, tool):
    m = mounts(seg="16MiB")
    src = tmp_path / "src"
    data = random_bytes(SEG, 1)
    src.write_bytes(data)
    argv = tools(src, m.kv / "f")[tool]
    # Each round replaces the last one's file (its put evicts it for
    # room: a version just read could not be, under its read lease, so
    # the content is read at the end only).
    for i in range(ROUNDS):
        rc, err = run(*argv)
        assert rc == 0, (i, err)
        settle()
        assert os.stat(m.kv / "f").st_size == SEG, i
    assert (m.kv / "f").read_bytes() == data
    # Only puts evicted (the previous version), never an empty object.
    assert "(0 bytes)" not in master.log_path.read_text()


@pytest.mark.parametrize("writers", [2, 4])
def test_writers_that_fit_the_pool_all_publish(master, mounts, writers):
    """Writers that rewrite their own file over and over, at once, their
    files filling the pool together (2 x 8 MiB, 4 x 4 MiB in 16 MiB):
    each put evicts older data for room (the files' replaced versions, or
    the watermark's), never a file between its commit and the rename
    that publishes it, so no close fails. Until 2026-12-07 a few closes
    in these 300 publishes per writer failed with ENOSPC: another
    writer's put, or the watermark, had evicted the committed temporary
    object in the instant before its rename."""
    m = mounts(seg="16MiB")
    data = random_bytes(SEG // writers, 3)
    errors = []

    def writer(i):
        for _ in range(300):
            try:
                with open(m.kv / f"f{i}", "wb") as f:
                    f.write(data)
            except OSError as e:
                errors.append(e.strerror)

    ts = [threading.Thread(target=writer, args=(i,))
          for i in range(writers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, (len(errors), set(errors))
    # What is there is whole (the watermark keeps the newest file only:
    # the pool is full, above it).
    for i in range(writers):
        try:
            got = (m.kv / f"f{i}").read_bytes()
        except FileNotFoundError:
            continue
        assert got == data, i


def test_writers_in_a_pool_too_small_for_all_get_enospc(master, mounts,
                                                        tmp_path):
    """Four dd's of 6 MiB at once into 16 MiB: each put evicts the
    others' older files for room, and a close whose file finds no room
    fails with ENOSPC at its PutStart (the others' committed files wait
    for their renames: the publish lease). Until 2026-12-07 the put
    evicted such a file instead, whose close then failed with ENOENT, in
    every run of this test (later ENOSPC, at the rename)."""
    m = mounts(seg="16MiB")
    src = tmp_path / "src"
    src.write_bytes(random_bytes(6 * MiB, 2))
    errors = {}
    for r in range(40):
        ps = [subprocess.Popen(["dd", f"if={src}", f"of={m.kv}/f{i}",
                                "bs=1M", "status=none"],
                               stderr=subprocess.PIPE, text=True)
              for i in range(4)]
        failed = set()
        for i, p in enumerate(ps):
            _, err = p.communicate(timeout=120)
            if p.returncode:
                why = err.strip().rsplit(": ", 1)[-1]
                errors[why] = errors.get(why, 0) + 1
                failed.add(i)
        # The first file committed is published: its put found room
        # (others' older files), and no later put takes it before its
        # rename.
        assert len(failed) < 4, r
    assert set(errors) <= {"No space left on device"}, errors
    # What was published is whole (or evicted since by another's put).
    # A dd that failed leaves what a full disk leaves: the file its
    # open created or truncated, empty (dd's O_CREAT|O_TRUNC, then the
    # flush of its dup2'd descriptor's close publishes that), never a
    # part of its bytes. (CI of 1bf9e23 failed here: f2 empty, 1 run in
    # 3.)
    for i in range(4):
        try:
            got = (m.kv / f"f{i}").read_bytes()
        except FileNotFoundError:
            continue
        if i in failed and not got:
            continue
        assert got == src.read_bytes(), (i, len(got), i in failed)
