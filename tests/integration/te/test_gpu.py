# SPDX-License-Identifier: Apache-2.0
"""libte with CUDA device memory (issue 18), on CPUs: tests/tools/te_gpu
through the STAND-IN driver library tests/tools/fake_cuda.c (libte loads
it by MC_CUDA_LIBRARY). The stand-in's device memory faults on any host
access and its copies happen only when a stream is synchronized, so these
tests prove libte's staging logic (chunks through pinned buffers, the
server's bounce buffer, the local transport's driver copies, contexts and
streams), not the driver or a GPU: scripts/gpu_check.sh does that on a
machine with one."""
import os
import subprocess

from mctest import FAKE_CUDA, SANITIZER_MARKERS, SCALE, TE_GPU, binary, te_env


def run_gpu(procs, tmp_path, *args, driver=True):
    env = {"MC_CUDA_LIBRARY": binary(*FAKE_CUDA) if driver else "/nonexistent"}
    p = procs.popen([binary(*TE_GPU), *args], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, env=te_env(env))
    out, err = p.communicate(timeout=180 * SCALE)
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    return p.returncode, out, err


def test_device_memory_through_staging(procs, tmp_path):
    peer = procs.start_te_peer(tmp_path, "P2PHANDSHAKE", size="32M", seed=5)
    rc, out, err = run_gpu(procs, tmp_path, "--target", peer.name,
                           "--target_addr", str(peer.addr),
                           "--target_size", str(peer.size))
    assert rc == 0, out + err
    lines = out.splitlines()
    # Every size, across the 4 MiB chunks unevenly, both ways.
    for size in (1, 4097, (4 << 20) + 123, (9 << 20) + 77):
        assert f"ok out {size}" in lines, out
    assert any(ln.startswith("ok serve ") for ln in lines), out
    assert any(ln.startswith("ok local ") for ln in lines), out
    # The bytes went through the driver's copies, both directions.
    stats = next(ln for ln in lines if ln.startswith("stats ")).split()
    h2d, d2h = int(stats[2]), int(stats[5])
    assert h2d > 0 and d2h > 0, out
    assert peer.stop() == 0, peer.log()


def test_smaller_chunks_and_one_buffer(procs, tmp_path):
    """One pinned buffer of 64 KiB: every chunk waits for the previous one
    to free it (the pipeline at its narrowest), and still every byte
    arrives."""
    peer = procs.start_te_peer(tmp_path, "P2PHANDSHAKE", size="16M", seed=6)
    p = procs.popen([binary(*TE_GPU), "--target", peer.name, "--target_addr",
                     str(peer.addr), "--target_size", str(peer.size)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env=te_env({"MC_CUDA_LIBRARY": binary(*FAKE_CUDA),
                                "MC_GPU_STAGE_CHUNK": "65536",
                                "MC_GPU_STAGE_BUFFERS": "1"}))
    out, err = p.communicate(timeout=180 * SCALE)
    assert p.returncode == 0, out + err
    assert f"ok out {(9 << 20) + 77}" in out.splitlines(), out


def test_driver_copy_failures(procs, tmp_path):
    """The (stand-in) driver fails a copy or a stream's synchronize, at
    the first chunk or in the middle of a transfer of several, reading
    into and writing from device memory: each transfer ends FAILED, and
    the next one moves every byte; the same for the local transport's
    copies and a peer server's bounce buffer. The engines are destroyed
    at the end: a reference leaked by a failed chunk would hang that (it
    did before the fix in stage.c). One pinned buffer of 64 KiB: a buffer
    kept by the failed transfer would hang the next one (the tool's 60 s
    wait fails it)."""
    peer = procs.start_te_peer(tmp_path, "P2PHANDSHAKE", size="16M", seed=8)
    p = procs.popen([binary(*TE_GPU), "--faults", "--target", peer.name,
                     "--target_addr", str(peer.addr), "--target_size",
                     str(peer.size)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env=te_env({"MC_CUDA_LIBRARY": binary(*FAKE_CUDA),
                                "MC_GPU_STAGE_CHUNK": "65536",
                                "MC_GPU_STAGE_BUFFERS": "1"}))
    out, err = p.communicate(timeout=180 * SCALE)
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    assert p.returncode == 0, out + err
    lines = out.splitlines()
    assert "ok faults 8" in lines, out
    # The local transport's and a peer server's driver copies too.
    assert "ok faults_local" in lines and "ok faults_serve" in lines, out
    # The driver's error reached the log, named.
    assert "700" in err or "ILLEGAL" in err.upper(), err


def test_device_tag_without_a_driver_is_refused(procs, tmp_path):
    """Where no driver can be loaded, a "cuda:0" tag cannot be honoured:
    te_register refuses it (MC_ENOTSUPPORTED, the reason logged), while
    the same memory tagged "cpu:0" registers."""
    rc, out, err = run_gpu(procs, tmp_path, "--expect_refusal", driver=False)
    assert rc == 0 and "ok refused -4018 ENOTSUPPORTED" in out, out + err
    assert "MC_CUDA_LIBRARY=/nonexistent" in err, err


def test_gpu_check_script_with_the_stand_in(tmp_path):
    """scripts/gpu_check.sh (for GPU machines) runs end to end through the
    stand-in, so it does not rot where CI has no GPU."""
    from mctest import BUILD, SOURCE
    p = subprocess.run([os.path.join(SOURCE, "scripts", "gpu_check.sh"),
                        "--stand-in"], capture_output=True, text=True,
                       timeout=240 * SCALE,
                       env=te_env({"MC_BUILD_DIR": BUILD,
                                   "TMPDIR": str(tmp_path)}))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "STAND-IN" in p.stdout and "gpu_check: passed" in p.stdout
    assert "device/host" in p.stdout, p.stdout


def test_cuda_ipc_between_processes(procs, tmp_path):
    """Another process's device memory on this host: the cuda_ipc
    transport maps it with the (stand-in's) IPC handle and the driver
    copies, host or device memory to device memory, with no byte over
    tcp; in one process (the serve case above) the handle does not open,
    as with the real driver, and tcp's staging serves instead."""
    import json
    env = te_env({"MC_CUDA_LIBRARY": binary(*FAKE_CUDA)})
    ready = tmp_path / "ready"
    srv = procs.popen([binary(*TE_GPU), "--serve_device", str((3 << 20) + 5),
                       "--ready", str(ready)], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True, env=env)
    from mctest import wait_for
    info = wait_for(lambda: ready.exists() and ready.read_text().strip() and
                    json.loads(ready.read_text()), what="serve_device ready")
    p = procs.popen([binary(*TE_GPU), "--ipc_target", info["name"],
                     "--ipc_addr", str(info["addr"]), "--ipc_size",
                     str(info["size"])], stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, env=env)
    out, err = p.communicate(timeout=120 * SCALE)
    assert p.returncode == 0, out + err
    assert f"ok ipc {info['size']}" in out, out
    srv.stdin.close()
    assert srv.wait(timeout=60 * SCALE) == 0
