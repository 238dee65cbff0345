# SPDX-License-Identifier: Apache-2.0
"""``python -m mooncake.http_metadata_server``: upstream's command line
(--host, --port, --log-level) for the HTTP metadata service that transfer
engines find each other through (GET/PUT/DELETE /metadata?key=).

It runs this project's ``mooncake_metad`` (the same protocol; docs/
wire-protocol.md), replacing this process, so there is one
implementation of the service. Arguments after ``--`` go to
mooncake_metad unchanged (--store sqlite:PATH, --auth_token_file, ...).

mooncake_metad is looked for in MOONCAKE_METAD (its path), on PATH, in
the build directory the package's libmooncake.so comes from, and in the
install prefix's bin/. The mooncake.store module is not imported:
nothing is loaded but this file.
"""
import argparse
import glob
import os
import shutil
import sys

BINARY = "mooncake_metad"
_VERBOSITY = {"DEBUG": "1", "INFO": "0", "WARNING": "0", "ERROR": "0",
              "CRITICAL": "0"}


def find_metad():
    """The path of mooncake_metad, or None (every place is in the module
    docstring)."""
    explicit = os.environ.get("MOONCAKE_METAD")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which(BINARY)
    if on_path:
        return on_path
    places = []
    pkg = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(pkg))
    build = os.environ.get("MC_BUILD_DIR")
    if build:
        places.append(os.path.join(build, "metad", BINARY))
    lib = os.environ.get("MOONCAKE_LIB")
    if lib:
        # <build>/mooncakefs/lib/libmooncake.so -> <build>/metad/
        places.append(os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(lib)))), "metad", BINARY))
        # <prefix>/lib/libmooncake.so -> <prefix>/bin/
        places.append(os.path.join(os.path.dirname(os.path.dirname(
            os.path.abspath(lib))), "bin", BINARY))
    found = sorted(glob.glob(os.path.join(repo, "build*", "metad", BINARY)),
                   key=lambda p: -os.path.getmtime(p))
    places += found
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        places.append(os.path.join(prefix, "bin", BINARY))
    for p in places:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(
        prog="python -m mooncake.http_metadata_server",
        description="HTTP Metadata Server for Mooncake (runs "
                    "mooncake_metad; arguments after -- go to it)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--port", type=int, default=8080,
                        help="Port to listen on")
    parser.add_argument("--host", type=str, default="0.0.0.0",
                        help="Host to bind to")
    parser.add_argument("--log-level", type=str, default="INFO",
                        choices=sorted(_VERBOSITY), help="Logging level")
    args = parser.parse_args(argv)
    args.extra = extra
    return args


def command(args, metad):
    return [metad, "--host", args.host, "--port", str(args.port),
            f"--v={_VERBOSITY[args.log_level]}", *args.extra]


def main(argv=None):
    args = parse_args(argv)
    metad = find_metad()
    if not metad:
        sys.stderr.write(
            f"mooncake.http_metadata_server: {BINARY} not found (set "
            f"MOONCAKE_METAD to its path, put it on PATH, or build this "
            f"checkout: scripts/build.sh)\n")
        return 127
    cmd = command(args, metad)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(metad, cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
