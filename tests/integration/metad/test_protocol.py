# SPDX-License-Identifier: Apache-2.0
"""Every row of the metadata protocol, through curl and through the C
client, against a real mooncake_metad."""
import urllib.parse

import pytest

from mctest import cli, curl

KEYS = [
    "mooncake/rpc_meta/10.0.0.2:12345",
    "mooncake/ram/node-1:15001",
    "weird%key/with:colons%2Fand%percent",
    "spaces and+plus",
    "k",
]


def q(key):
    return urllib.parse.quote(key, safe="")


@pytest.mark.parametrize("key", KEYS)
def test_curl_rows(metad, key):
    url = f"{metad.url}?key={q(key)}"
    assert curl(url) == (404, b"metadata not found")
    body = b'{"ip_or_host_name":"10.0.0.2","rpc_port":12345}'
    code, out = curl("-X", "PUT", "-H", "Content-Type: application/json",
                     "--data-binary", body, url)
    assert (code, out) == (200, b"metadata updated")
    code, out = curl("-D", "-", url)
    assert code == 200
    assert b"Content-Type: application/json" in out
    assert out.endswith(body)
    # Same body again: accepted even for rpc_meta keys.
    code, out = curl("-X", "PUT", "--data-binary", body, url)
    assert code == 200
    code, out = curl("-X", "PUT", "--data-binary", b'{"other":1}', url)
    if "rpc_meta" in key:
        assert (code, out) == (400, b"Duplicate rpc_meta key not allowed")
        assert curl(url) == (200, body)
    else:
        assert (code, out) == (200, b"metadata updated")
        assert curl(url) == (200, b'{"other":1}')
    assert curl("-X", "DELETE", url) == (200, b"metadata deleted")
    assert curl("-X", "DELETE", url) == (404, b"metadata not found")
    assert curl(url) == (404, b"metadata not found")


def test_curl_missing_key_and_health(metad):
    base = metad.url
    assert curl(base) == (400, b"Missing key parameter")
    assert curl(base + "?key=") == (400, b"Missing key parameter")
    assert curl(base + "?other=1")[0] == 400
    assert curl("-X", "PUT", "--data", "{}", base)[0] == 400
    assert curl("-X", "DELETE", base)[0] == 400
    assert curl(base.replace("/metadata", "/health")) == (200, b"OK")
    assert curl(base.replace("/metadata", "/nothing"))[0] == 404


def test_curl_escaping_matches_client(metad):
    """curl_easy_escape (the C client, like upstream's) and Python's
    quote() reach the same entry."""
    for key in KEYS:
        r = cli(metad.url, "put", key, '{"via":"c"}')
        assert r.returncode == 0, r.stderr
        assert curl(f"{metad.url}?key={q(key)}") == (200, b'{"via":"c"}')


@pytest.mark.parametrize("key", KEYS)
def test_c_client_rows(metad, key):
    r = cli(metad.url, "get", key)
    assert r.returncode == 3
    assert b"404" in r.stderr and metad.url.encode() in r.stderr
    assert cli(metad.url, "put", key, '{"a":1}').returncode == 0
    r = cli(metad.url, "get", key)
    assert (r.returncode, r.stdout) == (0, b'{"a":1}')
    assert cli(metad.url, "put", key, '{"a":1}').returncode == 0
    r = cli(metad.url, "put", key, '{"a":2}')
    if "rpc_meta" in key:
        assert r.returncode == 4, r.stderr
        assert b"400" in r.stderr and b"Duplicate" in r.stderr
    else:
        assert r.returncode == 0
    assert cli(metad.url, "del", key).returncode == 0
    r = cli(metad.url, "del", key)
    assert r.returncode == 3 and b"404" in r.stderr


def test_c_client_names_url_when_down(procs, tmp_path):
    d = procs.start_metad(tmp_path)
    url = d.url
    d.stop()
    r = cli(url, "get", "x")
    assert r.returncode == 1
    assert url.encode() in r.stderr


def test_head_returns_headers_only(metad):
    url = f"{metad.url}?key=h"
    assert cli(metad.url, "put", "h", '{"z":1}').returncode == 0
    code, out = curl("-I", url)
    assert code == 200
    assert b"Content-Length: 7" in out
