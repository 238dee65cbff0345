# SPDX-License-Identifier: Apache-2.0
"""The master's admin pages that name keys (/query_key, /batch_query_keys,
/get_all_keys; docs/operations.md "Admin HTTP") with keys that are not
plain text: bytes that are not UTF-8, control characters, quotes,
backslashes, DEL, commas. Every answer is valid JSON and no key is left
out: a key that is not UTF-8 is answered %-escaped in data_escaped."""
import json
import urllib.parse

from mctest import request

BUF = 16 << 20
# Each is stored; the batch asks for all of them at once.
KEYS = [b"k/\xff\xfe", b"k/ok", b'k/"q"', b"k/back\\slash", b"k/\x7f",
        b"k/\x01ctl\x1f\n", b"k/%FF", b"k/\xc3\x28", b"k/\xed\xa0\x80",
        b"k/caf\xc3\xa9"]


def utf8(k):
    try:
        return k.decode()
    except UnicodeDecodeError:
        return None


def get(master, path):
    st, body, _ = request(master.admin_port, "GET", path)
    return st, body


def test_keys_not_utf8_in_admin_json(stores, master, members):
    s = stores()
    assert s.setup("127.0.0.1", master.metadata, 0, BUF, "tcp", "",
                   master.addr) == 0
    for i, k in enumerate(KEYS):
        assert s.put(k, b"v" * (i + 1)) == 0, k
    q = urllib.parse.quote_from_bytes
    for i, k in enumerate(KEYS):
        st, body = get(master, "/query_key?key=" + q(k, safe="/"))
        j = json.loads(body)
        assert st == 200 and j["success"], (k, body)
        assert [r["size_"] for r in j["data"]] == [i + 1], (k, body)
    st, body = get(master, "/batch_query_keys?keys=" +
                   ",".join(q(k, safe="/") for k in KEYS + [b"k/\xffnope"]))
    assert st == 200, body
    j = json.loads(body)  # valid JSON: it raises otherwise
    data, esc = j["data"], j.get("data_escaped", {})
    seen = {}
    for name, v in data.items():
        seen[name.encode()] = v
    for name, v in esc.items():
        k = urllib.parse.unquote_to_bytes(name)
        assert utf8(k) is None and k not in seen, name
        seen[k] = v
    assert set(seen) == set(KEYS) | {b"k/\xffnope"}, sorted(seen)
    for i, k in enumerate(KEYS):
        assert seen[k]["ok"] and \
            [r["size_"] for r in seen[k]["values"]] == [i + 1], (k, seen[k])
        # UTF-8 keys as upstream answers them, the others apart.
        assert (utf8(k) in data) == (utf8(k) is not None), k
    assert seen[b"k/\xffnope"] == {"ok": False, "error_code": -704}
    # Only UTF-8 keys: upstream's shape, no data_escaped.
    st, body = get(master, "/batch_query_keys?keys=k/ok,k/%25FF")
    assert st == 200 and set(json.loads(body)) == {"success", "data"}, body
    # The listing: bytes as they are; with ?escaped=1 one key a line,
    # even the one holding a newline.
    st, body = get(master, "/get_all_keys?escaped=1")
    assert st == 200, body
    lines = body.decode("ascii").split("\n")
    assert lines[-1] == "", lines
    assert sorted(urllib.parse.unquote_to_bytes(x) for x in lines[:-1]) == \
        sorted(KEYS)
    st, body = get(master, "/get_all_keys")
    assert st == 200 and all(k + b"\n" in body for k in KEYS), body
    assert get(master, "/get_all_keys?escaped=yes")[0] == 400
