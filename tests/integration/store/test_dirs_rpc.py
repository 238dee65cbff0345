# SPDX-License-Identifier: Apache-2.0
"""The master's directory records and attributes (SetAttr, Mkdir, Rmdir,
Stat with dir, List with dirs, Rename of a prefix): what the mount's
mkdir, chmod, chown, utimensat and `mv dir1 dir2` stand on, durable across
a kill -9 of the master, and old databases (schemas 1 to 3) upgraded in
place."""
import sqlite3

from pool import Master, Member, Shell, cleanup_segments, eventually
from test_fs_rpc import MShell

SET_MODE, SET_UID, SET_GID, SET_MTIME = 1, 2, 4, 16


def statd(ms, key):
    r = ms.cmd(f"statd {key}")
    if not r.startswith("ok"):
        return int(r.split()[1])
    return dict(x.split("=") for x in r[2:].split())


def listd(ms, prefix, delim="/"):
    out = ms.ok(f"listd {prefix} {delim} - 0").split()
    return [e for e in out[2:]]


def test_directory_records(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    ms.ok("mkdir d/ 750 1000 100")
    assert ms.cmd("mkdir d/ 755").startswith("err -705")
    ms.ok("mkdir d/sub/ 700")
    # A directory is a record, or keys under it.
    assert statd(ms, "d") == {"dir": "1", "mode": "40750", "uid": "1000",
                              "gid": "100", "size": "0"}
    sh.ok("put imp/x 10 1")
    assert statd(ms, "imp")["dir"] == "1"
    assert statd(ms, "imp")["mode"] == "0"  # no record: no attributes
    assert statd(ms, "nothing") == -704
    # mkdir where an implicit directory or an object is: exists.
    assert ms.cmd("mkdir imp/ 755").startswith("err -705")
    assert ms.cmd("mkdir imp/x/ 755").startswith("err -705")
    # Listings: records show as prefix entries with their mode; the
    # plain List (the API's) does not show them.
    assert listd(ms, "d/") == ["d/sub/:0:/:40700"]
    assert ms.list("d/", "/")[0] == []
    assert "d/:0:/:40750" in listd(ms, "-")
    # rmdir: only an empty record.
    assert ms.cmd("rmdir d/").startswith("err -700")
    ms.ok("rmdir d/sub/")
    assert ms.cmd("rmdir d/sub/").startswith("err -704")
    sh.ok("put d/f 5 2")
    assert ms.cmd("rmdir d/").startswith("err -700")
    sh.ok("rm d/f")
    ms.ok("rmdir d/")
    assert statd(ms, "d") == -704


def test_setattr_of_objects_and_directories(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    sh.ok("put k 100 1")
    # An API object has no attributes until one is set: the rest come
    # from the request's base.
    r = ms.ok(f"setattr k obj {SET_MODE} 600 7 8 0")
    kv = dict(x.split("=") for x in r.split())
    assert kv["mode"] == "100600" and kv["uid"] == "7" and kv["gid"] == "8"
    ctime = int(kv["ctime"])
    assert ctime > 0 and int(kv["flags"]) & 4  # ctime now
    r = ms.ok(f"setattr k obj {SET_UID | SET_MTIME} 777 42 9 "
              "1577836800000000000")
    kv = dict(x.split("=") for x in r.split())
    # Only the masked fields change.
    assert kv["mode"] == "100600" and kv["uid"] == "42" and kv["gid"] == "8"
    assert kv["mtime"] == "1577836800000000000" and int(kv["flags"]) & 2
    assert int(kv["ctime"]) >= ctime
    assert ms.cmd(f"setattr nokey obj {SET_MODE} 600 0 0 0").startswith(
        "err -704")
    # A directory with keys under it gets a record at its first chmod.
    sh.ok("put imp/x 10 1")
    ms.ok(f"setattr imp/ dir {SET_MODE} 711 3 4 0")
    assert statd(ms, "imp")["mode"] == "40711"
    assert ms.cmd(f"setattr none/ dir {SET_MODE} 711 0 0 0").startswith(
        "err -704")
    # The object keeps its attributes through a rename.
    ms.ok("rename k k2")
    r = ms.ok("statd k2")
    assert "mode=100600" in r and "uid=42" in r


def test_rename_of_a_directory(procs, tmp_path, master, members):
    sh = Shell(procs, tmp_path, master)
    ms = MShell(procs, tmp_path, master)
    ms.ok("mkdir a/ 755")
    ms.ok("mkdir a/empty/ 700")
    for i in range(50):
        sh.ok(f"put a/f{i} {100 + i} {i}")
    sh.ok("put a/s/deep 7 99")
    sh.ok("put ab 3 5")  # not under a/
    ms.ok("renamedir a/ b/")
    assert statd(ms, "a") == -704
    assert statd(ms, "b")["mode"] == "40755"
    assert statd(ms, "b/empty")["mode"] == "40700"
    for i in range(50):
        sh.ok(f"check b/f{i} {100 + i} {i}")
    sh.ok("check b/s/deep 7 99")
    sh.ok("check ab 3 5")
    # The target must be empty: a record with entries refuses.
    ms.ok("mkdir c/ 755")
    sh.ok("put c/x 1 1")
    assert ms.cmd("renamedir b/ c/").startswith("err -700")
    # An empty record is replaced; a file named like the target refuses;
    # a directory cannot move under itself.
    ms.ok("mkdir e/ 755")
    ms.ok("renamedir b/ e/")
    sh.ok("check e/f3 103 3")
    assert ms.cmd("renamedir e/ ab/").startswith("err -705")
    assert ms.cmd("renamedir e/ e/in/").startswith("err -600")
    assert ms.cmd("renamedir gone/ f/").startswith("err -704")


def test_records_survive_kill_and_schema_1_upgrades(procs, tmp_path):
    m = Master(procs, tmp_path)
    mem = [Member(procs, tmp_path, m)]
    try:
        eventually(lambda: len(m.segments()) == 1, what="segment")
        sh = Shell(procs, tmp_path, m)
        ms = MShell(procs, tmp_path, m)
        ms.ok("mkdir keep/ 705 11 12")
        sh.ok("put keep/obj 64 3")
        ms.ok(f"setattr keep/obj obj {SET_MODE | SET_UID} 640 21 22 0")
        m.kill()
        m.start()
        eventually(lambda: len(m.segments()) == 1, timeout=20,
                   what="re-mounted")
        ms2 = MShell(procs, tmp_path, m)
        assert statd(ms2, "keep")["mode"] == "40705"
        r = ms2.ok("statd keep/obj")
        assert "mode=100640" in r and "uid=21" in r and "gid=22" in r
        sh.ok("check keep/obj 64 3")
        # Renamed, the attributes follow; removed, their row goes too.
        ms2.ok("rename keep/obj keep/moved")
        assert "uid=21" in ms2.ok("statd keep/moved")
        ms2.ok("rm keep/moved force")
        m.stop()
        assert sqlite3.connect(m.db).execute(
            "SELECT count(*) FROM attrs").fetchone()[0] == 0
    finally:
        cleanup_segments([x.port for x in mem])

    # Older databases open, keep their objects and take attributes:
    # schema 1 (no attributes, no dirs table) schema 2 (attributes in
    # columns of objects, moved to a table of their own by schema 3) and
    # schema 3 (no group ids, a column of objects since schema 4).
    common = (
        "CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER);"
        "CREATE TABLE segments(id BLOB PRIMARY KEY, name TEXT,"
        " endpoint TEXT, protocol TEXT, host_id TEXT, size INTEGER)"
        " WITHOUT ROWID;"
        "CREATE TABLE orphans(id INTEGER PRIMARY KEY, size INTEGER,"
        " replicas BLOB);")
    v1 = (common + "INSERT INTO meta VALUES('schema', 1);"
          "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER,"
          " flags INTEGER, soft_pin_until INTEGER, mtime INTEGER,"
          " replicas BLOB) WITHOUT ROWID;"
          "INSERT INTO objects VALUES(x'656d707479', 0, 0, 0,"
          " 1700000000000, x'');")
    v2 = (common + "INSERT INTO meta VALUES('schema', 2);"
          "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER,"
          " flags INTEGER, soft_pin_until INTEGER, mtime INTEGER,"
          " replicas BLOB, mode INTEGER, uid INTEGER, gid INTEGER,"
          " aflags INTEGER, atime INTEGER, amtime INTEGER, actime INTEGER)"
          " WITHOUT ROWID;"
          "CREATE TABLE dirs(path BLOB PRIMARY KEY, mode INTEGER,"
          " uid INTEGER, gid INTEGER, aflags INTEGER, atime INTEGER,"
          " amtime INTEGER, actime INTEGER) WITHOUT ROWID;"
          "INSERT INTO objects VALUES(x'656d707479', 0, 0, 0,"
          " 1700000000000, x'', NULL, NULL, NULL, NULL, NULL, NULL, NULL);"
          "INSERT INTO objects VALUES(x'66', 0, 0, 0, 1700000000000, x'',"
          " 33216, 7, 8, 0, 1, 2, 3);"  # f: 0100700 7:8
          "INSERT INTO dirs VALUES(x'642f', 16877, 0, 0, 0, 1, 2, 3);")
    v3 = (common + "INSERT INTO meta VALUES('schema', 3);"
          "CREATE TABLE objects(key BLOB PRIMARY KEY, size INTEGER,"
          " flags INTEGER, soft_pin_until INTEGER, mtime INTEGER,"
          " replicas BLOB) WITHOUT ROWID;"
          "CREATE TABLE attrs(key BLOB PRIMARY KEY, mode INTEGER,"
          " uid INTEGER, gid INTEGER, aflags INTEGER, atime INTEGER,"
          " amtime INTEGER, actime INTEGER) WITHOUT ROWID;"
          "CREATE TABLE dirs(path BLOB PRIMARY KEY, mode INTEGER,"
          " uid INTEGER, gid INTEGER, aflags INTEGER, atime INTEGER,"
          " amtime INTEGER, actime INTEGER) WITHOUT ROWID;"
          "INSERT INTO objects VALUES(x'656d707479', 0, 0, 0,"
          " 1700000000000, x'');")
    for n, script in ((1, v1), (2, v2), (3, v3)):
        old = tmp_path / f"v{n}.db"
        db = sqlite3.connect(old)
        db.executescript(script)
        db.commit()
        db.close()
        m2 = Master(procs, tmp_path, db=old, name=f"v{n}")
        ms3 = MShell(procs, tmp_path, m2)
        assert "size=0" in ms3.ok("stat empty")
        if n == 2:
            r = ms3.ok("statd f")
            assert "mode=100700" in r and "uid=7" in r and "gid=8" in r
            assert statd(ms3, "d")["mode"] == "40755"
        assert "mode=100644" in ms3.ok(
            f"setattr empty obj {SET_MODE} 644 0 0 0")
        ms3.ok("mkdir nd/ 755")
        m2.stop()
        c = sqlite3.connect(old)
        assert c.execute(
            "SELECT v FROM meta WHERE k='schema'").fetchone()[0] == 5
        assert c.execute("SELECT mode FROM attrs WHERE key=x'656d707479'"
                         ).fetchone()[0] == 0o100644
        cols = [r[1] for r in c.execute("PRAGMA table_info(objects)")]
        assert cols == ["key", "size", "flags", "soft_pin_until", "mtime",
                        "replicas", "grp"]
        c.close()
