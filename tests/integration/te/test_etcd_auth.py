# SPDX-License-Identifier: Apache-2.0
"""etcd's own security passed through by the etcd metadata backend
(libte/meta/meta_etcd.c, connection strings by common/mc_etcd_conn.c):

- RBAC: a real etcd with authentication on; transfer engines with the
  right user and password file publish and find each other and move
  data; a wrong password, no credentials, a user without permission and a
  password file open to others each fail with a message saying so; a
  token etcd forgets (auth disable + enable) is replaced on the fly.
- TLS with client certificates (--client-cert-auth): a throwaway CA,
  server and client certificates made with openssl; engines with the
  client certificate work (named in the string or in MC_ETCD_*), without
  it or without the CA they fail saying what to set.
- the master refuses an etcd string the backend would refuse."""
import os
import subprocess

from mctest import (SANITIZER_MARKERS, SCALE, TE_PEER, binary, free_port,
                    te_env, wait_for)

MASTER = ("master", "mooncake_master")

PASSWORD = "mc-Pw-7f3a"  # the engines' etcd password (never to be logged)
ROOT_PASSWORD = "root-Pw-91c2"


def free_ports(n):
    return [free_port() for _ in range(n)]


class Etcd:
    def __init__(self, procs, tmp_path, name, tls=None):
        """tls: dict of the CA and server files (client-cert auth on)."""
        self.tls = tls
        cport, pport = free_ports(2)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{cport}"
        self.hostport = f"127.0.0.1:{cport}"
        peer = f"http://127.0.0.1:{pport}"
        args = ["etcd", "--name", name, "--data-dir",
                str(tmp_path / f"{name}.data"), "--listen-client-urls",
                self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls",
                peer, "--initial-cluster", f"{name}={peer}",
                "--log-level", "warn"]
        if tls:
            args += ["--cert-file", tls["server"], "--key-file",
                     tls["server_key"], "--client-cert-auth",
                     "--trusted-ca-file", tls["ca"]]
        self.log_path = tmp_path / f"{name}.log"
        with open(self.log_path, "ab") as log:
            self.proc = procs.popen(args, stdout=log, stderr=log)
        wait_for(self.healthy, timeout=30, what=f"etcd {name}")

    def curl_tls(self):
        if not self.tls:
            return []
        return ["--cacert", self.tls["ca"], "--cert", self.tls["client"],
                "--key", self.tls["client_key"]]

    def healthy(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"etcd exited {self.proc.returncode}: "
                               + self.log_path.read_text(errors="replace"))
        r = subprocess.run(["curl", "-s", "-m", "2", *self.curl_tls(),
                            f"{self.url}/health"],
                           capture_output=True, text=True)
        return '"health":"true"' in r.stdout

    def ctl(self, *args, user=None):
        cmd = ["etcdctl", "--endpoints", self.url, "--command-timeout", "5s"]
        if user:
            cmd += ["--user", user]
        r = subprocess.run(cmd + list(args), capture_output=True, text=True,
                           timeout=30 * SCALE)
        assert r.returncode == 0, f"etcdctl {args}: {r.stdout}{r.stderr}"
        return r.stdout


def secret_file(tmp_path, name, text, mode=0o600):
    p = tmp_path / name
    p.write_text(text + "\n")
    os.chmod(p, mode)
    return str(p)


def peer_fails(procs, tmp_path, metadata, env=None):
    """Run te_peer expecting it to fail; its stderr."""
    p = procs.popen([binary(*TE_PEER), "--metadata", metadata, "--name",
                     "127.0.0.1:31999", "--size", "8M", "--ready",
                     str(tmp_path / "never.ready")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    env=te_env(env))
    out, err = p.communicate(timeout=30 * SCALE)
    assert p.returncode != 0, f"te_peer started with {metadata}: {out}"
    assert not (tmp_path / "never.ready").exists()
    assert PASSWORD not in err and PASSWORD not in out, err
    for marker in SANITIZER_MARKERS:
        assert marker not in err, err
    return err


def transfer_works(procs, tmp_path, metadata, seed, env=None):
    """A peer and a client over this metadata; the client reads the
    peer's pattern. Returns the client, left running."""
    peer = procs.start_te_peer(tmp_path, metadata, name=f"127.0.0.1:{seed}",
                               size="8M", seed=seed, env=env)
    c = procs.start_te_client(tmp_path, metadata, "--transport", "tcp",
                              "--size", str(8 << 20), env=env)
    read_pattern(c, f"b{seed}", peer)
    return c, peer


def read_pattern(c, batch, peer):
    c.ok(f"open {peer.name}")
    st, _ = c.transfer(batch, peer.name, "read", peer.addr, 1 << 20, 4)
    assert st["completed"] == "4", st
    assert c.ok(f"check {batch} {peer.seed} {peer.addr}")["checked"] == "4"
    assert c.ok(f"destroy {batch}")["rc"] == "0"


def test_rbac_user_and_password(procs, tmp_path):
    etcd = Etcd(procs, tmp_path, "rbac")
    etcd.ctl("user", "add", f"root:{ROOT_PASSWORD}")
    etcd.ctl("user", "add", f"mc:{PASSWORD}")
    etcd.ctl("role", "add", "mc")
    etcd.ctl("role", "grant-permission", "mc", "--prefix=true", "readwrite",
             "mooncake/")
    etcd.ctl("user", "grant-role", "mc", "mc")
    etcd.ctl("user", "add", "stranger:stranger-pw")
    etcd.ctl("auth", "enable")
    root = f"root:{ROOT_PASSWORD}"

    pw = secret_file(tmp_path, "mc.pw", PASSWORD)
    good = f"etcd://{etcd.hostport}?user=mc&password_file={pw}"
    c, peer = transfer_works(procs, tmp_path, good, 31001)
    # What they published is in etcd, under the user's prefix.
    keys = etcd.ctl("get", "--prefix", "mooncake/", "--keys-only",
                    user=root)
    assert f"mooncake/rpc_meta/{peer.name}" in keys, keys

    # etcd forgets every token (auth disable + enable): the client's next
    # lookup is refused once, authenticates again and goes through.
    peer2 = procs.start_te_peer(tmp_path, good, name="127.0.0.1:31002",
                                size="8M", seed=31002)
    etcd.ctl("auth", "disable", user=root)
    etcd.ctl("auth", "enable")
    read_pattern(c, "again", peer2)

    # The same from the environment (a scheme-less list, as upstream).
    env = {"MC_ETCD_USER": "mc", "MC_ETCD_PASSWORD_FILE": pw}
    c2, _ = transfer_works(procs, tmp_path, etcd.hostport, 31003, env=env)
    assert c2.quit() == 0
    assert c.quit() == 0

    bad = secret_file(tmp_path, "bad.pw", "not-the-password")
    err = peer_fails(procs, tmp_path,
                     f"etcd://{etcd.hostport}?user=mc&password_file={bad}")
    assert "etcd authentication failed for user 'mc'" in err, err
    assert "invalid user ID or password" in err, err

    err = peer_fails(procs, tmp_path, f"etcd://{etcd.hostport}")
    assert "etcd requires authentication" in err, err
    assert "MC_ETCD_USER" in err and "password_file=" in err, err

    spw = secret_file(tmp_path, "stranger.pw", "stranger-pw")
    err = peer_fails(procs, tmp_path,
                     f"etcd://{etcd.hostport}?user=stranger&"
                     f"password_file={spw}")
    assert "etcd user 'stranger' is not allowed" in err, err
    assert "permission denied" in err, err

    open_pw = secret_file(tmp_path, "open.pw", PASSWORD, mode=0o644)
    err = peer_fails(procs, tmp_path,
                     f"etcd://{etcd.hostport}?user=mc&password_file="
                     f"{open_pw}")
    assert "too open" in err and open_pw in err, err

    err = peer_fails(procs, tmp_path, f"etcd://{etcd.hostport}?user=mc")
    assert "etcd user 'mc' has no password" in err, err

    # The password never reaches a log (it was never in a command line).
    for path in procs.logs:
        assert PASSWORD not in open(path, errors="replace").read(), path


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client one."""
    def run(*args):
        r = subprocess.run(["openssl", *args], capture_output=True,
                           text=True, cwd=d)
        assert r.returncode == 0, f"openssl {args}: {r.stderr}"

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days",
        "1", "-subj", "/CN=mctest etcd CA")
    # etcd's JSON gateway connects to its own gRPC port with the server
    # certificate, which --client-cert-auth then checks: clientAuth too.
    for name, usage, san in (("server", "serverAuth,clientAuth",
                              "IP:127.0.0.1"),
                             ("client", "clientAuth", "DNS:mc")):
        (d / f"{name}.ext").write_text(
            f"subjectAltName={san}\nextendedKeyUsage={usage}\n")
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "1",
            "-extfile", f"{name}.ext")
    return {"ca": str(d / "ca.pem"), "server": str(d / "server.pem"),
            "server_key": str(d / "server.key"),
            "client": str(d / "client.pem"),
            "client_key": str(d / "client.key")}


def test_tls_client_certificates(procs, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    tls = make_certs(certs)
    etcd = Etcd(procs, tmp_path, "tls", tls=tls)
    ca, cert, key = tls["ca"], tls["client"], tls["client_key"]

    # Scheme-less endpoints are https:// once TLS files are given (a bare
    # https:// string names the HTTP metadata service, as upstream).
    good = f"etcd://{etcd.hostport}?cacert={ca}&cert={cert}&key={key}"
    c, _ = transfer_works(procs, tmp_path, good, 32001)
    assert c.quit() == 0
    # From the environment; this etcd has no RBAC, so the user given is
    # ignored (as etcd's own client does).
    pw = secret_file(tmp_path, "mc.pw", PASSWORD)
    env = {"MC_ETCD_CACERT": ca, "MC_ETCD_CERT": cert, "MC_ETCD_KEY": key,
           "MC_ETCD_USER": "mc", "MC_ETCD_PASSWORD_FILE": pw}
    c, _ = transfer_works(procs, tmp_path, etcd.hostport, 32002, env=env)
    assert c.quit() == 0

    err = peer_fails(procs, tmp_path, f"etcd://{etcd.url}?cacert={ca}")
    assert "needs a client certificate" in err, err
    assert "cert=" in err and "MC_ETCD_CERT" in err, err

    err = peer_fails(procs, tmp_path,
                     f"etcd://{etcd.url}?cert={cert}&key={key}")
    assert "certificate is not trusted" in err and "cacert=" in err, err

    missing = str(tmp_path / "nowhere.pem")
    err = peer_fails(procs, tmp_path,
                     f"etcd://{etcd.url}?cacert={ca}&cert={missing}&"
                     f"key={key}")
    assert f"etcd client certificate (cert= / MC_ETCD_CERT) {missing}: " \
        "No such file or directory" in err, err

    err = peer_fails(procs, tmp_path,
                     f"etcd://http://{etcd.hostport}?cacert={ca}&cert={cert}&"
                     f"key={key}")
    assert "is plain HTTP but TLS files" in err, err


def test_master_checks_etcd_strings(tmp_path):
    """The master's etcd strings go through the same parser."""
    for flag, value, why in (
            ("--etcd_endpoints", "h1:2379;h2:2379?user=mc",
             "etcd user 'mc' has no password"),
            ("--ha_backend_connstring", "h1:2379?password=x",
             "etcd option 'password' is not taken"),
            ("--etcd_endpoints", "mc:secret-pw@h1:2379,mc@h2:2379",
             "a user may be given on the first endpoint only")):
        r = subprocess.run([binary(*MASTER), f"{flag}={value}",
                            "--db_path=memory", "--rpc_port=0",
                            "--metrics_port=0"],
                           capture_output=True, text=True, timeout=30,
                           cwd=tmp_path)
        assert r.returncode == 2, f"{flag}={value}: {r.stdout}{r.stderr}"
        assert why in r.stderr, r.stderr
        assert "secret-pw" not in r.stderr, r.stderr
