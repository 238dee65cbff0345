"""Same-host shared memory and other local users (libte/mem.c,
libte/transport/shm/shm.c, docs/operations.md "Trust model").

- A peer's descriptor names the file a same-host reader maps. A peer that
  names another file (another pool's segment, some program's memory,
  with its inode, which anyone can stat) made the reader map it with the
  reader's rights: its reads of the peer's objects returned that file's
  bytes and its writes went into it. The file must now end with the tag
  the descriptor names, which only a process that could read it knows:
  otherwise the reader goes over tcp to the peer itself.
- A kept segment's /dev/shm name is easy to guess: another user who made
  the file first had it adopted and read (and changed) what was kept in
  it. An existing file of another owner is now refused.
"""
import fcntl
import json
import os
import subprocess
import urllib.parse

import pytest

from mctest import binary, free_port, request
from pool import MEMBER, Member, cli, shm_segment

OTHER = 54323  # a uid no account uses


def metadata(master, method, key, body=None):
    u = urllib.parse.urlsplit(master.metadata)
    q = urllib.parse.urlencode({"key": key})
    return request(u.port, method, f"{u.path}?{q}", body=body)


def member_on_private_memory(procs, tmp_path, master, port):
    """Start mooncake_client on port: it must run on private memory
    (its kept segment's file refused); its log."""
    m = Member(procs, tmp_path, master, size="16MB", port=port)
    text = m.log()
    assert "using private memory meanwhile" in text, text
    assert m.stop() == 0, m.log()
    return text


def member_refused(tmp_path, master, port, *extra):
    """Start mooncake_client on port: it must exit non-zero; its log."""
    log = tmp_path / "member.log"
    with open(log, "wb") as f:
        p = subprocess.run(
            [binary(*MEMBER), "--host", "127.0.0.1", "--port", str(port),
             "--global_segment_size", "16MB",
             "--master_server_address", master.addr,
             "--metadata_server", master.metadata, *extra],
            stdout=f, stderr=f, timeout=60)
    text = log.read_text(errors="replace")
    assert p.returncode != 0, text
    return text


def test_descriptor_naming_another_file_is_not_mapped(procs, tmp_path,
                                                      master):
    member = Member(procs, tmp_path, master)
    bait = tmp_path / "bait"
    bait.write_bytes(b"B" * 65536)
    cli(master, "put", str(bait), "bait")
    # Root's segment of another pool (or another program's memory): 0600,
    # held by a live owner (a shared flock, as every segment's owner).
    victim = f"/dev/shm/mooncake.victim-{os.getpid()}"
    procs.own_shm(victim)
    fd = os.open(victim, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"V" * (40 << 20))
    fcntl.flock(fd, fcntl.LOCK_SH)
    ino = os.stat(victim).st_ino
    # The member's descriptor, rewritten as a hostile peer would (it keeps
    # its own tag: it knows that one).
    key = f"mooncake/ram/{member.name}"
    st, body, _ = metadata(master, "GET", key)
    assert st == 200, (st, body)
    desc = json.loads(body)
    assert all("mc_shm_tag" in b for b in desc["buffers"]), desc
    for b in desc["buffers"]:
        b.update(mc_shm_path=victim, mc_shm_ino=ino, mc_shm_offset=0)
    st, body, _ = metadata(master, "PUT", key, json.dumps(desc).encode())
    assert st == 200, (st, body)
    # A fresh reader on this host: the peer's bytes (over tcp), not the
    # victim's.
    out = tmp_path / "out"
    cli(master, "get", "bait", str(out))
    assert out.read_bytes() == b"B" * 65536
    # A write placed on that peer does not land in the victim's file.
    other = tmp_path / "w"
    other.write_bytes(b"W" * 65536)
    cli(master, "put", str(other), "w")
    with open(victim, "rb") as f:
        data = f.read()
    assert data == b"V" * (40 << 20), "the victim's file was written"
    cli(master, "get", "w", str(out))
    assert out.read_bytes() == b"W" * 65536
    os.close(fd)


def test_segment_file_made_first_by_another_user_is_refused(
        procs, tmp_path, master):
    if os.geteuid() != 0:
        pytest.skip("another user's file needs root to make")
    port = free_port()
    path = shm_segment(f"127.0.0.1:{port}")
    procs.own_shm(path)
    subprocess.run(["sh", "-c", f"umask 0 && : > {path}"], check=True,
                   user=OTHER, group=OTHER, extra_groups=[])
    assert os.stat(path).st_uid == OTHER
    # Its default name: it runs on private memory instead and says why
    # (it was refused: anyone could stop a member by making the file).
    text = member_on_private_memory(procs, tmp_path, master, port)
    assert f"belongs to uid {OTHER}" in text, text
    # The name asked for: refused.
    text = member_refused(tmp_path, master, free_port(),
                          "--segment_name",
                          os.path.basename(path)[len("mooncake.seg."):])
    assert f"belongs to uid {OTHER}" in text, text
    # Nothing was kept in it.
    assert os.stat(path).st_size == 0
    assert os.stat(path).st_uid == OTHER


def test_segment_file_with_another_name_is_refused(procs, tmp_path, master):
    """A kept segment's name made a hard link to some other file of this
    user (another program's shared memory): the owner's uid matched, and
    the file was truncated and used as pool memory. A file with more than
    one name is refused."""
    port = free_port()
    path = shm_segment(f"127.0.0.1:{port}")
    other = f"/dev/shm/mc-other-{os.getpid()}"
    procs.own_shm(path, other)
    with open(other, "wb") as f:
        f.write(b"O" * 4096)
    os.link(other, path)
    text = member_on_private_memory(procs, tmp_path, master, port)
    assert "or has 2 names" in text, text
    with open(other, "rb") as f:
        assert f.read() == b"O" * 4096
