# SPDX-License-Identifier: Apache-2.0
"""The rdma transport's own memory handling under ASan+UBSan: the C
cases of rdma/test_transport.py (te_conformance against a te_peer, and
a peer killed mid-batch: breaks, flushes, retries, reconnection; the
port going down and up;
the authenticated handshake; device memory staged over rdma) in one
VM boot with the sanitizer build's binaries (the ASan pass runs this;
the plain pass runs every case in test_transport.py)."""
import os

os.environ.setdefault("MC_VM_CASES", "conformance,kill,port,auth,gpu")

from test_transport import (test_auth, test_conformance,  # noqa: E402,F401
                            test_gpu_staged, test_kill_peer,
                            test_port_down, test_runner_finished, vm)
