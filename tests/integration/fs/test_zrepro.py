import os, time
import test_pjdfstest as P

def test_repro(master, mounts, tmp_path):
    suite = P.build_suite(P.suite_source(), str(tmp_path / "pjdfstest"))
    master.stop()
    master.start("--max_key_length", "8192")
    m = mounts(seg="3GiB", opts="allow_other,staging_limit=3GiB")
    files = os.environ.get("REPRO_FILES", "truncate/00.t,utimensat/00.t").split(",")
    rounds = int(os.environ.get("REPRO_ROUNDS", "20"))
    bad = []
    for r in range(rounds):
        for f in files:
            work = m.kv / "pjd" / f"r{r}" / f
            work.mkdir(parents=True)
            tr = tmp_path / "trace"
            cases, plan = P.run_file(os.path.join(suite, "tests", f), str(work), str(tr))
            for c, (ok, detail, why) in cases.items():
                if not ok and "rmdir" in detail and "ENOENT" in detail:
                    bad.append((r, f, c, detail))
                    (tmp_path / f"bad-{r}-{f.replace('/','_')}").write_text(tr.read_text())
                    print("BAD", r, f, c, detail, time.time(), flush=True)
    print(m.log()[-5000:])
    assert not bad, bad
