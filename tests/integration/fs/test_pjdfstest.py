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
then checked for those only); MC_PJDFSTEST_FILES=rename/10.t some files
only (to chase one failure; not with MC_PJDFSTEST_WRITE).
MC_PJDFSTEST_JOBS (default 3) test files run at once, each in its own
directory."""
import os
import re
import shutil
import subprocess
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest

import mctest

DIRS = ["open", "rename", "unlink", "mkdir", "rmdir", "chmod", "chown",
        "utimensat", "truncate", "ftruncate", "symlink"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "pjdfstest.expected")
CASE = re.compile(r"^(not )?ok (\d+)(.*)$")
JOBS = int(os.environ.get("MC_PJDFSTEST_JOBS", "3"))  # files at once


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


# The suite calls its pjdfstest program for every step; this wrapper (put
# in its place) appends each call and its answer to $PJD_TRACE, into which
# the test file's own output goes too, so that a failure can be traced to
# the steps before it (a name whose creation was refused, a symlink to it).
WRAPPER = """#!/bin/sh
out=$("$0.bin" "$@" 2>/dev/null)
rc=$?
[ -n "$out" ] && printf '%s\\n' "$out"
nl='
'
printf 'CALL %s => %s\\n' "$*" "${out##*$nl}" >>"$PJD_TRACE"
exit $rc
"""


def build_suite(src, dst):
    shutil.copytree(src, dst)
    for cmd in (["autoreconf", "-ifs"], ["./configure"],
                ["make", "pjdfstest"]):
        p = subprocess.run(cmd, cwd=dst, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, f"{cmd}: {p.stdout[-2000:]}{p.stderr}"
    prog = os.path.join(dst, "pjdfstest")
    os.rename(prog, prog + ".bin")
    with open(prog, "w") as f:
        f.write(WRAPPER)
    os.chmod(prog, 0o755)
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


# Operations that make a name, and which of their words is that name.
MAKES = {"create": 1, "open": 1, "mkdir": 1, "symlink": 2, "mkfifo": 1,
         "mknod": 1, "bind": 1, "link": 2, "rename": 2}


def words_of(args):
    """A call's words without the options that switch users, and
    whether it ran as another user."""
    words, other_user = args.split(), False
    while words and words[0] in ("-u", "-g", "-U", "-G"):
        other_user = True
        words = words[2:]
    if words and words[0] == "--":
        words = words[1:]
    return words, other_user


def names_in(words):
    """Every path a call's words name, and each path's parents."""
    out = set()
    for w in words[1:]:
        parts = w.split("/")
        out.update("/".join(parts[:i + 1]) for i in range(len(parts)))
    return out


class Triage:
    """Gives each failing case of one test file a reason from the calls
    the suite made (a triage aid: the operation that failed, not a
    diagnosis). A name whose creation the mount refused (a FIFO, a socket,
    a device node, a hard link), and a symlink that points to one, is in
    another state afterwards than the suite expects (missing, or made by a
    later step that expected to find it): a failing case whose steps name
    it follows from that refusal. A case that passes makes its names
    ordinary again."""

    def __init__(self):
        self.refused = {}  # path: reason
        self.calls = []  # (words, other_user, answer) since the last case

    def call(self, args, answer):
        words, other_user = words_of(args)
        self.calls.append((words, other_user, answer))
        op = words[0] if words else ""
        if op in KINDS and answer == "EPERM" and len(words) > MAKES[op]:
            self.refused[words[MAKES[op]]] = KINDS[op]
            if op == "link":  # the file's link count differs too
                self.refused[words[1]] = KINDS[op]
        if op == "symlink" and answer == "0" and len(words) > 2:
            # The target, as the link's directory resolves it.
            target = os.path.join(os.path.dirname(words[2]), words[1])
            gone = names_in(["", os.path.normpath(target)]) & \
                self.refused.keys()
            if gone:
                self.refused[words[2]] = self.refused[gone.pop()]

    def made(self, calls):
        """Names the calls of a passing case made are ordinary again."""
        for words, _, answer in calls:
            op = words[0] if words else ""
            made = answer == "0" or op == "open" and answer.isdigit()
            if op in MAKES and len(words) > MAKES[op] and made and \
                    op != "symlink":
                name = words[MAKES[op]]
                if op == "rename" and words[1] in self.refused:
                    self.refused[name] = self.refused[words[1]]  # moved
                else:
                    self.refused.pop(name, None)

    def case(self, ok, detail):
        """The reason of a case that failed (None for one that passed)."""
        calls, self.calls = self.calls, []
        if ok:
            self.made(calls)
            return None
        if "did not run" in detail:
            return "the case did not run (its script stopped)"
        for words, _, answer in calls:
            if words and words[0] in KINDS:
                return KINDS[words[0]]
        for words, _, _ in calls:
            # The name, a directory above it, or a directory that should
            # have held it (empty instead, as rmdir and rename find).
            gone = names_in(words) & self.refused.keys() or \
                {r for r in self.refused for w in words[1:]
                 if r.startswith(w.rstrip("/") + "/")}
            if gone:
                why = self.refused[gone.pop()]
                # What these steps did to other names (a rename from a
                # missing name leaves its target as it was) is not what
                # the suite expects either.
                for w, _, _ in calls:
                    for i in (1, 2) if w and w[0] in MAKES else (1,):
                        if len(w) > i:
                            self.refused.setdefault(w[i], why)
                return f"{why} (a later step on the name)"
        self.made(calls)
        if not calls or "tried" not in detail:
            return "a check of the suite failed"
        words, other_user, _ = calls[-1]
        op = words[0] if words else "?"
        return f"{op} as another user: differs from POSIX" if other_user \
            else f"{op}: differs from POSIX"


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


def run_file(test, cwd, trace):
    """{case: (ok, reason)} and the plan's count of one .t file; reason
    is None for a case that passed."""
    open(trace, "w").close()
    with open(trace, "a") as out:  # O_APPEND, as the wrapper's writes
        subprocess.run(["/bin/sh", test], cwd=cwd, stdout=out,
                       stderr=subprocess.DEVNULL, text=True,
                       env=dict(os.environ, PJD_TRACE=trace),
                       timeout=600 * mctest.SCALE)
    cases, plan, triage = {}, 0, Triage()
    for line in open(trace, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("CALL "):
            args, _, answer = line[5:].rpartition(" => ")
            triage.call(args, answer)
            continue
        if line.startswith("1.."):
            plan = int(line[3:])
            continue
        m = CASE.match(line)
        if m:
            # A TODO case is the suite's own expected failure (TAP: it
            # does not fail the run), e.g. what Linux does on purpose.
            ok = not m.group(1) or "# TODO" in m.group(3)
            cases[int(m.group(2))] = (ok, m.group(3),
                                      triage.case(ok, m.group(3)))
    for c in range(1, plan + 1):  # a script that died: the rest failed
        cases.setdefault(c, (False, " - did not run",
                             "the case did not run (its script stopped)"))
    return cases, plan


def test_pjdfstest(master, mounts, tmp_path):
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
    # Its paths of PATH_MAX bytes sit under a work directory: keys longer
    # than the master's default limit (4096, the longest path a process
    # can name from kv/).
    master.stop()
    master.start("--max_key_length", "8192")
    # open/25.t writes a file of 2 GiB (one byte past a hole): a pool and
    # a staging limit that hold one.
    m = mounts(seg="3GiB", opts="allow_other,staging_limit=3GiB")
    write = os.environ.get("MC_PJDFSTEST_WRITE", "")
    only = set(filter(None, os.environ.get("MC_PJDFSTEST_FILES",
                                           "").split(",")))
    assert not (only and write), "MC_PJDFSTEST_WRITE needs whole directories"
    expected = parse_expected(EXPECTED) if os.path.exists(EXPECTED) else {}
    failures, unexpected, fixed, traces = {}, [], [], []
    counts = {d: [0, 0] for d in dirs}  # passed, total
    files = [(d, t) for d in dirs
             for t in sorted(os.listdir(os.path.join(suite, "tests", d)))
             if t.endswith(".t") and (not only or f"{d}/{t}" in only)]

    def one(dt):
        d, t = dt
        work = m.kv / "pjd" / d / t
        work.mkdir(parents=True)
        return run_file(os.path.join(suite, "tests", d, t), str(work),
                        str(tmp_path / f"trace-{d}-{t}"))[0]
    # The files in parallel, each in its own directory with its own
    # trace: most of the suite's time is its `sleep 1`s between the
    # steps of time checks (ctime, mtime), not work.
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = list(pool.map(one, files))
    for (d, t), cases in zip(files, results):
        name = f"{d}/{t}"
        before = len(unexpected)
        for c, (ok, detail, why) in sorted(cases.items()):
            counts[d][0] += ok
            counts[d][1] += 1
            if not ok:
                failures[(name, c)] = why if write == "fresh" else \
                    expected.get((name, c)) or why
                if (name, c) not in expected:
                    unexpected.append(f"{name} {c}{detail}")
            elif (name, c) in expected:
                fixed.append(f"{name} {c} ({expected[(name, c)]})")
        if len(unexpected) > before:
            # The file's calls and answers, kept for the report.
            traces.append(tmp_path / f"trace-{d}-{t}")
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
        + "\n".join(fixed[:50]) + f"\n{m.log()[-3000:]}"
        + f"\nmaster:\n{master.log()[-3000:]}"
        + "".join(f"\n{p.name}:\n" + p.read_text(errors="replace")[-4000:]
                  for p in traces[:2]))
