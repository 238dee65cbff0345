# SPDX-License-Identifier: Apache-2.0
"""scripts/check_deps.py over made-up trees: it must name the package that
setup.sh misses for each way a test or script calls a command, and pass
once that package is listed. Uses etcdctl (etcd-client), redis-cli
(redis-tools), fio and numpy (python3-numpy), which setup.sh installs."""
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("MC_SOURCE_DIR") or os.path.join(HERE, "..", "..",
                                                          "..")
CHECK = os.path.join(SOURCE, "scripts", "check_deps.py")
BASE = ["coreutils", "python3"]


def check(root, packages):
    p = subprocess.run(["/usr/bin/python3", CHECK, "--root", str(root),
                        "--packages", ",".join(packages)],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.fixture(autouse=True)
def needs_tools():
    for cmd in ("etcdctl", "redis-cli", "fio"):
        assert shutil.which(cmd), f"{cmd} missing: scripts/setup.sh " \
            "installs it"


CASES = {
    "python argv list": ("etcd-client", {"tests/t.py": (
        "import subprocess\n"
        "subprocess.run(['etcdctl', 'get', 'k'])\n")}),
    "python helper call": ("fio", {"tests/t.py": (
        "def run(*a):\n    pass\n"
        "run('fio', '--name=x')\n")}),
    "python import": ("python3-numpy", {"tests/t.py": "import numpy\n"}),
    "C absolute path": ("etcd-client", {"tests/t.c": (
        '#define CTL "/usr/bin/etcdctl"\n')}),
    "shell pipeline": ("redis-tools", {"scripts/s.sh": (
        "#!/usr/bin/env bash\necho ping | redis-cli -p 1\n")}),
    "shell substitution after a wrapper": ("redis-tools", {"bench/b.sh": (
        "#!/usr/bin/env bash\nx=$(timeout 5 redis-cli ping)\n")}),
    "shell continuation and &&": ("fio", {"scripts/s.sh": (
        "#!/usr/bin/env bash\ntrue && \\\n  fio --name=a\n")}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_names_the_missing_package(tmp_path, case):
    pkg, files = CASES[case]
    root = tree(tmp_path, files)
    rc, out = check(root, BASE)
    assert rc == 1, out
    assert f"package {pkg}," in out, out
    rc, out = check(root, BASE + [pkg])
    assert rc == 0, out


def test_a_missing_absolute_path_is_an_error(tmp_path):
    tool = "/usr/bin/" + "no-such-tool"  # not a path the check sees here
    root = tree(tmp_path, {"tests/t.c": f'#define X "{tool}"\n'})
    rc, out = check(root, BASE)
    assert rc == 1 and tool in out, out


def test_what_is_not_a_command_is_not_counted(tmp_path):
    # Heredoc bodies, comments, array values, case patterns, arguments and
    # lines marked "deps: ignore" are not commands.
    root = tree(tmp_path, {
        "scripts/s.sh": (
            "#!/usr/bin/env bash\n"
            "# redis-cli in a comment\n"
            "PKGS=(\n\tredis-tools fio\n\tetcd-client\n)\n"
            "cat <<EOF\nredis-cli\nfio\nEOF\n"
            "case $1 in\nstart) echo fio ;;\nesac\n"
            "echo etcdctl redis-cli\n"
            "etcdctl get k  # deps: ignore\n"),
        "tests/t.py": "x = 'etcdctl'\nprint('fio', 1)\n",
    })
    rc, out = check(root, BASE)
    assert rc == 0, out


def test_dependencies_and_essential_packages_count(tmp_path):
    # make comes with build-essential (a dependency); gzip is Essential and
    # awk (mawk) Priority: required: every Debian machine has them.
    root = tree(tmp_path, {"scripts/s.sh": (
        "#!/usr/bin/env bash\nmake -C x\ngzip -c x | awk '{print}'\n")})
    rc, out = check(root, [])
    assert rc == 1 and "package make," in out, out
    assert "gzip" not in out and "awk" not in out, out
    rc, out = check(root, ["build-essential"])
    assert rc == 0, out


def test_setup_lists_every_package_the_tree_needs():
    p = subprocess.run(["/usr/bin/python3", CHECK], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
