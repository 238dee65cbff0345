#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Check that scripts/setup.sh installs every Debian package that the tests,
benchmarks and scripts call.

CI runs on a machine where packages installed by hand stay installed, so a
test can call a command that setup.sh never installs and still pass there
(etcdctl from etcd-client did). This check finds what the tree calls and
asks dpkg where it comes from:

  - shell scripts (scripts/, bench/, .ci/): the words in command position
    (after ; | && || ( $( then do ..., and after sudo, env, exec, timeout,
    setsid, nsenter ...), skipping builtins, functions of the script,
    variables, heredoc bodies, array values and relative paths;
  - Python (tests/, bench/, scripts/, python/): the first string of every
    list or tuple literal (argv lists), the first string argument of calls
    named run/popen/call/check_output/which/..., absolute paths under
    /bin, /sbin, /usr/bin, /usr/sbin, and every imported module;
  - C (tests/, bench/): absolute paths under the same directories.

Every candidate that resolves on this machine (a command on the standard
PATH, an absolute path, an importable module file) must belong to a package
in the closure of what a fresh Debian 12 machine gets after setup.sh: the
packages setup.sh lists (scripts/setup.sh --list), the Essential and
Priority: required packages, and everything they depend on (Depends and
Pre-Depends, alternatives and virtual packages resolved against what is
installed; Recommends are not followed: setup.sh installs without them).
An absolute path that does not exist here is an error too. Bare words that
resolve to nothing here are skipped: most are not commands (argv lists of
our own tools, words of a message), and one that is fails its test on this
machine anyway; the check catches what hides on a machine where a package
was installed by hand.

A line may opt out with a comment holding "deps: ignore".

Usage: scripts/check_deps.py [--root DIR] [--packages P1,P2,...] [-v]
  --packages  use this list instead of asking setup.sh (for tests)
  -v          print every command found and its package
Exit status 0: all found; 1: something is not installed by setup.sh.
"""
import argparse
import ast
import importlib.machinery
import importlib.util
import os
import re
import shlex
import subprocess
import sys

STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BIN_RE = re.compile(r"^/(?:usr/)?s?bin/[A-Za-z0-9_.+-]+$")
WORD_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
IGNORE = "deps: ignore"

SHELL_BUILTINS = set("""
! [[ ]] { } case esac if then else elif fi for while until do done in
function select time coproc alias bg bind break builtin caller cd command
compgen complete compopt continue declare dirs disown echo enable eval
exec exit export false fc fg getopts hash help history jobs kill let local
logout mapfile popd printf pushd pwd read readarray readonly return set
shift shopt source suspend test times trap true type typeset ulimit umask
unalias unset wait . :
""".split())
# Words after which the next word is a command again.
SHELL_WRAPPERS = {"sudo", "env", "exec", "time", "nice", "nohup", "timeout",
                  "setsid", "nsenter", "command", "builtin", "xargs",
                  "taskset", "numactl", "stdbuf", "ionice", "chroot"}
SHELL_SEPARATORS = {";", ";;", "|", "||", "&", "&&", "(", ")", "$(", "`",
                    "then", "do", "else", "elif", "if", "while", "until",
                    "!", "{", "}", "|&", "\n"}
PY_CALLS = {"run", "Popen", "popen", "call", "check_call", "check_output",
            "which", "spawn", "execvp", "execlp", "execv", "execl", "system",
            "sh", "nsenter", "getstatusoutput", "getoutput"}


class Found:
    def __init__(self):
        self.commands = {}  # name or absolute path -> [where]
        self.modules = {}  # top-level module -> [where]

    def command(self, word, where):
        self.commands.setdefault(word, []).append(where)

    def module(self, name, where):
        self.modules.setdefault(name, []).append(where)


# ---------------------------------------------------------------- shell

def shell_logical_lines(text):
    """Lines with continuations joined, comments and heredoc bodies
    dropped; yields (line number, text)."""
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        start = i
        line = lines[i]
        while line.endswith("\\") and i + 1 < n:
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        if IGNORE in line:
            continue
        # Array assignments over several lines hold values, not commands.
        m = re.search(r"[A-Za-z_][A-Za-z0-9_]*\+?=\(", line)
        if m and line.count("(") > line.count(")"):
            while i < n and ")" not in lines[i].split("#")[0]:
                i += 1
            i += 1
            line = line[:m.start()]
        # Heredocs: skip the body up to the delimiter.
        for m in re.finditer(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1",
                             line):
            delim = m.group(2)
            while i < n and lines[i].strip() != delim:
                i += 1
            i += 1
        yield start + 1, line


def shell_words(line):
    """Tokens of one shell line; comments dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>`")
    lex.commenters = "#"
    lex.wordchars += "$/-.=+:@%,[]{}!*?~^"
    lex.whitespace_split = False
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes inside an odd construct
        return []


def scan_shell(path, rel, found):
    with open(path, errors="replace") as f:
        text = f.read()
    functions = set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)"
                               r"\s*\(\)", text, re.M))
    for lineno, line in shell_logical_lines(text):
        words = shell_words(line)
        expect = True
        wrapped = redirect = False
        for w in words:
            if redirect:  # the target of < > >> is a file
                redirect = False
                continue
            if w in ("<", ">", ">>", "<<", "<<<", ">&", "<&", "&>", ">|"):
                redirect = True
                continue
            if w in SHELL_SEPARATORS or w.endswith("$(") or w == "$((":
                expect = True
                wrapped = False
                continue
            if not expect:
                continue
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", w):
                continue  # an assignment before the command
            if wrapped and (w.startswith("-") or
                            re.match(r"^[0-9.,]+[smhd]?$", w)):
                continue  # a wrapper's options: timeout 5, taskset -c 0
            expect = wrapped = w in SHELL_WRAPPERS
            if w in SHELL_BUILTINS or w in functions:
                expect = wrapped = w in ("!", "time", "exec", "command",
                                         "builtin")
                continue
            if "$" in w or "`" in w:
                continue  # a command named by a variable
            if w.startswith("/"):
                if BIN_RE.match(w):
                    found.command(w, f"{rel}:{lineno}")
                continue
            if "/" in w or not WORD_RE.match(w):
                continue  # our own scripts and binaries, or not a command
            found.command(w, f"{rel}:{lineno}")


# --------------------------------------------------------------- python

def scan_python(path, rel, found):
    with open(path, errors="replace") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename=rel)
    except SyntaxError as e:
        raise SystemExit(f"check_deps: {rel}: {e}")
    lines = text.split("\n")

    def ignored(node):
        ln = getattr(node, "lineno", 0)
        return 0 < ln <= len(lines) and IGNORE in lines[ln - 1]

    def word(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None

    for node in ast.walk(tree):
        if ignored(node):
            continue
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            w = word(node.elts[0])
            if w and (WORD_RE.match(w) or BIN_RE.match(w)):
                found.command(w, where)
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else \
                fn.id if isinstance(fn, ast.Name) else ""
            w = word(node.args[0])
            if name in PY_CALLS and w:
                first = w.split()[0] if w.split() else ""
                if WORD_RE.match(first) or BIN_RE.match(first):
                    found.command(first, where)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            w = node.value.split()[0] if node.value.split() else ""
            if BIN_RE.match(w):
                found.command(w, where)
        elif isinstance(node, ast.Import):
            for a in node.names:
                found.module(a.name.split(".")[0], where)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.module(node.module.split(".")[0], where)


# -------------------------------------------------------------------- C

C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def scan_c(path, rel, found):
    with open(path, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if IGNORE in line:
                continue
            for m in C_STRING.finditer(line):
                w = m.group(1).split()[0] if m.group(1).split() else ""
                if BIN_RE.match(w):
                    found.command(w, f"{rel}:{lineno}")


# ----------------------------------------------------------------- tree

SKIP_DIRS = {".git", "__pycache__", "corpus", ".state"}


def scan_tree(root):
    found = Found()
    for top in ("scripts", "bench", "tests", "python", ".ci"):
        base = os.path.join(root, top)
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS
                             and not x.startswith("build"))
            for fn in sorted(files):
                p = os.path.join(d, fn)
                rel = os.path.relpath(p, root)
                if fn.endswith(".py"):
                    scan_python(p, rel, found)
                elif fn.endswith((".c", ".h")):
                    scan_c(p, rel, found)
                elif fn.endswith(".sh") or is_shell_script(p):
                    scan_shell(p, rel, found)
    return found


def is_shell_script(path):
    try:
        with open(path, "rb") as f:
            head = f.readline(200)
    except OSError:
        return False
    return head.startswith(b"#!") and (b"bash" in head or b"/sh" in head)


# ----------------------------------------------------------------- dpkg

def installed_packages():
    """name -> dict of the fields used, for installed packages."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f",
         "${Package}\t${db:Status-Status}\t${Essential}\t${Priority}\t"
         "${Depends}\t${Pre-Depends}\t${Provides}\n"],
        capture_output=True, text=True, check=True).stdout
    pkgs = {}
    for line in out.splitlines():
        name, status, ess, prio, dep, pre, prov = (line.split("\t") + [""] *
                                                   7)[:7]
        if status != "installed":
            continue
        pkgs[name] = {"essential": ess == "yes", "priority": prio,
                      "depends": ", ".join(x for x in (dep, pre) if x),
                      "provides": prov}
    return pkgs


def dep_names(field):
    """[[alternative names], ...] of a Depends field."""
    groups = []
    for group in field.split(","):
        alts = []
        for alt in group.split("|"):
            alt = alt.strip()
            if not alt:
                continue
            name = re.split(r"[\s(:]", alt, maxsplit=1)[0]
            alts.append(name)
        if alts:
            groups.append(alts)
    return groups


def closure(pkgs, roots):
    """Installed packages a fresh machine would have after setup.sh."""
    providers = {}
    for name, p in pkgs.items():
        for prov in dep_names(p["provides"]):
            providers.setdefault(prov[0], []).append(name)
    seen = set()
    todo = [r for r in roots if r in pkgs]
    todo += [n for n, p in pkgs.items()
             if p["essential"] or p["priority"] == "required"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for alts in dep_names(pkgs[name]["depends"]):
            # apt takes the first alternative it can; of those installed
            # here, the first one listed stands for it.
            for alt in alts:
                cands = [alt] if alt in pkgs else providers.get(alt, [])
                if cands:
                    todo.extend(cands[:1])
                    break
    return seen


def owners(paths):
    """path -> package, for the paths dpkg knows."""
    res = {}
    if not paths:
        return res
    out = subprocess.run(["dpkg-query", "-S", *paths], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        if path in paths and "diversion" not in pkg:
            res[path] = pkg.split(",")[0].split(":")[0].strip()
    return res


def path_variants(path):
    """The spellings under which dpkg may have registered a file (usrmerge:
    /bin/x may be /usr/bin/x, and the reverse; alternatives' symlinks)."""
    out = [path]
    real = os.path.realpath(path)
    for p in (path, real):
        if p not in out:
            out.append(p)
        if p.startswith("/usr/"):
            alt = p[4:]
        else:
            alt = "/usr" + p
        if alt not in out:
            out.append(alt)
    return out


def module_file(name):
    """The file a top-level module of the system python3 comes from, or
    None when it is built in, not found or not a file."""
    if name in sys.builtin_module_names:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if not spec or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    return spec.origin


def setup_packages(root):
    out = subprocess.run([os.path.join(root, "scripts", "setup.sh"),
                          "--list"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--packages")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    root = os.path.abspath(args.root)

    roots = args.packages.split(",") if args.packages is not None else \
        setup_packages(root)
    pkgs = installed_packages()
    missing_roots = [r for r in roots if r and r not in pkgs]
    have = closure(pkgs, roots)
    found = scan_tree(root)

    # Resolve every candidate to a file on this machine.
    problems = []
    files = {}  # candidate -> (kind, path)
    for cmd in sorted(found.commands):
        if cmd.startswith("/"):
            if os.path.exists(cmd):
                files[cmd] = ("command", cmd)
            else:
                where = found.commands[cmd]
                problems.append(
                    f"{cmd} (used at {', '.join(where[:3])}) is not "
                    "installed: add the package that ships it to PACKAGES "
                    "in scripts/setup.sh")
        else:
            p = _which(cmd)
            if p:
                files[cmd] = ("command", p)
    repo = root + os.sep
    for mod in found.modules:
        f = module_file(mod)
        if f and not os.path.realpath(f).startswith(repo):
            files[mod] = ("module", f)
    variants = {c: path_variants(p) for c, (_, p) in files.items()}
    known = owners(sorted({v for vs in variants.values() for v in vs}))

    for r in missing_roots:
        problems.append(f"setup.sh lists {r}, which is not installed here "
                        "(run scripts/setup.sh)")
    for cand in sorted(files):
        kind, path = files[cand]
        where = (found.commands.get(cand) if kind == "command"
                 else found.modules.get(cand))
        pkg = next((known[v] for v in variants[cand] if v in known), None)
        first = ", ".join(where[:3]) + (" ..." if len(where) > 3 else "")
        if args.verbose:
            print(f"{kind} {cand}: {path} ({pkg or 'no package'}) <- {first}")
        if pkg is None:
            problems.append(f"{kind} {cand} ({path}, used at {first}) "
                            "belongs to no Debian package: install it "
                            "through a package that setup.sh lists")
        elif pkg not in have:
            problems.append(f"{kind} {cand} ({path}, used at {first}) comes "
                            f"from the package {pkg}, which scripts/setup.sh "
                            "does not install: add it to PACKAGES there")
    for p in problems:
        print("check_deps: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_deps: {len(files)} commands and modules used by the tree "
          f"all come from the {len(roots)} packages of setup.sh and their "
          "dependencies")
    return 0


def _which(cmd):
    for d in STD_PATH.split(":"):
        p = os.path.join(d, cmd)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


if __name__ == "__main__":
    sys.exit(main())
