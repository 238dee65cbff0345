#!/usr/bin/env bash
# ThreadSanitizer run (not in CI: slow on 2 cores). The daemons and tools
# are built with TSan and the integration tests drive them with concurrent
# clients; halt_on_error makes a race kill the daemon, which fails the test.
# Criterion's unit tests cannot run under TSan (criterion's inheritable
# arena collides with TSan's address-space layout), nor can the corpus
# replays add anything TSan would see (single-threaded). Tests that run in
# the plain pass only (pjdfstest: an outside suite whose value is what the
# kernel answers, 8 minutes plain and far longer under TSan; a pip
# install) are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tsan
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
cd build-tsan && ctest --output-on-failure -j2 -LE 'unit|fuzz|only-plain'
