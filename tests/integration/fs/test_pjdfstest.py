# SPDX-License-Identifier: Apache-2.0
"""pjdfstest, the POSIX suite FUSE filesystems are measured by, over the
mount, held to a committed list of expected failures.

The suite's unchanged source (shared/third_party/pjdfstest beside the
checkout or any directory above it, as ../shared; or MC_PJDFSTEST_SRC)
is copied to a temporary directory and built there (autoreconf,
configure, make: scripts/setup.sh installs autoconf and automake). Each test file of DIRS runs from a fresh directory in kv/ of a
mount with allow_other (the suite switches to other uids as root). Every
case is compared with pjdfstest.expected (next to this file): the test
fails on a failure that is not listed and on a listed case that passes, so
the list stays true. MC_PJDFSTEST_WRITE=1 rewrites the list from this run,
keeping the reasons of cases already listed (refined by hand) and giving
new ones a reason from what the suite tried; MC_PJDFSTEST_WRITE=fresh
recomputes every reason. Review the diff.
MC_PJDFSTEST_DIRS=open,chmod runs some directories only (the list is
then checked for those only)."""
import os
import re
import shutil
import subprocess
from collections import defaultdict

import pytest

import mctest

DIRS = ["open", "rename", "unlink", "mkdir", "rmdir", "chmod", "chown",
        "utimensat", "truncate", "ftruncate", "symlink"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "pjdfstest.expected")
CASE = re.compile(r"^(not )?ok (\d+)(.*)$")
TRIED = re.compile(r"tried '(\S+)")


def suite_source():
    env = os.environ.get("MC_PJDFSTEST_SRC")
    if env:
        return env
    base = os.path.abspath(mctest.SOURCE)  # shared/ beside any ancestor
    while True:
        p = os.path.join(base, "shared", "third_party", "pjdfstest")
        if os.path.isfile(os.path.join(p, "pjdfstest.c")):
            return p
        if base == os.path.dirname(base):
            return None
        base = os.path.dirname(base)


def build_suite(src, dst):
    shutil.copytree(src, dst)
    for cmd in (["autoreconf", "-ifs"], ["./configure"],
                ["make", "pjdfstest"]):
        p = subprocess.run(cmd, cwd=dst, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, f"{cmd}: {p.stdout[-2000:]}{p.stderr}"
    return dst


def parse_expected(path):
    """{(file, case): reason} from lines 'dir/NN.t CASES REASON', where
    CASES is a comma-separated list of numbers and ranges a-b."""
    out = {}
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        assert len(parts) == 3, f"{path}:{n}: FILE CASES REASON"
        name, cases, reason = parts
        for piece in cases.split(","):
            a, _, b = piece.partition("-")
            for c in range(int(a), int(b or a) + 1):
                out[(name, c)] = reason
    return out


KINDS = {"mkfifo": "FIFOs refused", "mknod": "device nodes refused",
         "bind": "sockets refused", "connect": "sockets refused",
         "link": "hard links refused"}


def tried(detail):
    """The words of the command a failing case tried, and whether it ran
    as another user."""
    m = TRIED.search(detail)
    words = detail[m.start() + 7:].split("'")[0].split() if m else []
    other_user = False
    while words and words[0] in ("-u", "-g", "-U", "-G"):
        other_user = True
        words = words[2:]
    if words and words[0] == "--":
        words = words[1:]
    return words, other_user


def reason_of(detail, refused):
    """A failure's reason, from what the suite tried (a triage aid: the
    operation that failed, not a diagnosis). refused: {path: reason} of
    the names whose creation this file's script was refused (a FIFO, a
    socket, a device node, a hard link): a later step that finds such a
    name missing (ENOENT) follows from that refusal."""
    words, other_user = tried(detail)
    op = words[0] if words else "?"
    if op in KINDS:
        if len(words) > 1:
            refused[words[1 if op != "link" else 2]] = KINDS[op]
        return KINDS[op]
    if op == "?":
        return "the case did not run (its script stopped)" \
            if "did not run" in detail else "a check of the suite failed"
    if "got ENOENT" in detail:
        for w in words[1:]:
            if w in refused:
                return f"{refused[w]} (a later step on the name)"
    if other_user:
        return f"{op} as another user: differs from POSIX"
    return f"{op}: differs from POSIX"


def write_expected(path, failures, dirs):
    """failures: {(file, case): reason}; keeps entries of other dirs."""
    keep = {k: v for k, v in parse_expected(path).items()
            if k[0].split("/")[0] not in dirs} if os.path.exists(path) \
        else {}
    keep.update(failures)
    by_file = defaultdict(list)
    for (name, case), reason in keep.items():
        by_file[name].append((case, reason))
    lines = []
    for name in sorted(by_file, key=lambda s: (s.split("/")[0],
                                               s.split("/")[1])):
        run = None
        for case, reason in sorted(by_file[name]):
            if run and run[1] == case - 1 and run[2] == reason:
                run[1] = case
                continue
            if run:
                lines.append(run)
            run = [case, case, reason, name]
        lines.append(run)
    with open(path, "w") as f:
        f.write("# pjdfstest cases that fail on the mount, and why\n"
                "# (tests/integration/fs/test_pjdfstest.py checks both "
                "ways).\n# FILE CASES REASON\n")
        for a, b, reason, name in lines:
            cases = f"{a}-{b}" if b > a else f"{a}"
            f.write(f"{name} {cases} {reason}\n")


def run_file(suite, test, cwd):
    """{case: (ok, detail)} and the plan's count of one .t file."""
    p = subprocess.run(["/bin/sh", test], cwd=cwd, capture_output=True,
                       text=True, timeout=600 * mctest.SCALE)
    cases, plan = {}, 0
    for line in p.stdout.splitlines():
        if line.startswith("1.."):
            plan = int(line[3:])
            continue
        m = CASE.match(line)
        if m:
            # A TODO case is the suite's own expected failure (TAP: it
            # does not fail the run), e.g. what Linux does on purpose.
            todo = "# TODO" in m.group(3)
            cases[int(m.group(2))] = (not m.group(1) or todo, m.group(3))
    for c in range(1, plan + 1):  # a script that died: the rest failed
        cases.setdefault(c, (False, " - did not run"))
    return cases, plan


def test_pjdfstest(mounts, tmp_path):
    src = suite_source()
    if not src:
        pytest.skip("pjdfstest source not found (../shared/third_party/"
                    "pjdfstest or MC_PJDFSTEST_SRC)")
    # The suite's scripts name files with `openssl md5` (all one name
    # without it); the rest they call is in every Debian system.
    for tool in ("openssl", "awk", "df", "dd"):
        assert shutil.which(tool), f"{tool} missing (scripts/setup.sh)"
    suite = build_suite(src, str(tmp_path / "pjdfstest"))
    dirs = os.environ.get("MC_PJDFSTEST_DIRS", ",".join(DIRS)).split(",")
    m = mounts(seg="256MiB", opts="allow_other")
    write = os.environ.get("MC_PJDFSTEST_WRITE", "")
    expected = parse_expected(EXPECTED) if os.path.exists(EXPECTED) else {}
    failures, unexpected, fixed = {}, [], []
    counts = {d: [0, 0] for d in dirs}  # passed, total
    for d in dirs:
        for t in sorted(os.listdir(os.path.join(suite, "tests", d))):
            if not t.endswith(".t"):
                continue
            name = f"{d}/{t}"
            work = m.kv / "pjd" / d / t
            work.mkdir(parents=True)
            cases, _ = run_file(suite, os.path.join(suite, "tests", d, t),
                                str(work))
            refused = {}
            for c, (ok, detail) in sorted(cases.items()):
                counts[d][0] += ok
                counts[d][1] += 1
                if not ok:
                    why = reason_of(detail, refused)
                    failures[(name, c)] = why if write == "fresh" else \
                        expected.get((name, c)) or why
                    if (name, c) not in expected:
                        unexpected.append(f"{name} {c}{detail}")
                elif (name, c) in expected:
                    fixed.append(f"{name} {c} ({expected[(name, c)]})")
    for d, (ok, n) in counts.items():
        print(f"pjdfstest {d}: {ok} of {n} pass")
    print(f"pjdfstest: {sum(c[0] for c in counts.values())} of "
          f"{sum(c[1] for c in counts.values())} cases pass "
          f"({len(failures)} fail, {len(unexpected)} not listed, "
          f"{len(fixed)} listed but pass)")
    if write:
        write_expected(EXPECTED, failures, dirs)
        return
    assert not unexpected and not fixed, (
        f"{len(unexpected)} failures not in pjdfstest.expected:\n"
        + "\n".join(unexpected[:50])
        + f"\n{len(fixed)} listed cases now pass (remove them):\n"
        + "\n".join(fixed[:50]) + f"\n{m.log()[-3000:]}")
