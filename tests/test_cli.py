"""tests/test_cli.py — issue 16 items 1-4: the `stepprof` command (build/stepprof).
`run` passes the program's stdin, stdout, stderr, exit status and signals
through, has a flag for every key of schedule/config_keys.h and ends with the
table, findings and file list; `report` covers a directory; `diff` of two runs
of one program, one kernel made slower, puts that kernel first; `merge` reads
gzipped traces and does not hold a trace in memory."""
import glob
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from harness import BUILD, FAKE_DIR, ROOT, load, prog, run

CMD = os.path.join(BUILD, "stepprof")
TRAIN = ["--marker", "nvtx:train_step", "--active", "2"]


def sp(*args, **kw):
    kw.setdefault("env", {})
    kw["env"].setdefault("RANK", None)
    return run([CMD, *args], preload=False, **kw)


def test_run_passes_output_stdin_and_exit_status():
    r = sp("run", "--", prog("exitcode"))
    assert r.returncode == 7, r.stderr
    assert r.stdout == "exitcode: hello from stdout\n"
    assert "exitcode: hello from stderr\n" in r.other_stderr
    with tempfile.TemporaryFile("w+") as f:
        f.write("line one\nline two\n")
        f.seek(0)
        r = sp("run", "--", "cat", stdin=f)
    assert r.returncode == 0 and r.stdout == "line one\nline two\n"
    r = sp("run", "--", "/nonexistent/prog")
    assert r.returncode == 127 and "stepprof: run: cannot start /nonexistent/prog" in r.stderr


def test_run_forwards_signals_and_reraises_death():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF_")}
    env["LD_LIBRARY_PATH"] = FAKE_DIR
    env["LD_PRELOAD"] = os.environ.get("SP_PRELOAD_FIRST", "")   # a sanitizer runtime (make test-asan)
    # The program traps USR1 (forwarded) then dies of TERM (forwarded, re-raised by stepprof).
    script = "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done"
    p = subprocess.Popen([CMD, "run", "--", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=tempfile.mkdtemp(prefix="sp-test-"))
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGUSR1)
    assert p.stdout.readline() == "got-usr1\n"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM, (p.returncode, err)


def test_run_flags_cover_every_key_and_end_report():
    keys = re.findall(r'X\(\w+, "([a-z_.]+)"', open(os.path.join(ROOT, "schedule", "config_keys.h")).read())
    h = sp("run", "--help", fake=False)
    assert h.returncode == 0 and "examples:" in h.stdout
    for k in keys:
        assert "--" + k.replace(".", "-").replace("_", "-") in h.stdout, k
    r = sp("run", *TRAIN, "--table-row-limit", "5", "--use-gzip", "-o", "out", "--", prog("train"), "4")
    assert r.returncode == 0 and r.stdout.endswith("done\n"), r.stderr
    out = os.path.join(r.cwd, "out")
    files = sorted(os.listdir(out))
    trace = [f for f in files if f.endswith(".pt.trace.json.gz")]
    assert len(trace) == 1, files
    assert load(os.path.join(out, trace[0]))["stepprof_steps"] == [1, 2]
    err = r.stderr
    assert "stepprof: key averages of the last cycle" in err and "Self CUDA time total" in err, err
    assert re.search(r"stepprof: findings \(\d+\)\n  1\. \[gpu_idle\]", err), err
    for f in files:
        assert f"\n  {f}\n" in err
    assert f"open: tensorboard --logdir out" in err
    # A bad value gets the library's one line; the program still runs.
    r = sp("run", *TRAIN, "--wait", "x", "--", prog("train"), "2")
    assert r.returncode == 0 and r.stdout.endswith("done\n")
    assert any(l.startswith('stepprof: PROF_WAIT="x": expected an integer') for l in r.sp_lines), r.sp_lines
    r = sp("run", "--wiat", "1", "--", "true")
    assert r.returncode == 2 and "stepprof: run: unknown option --wiat (did you mean --wait?)" in r.stderr


def test_report_directory():
    r = sp("run", *TRAIN, "--repeat", "2", "-o", "out", "--", prog("train"), "8")
    out = os.path.join(r.cwd, "out")
    rep = sp("report", out, "--summary")
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.count("==> ") == 2 and rep.stdout.count("stepprof step summary") == 2, rep.stdout
    assert sp("report", out, "--memory").returncode == 1   # recorded without --profile-memory
    m = sp("run", *TRAIN, "--profile-memory", "-o", "mem", "--", prog("train"), "4")
    mem = sp("report", os.path.join(m.cwd, "mem"), "--memory")
    assert mem.returncode == 0 and mem.stdout, mem.stderr
    with open(glob.glob(os.path.join(m.cwd, "mem", "*.memory.txt"))[0]) as f:
        assert mem.stdout == f.read()
    bad = sp("report", os.path.join(r.cwd, "nothing"))
    assert bad.returncode == 1 and bad.stderr.startswith("stepprof: report: ") and "no such file" in bad.stderr


def test_diff_puts_slowed_kernel_first():
    a = sp("run", *TRAIN, "-o", "a", "--", prog("train"), "4")
    b = sp("run", *TRAIN, "-o", "b", "--", prog("train"), "4", env={"FAKECUDA_KERNEL_NS_loss_kernel": "500000"})
    da, db = os.path.join(a.cwd, "a"), os.path.join(b.cwd, "b")
    text = sp("diff", da, db)
    assert text.returncode == 0, text.stderr
    rows = text.stdout.split("By impact")[1].splitlines()[2:]
    ops = [l for l in rows if l.startswith("operator")]
    assert ops and rows.index(ops[0]) > 0 and any("cudaStreamSynchronize" in l for l in ops), text.stdout
    assert rows[0].startswith("kernel") and "loss_kernel" in rows[0], text.stdout
    j = sp("diff", da, db, "--json")
    d = json.loads(j.stdout)
    first = d["rows"][0]
    assert first["kind"] == "kernel" and first["name"].startswith("loss_kernel"), first
    assert abs(first["delta_us"] - 498.0) < 1.0 and first["a_calls_per_step"] == first["b_calls_per_step"] == 1
    busy = {t["metric"]: t for t in d["totals"]}["gpu_busy_us"]
    assert busy["delta"] > 490, busy
    assert sp("diff", da).returncode == 2


def test_merge_gzip_streams():
    r = sp("run", *TRAIN, "--use-gzip", "-o", "out", "--", prog("train"), "4")
    out = os.path.join(r.cwd, "out")
    merged = os.path.join(r.cwd, "m.pt.trace.json.gz")
    m = sp("merge", out, "-o", merged)
    assert m.returncode == 0, m.stderr
    with gzip.open(merged, "rt") as f:
        doc = json.load(f)
    src = load(os.path.join(out, [f for f in os.listdir(out) if f.endswith(".pt.trace.json.gz")][0]))
    assert sum(e.get("ph") == "X" for e in doc["traceEvents"]) == sum(e.get("ph") == "X" for e in src["traceEvents"])
    # Memory: merging a trace 20x larger than before must not need 20x the memory.
    big = os.path.join(r.cwd, "big")
    os.mkdir(big)
    with open(os.path.join(big, "w.1.pt.trace.json"), "w") as f:
        f.write('{"schemaVersion": 1, "baseTimeNanoseconds": 1000, "traceEvents": [\n')
        ev = '{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d.5, "dur": 1.0, "args": {}}'
        f.write(",\n".join(ev % (i % 1000, i) for i in range(400000)))
        f.write("\n]}\n")
    probe = ("import resource,subprocess,sys;subprocess.run(sys.argv[1:],check=True);"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    rss = int(subprocess.run([sys.executable, "-c", probe, CMD, "merge", big, "-o", os.path.join(r.cwd, "b.json")],
                             capture_output=True, text=True, check=True).stdout)
    size_kb = os.path.getsize(os.path.join(big, "w.1.pt.trace.json")) // 1024
    assert rss < 60 * 1024 and size_kb > 35 * 1024, (rss, size_kb)   # the whole file decoded would be ~10x its size


def load_cmd():
    """build/stepprof as a module (its functions without running it)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("stepprof_cmd", CMD)
    spec = importlib.util.spec_from_loader("stepprof_cmd", loader)
    cmd = importlib.util.module_from_spec(spec)
    sys.path.insert(0, BUILD)   # stepprof_keys.py and stepprof_trace.py beside it
    try:
        loader.exec_module(cmd)
    finally:
        sys.path.remove(BUILD)
    return cmd


def test_run_end_report_ignores_files_other_ranks_are_writing():
    """Under mpirun every rank's `stepprof run` lists the shared output directory for its end report
    while the other ranks write theirs: a `NAME.tmp.PID` being written is no file of this run, and
    one renamed between the listing and its stat must not end the command (it once raised
    FileNotFoundError, and the rank exited 1 instead of the program's 0)."""
    cmd = load_cmd()
    with tempfile.TemporaryDirectory() as out:
        since = time.time() - 1
        ns = int(time.time() * 1e9)   # names say when the file was written: <worker>.<ns>
        for name in (f"rank0_vm_11.{ns}.pt.trace.json", f"rank1_vm_12.{ns}.pt.trace.json.tmp.12",
                     f"rank1_vm_12.{ns}.summary.txt"):
            open(os.path.join(out, name), "w").close()
        assert cmd.own_files(out, since, 11, "vm") == [f"rank0_vm_11.{ns}.pt.trace.json"]
        others = [f"rank0_vm_11.{ns}.pt.trace.json", f"rank1_vm_12.{ns}.summary.txt"]
        assert cmd.own_files(out, since, 99, "vm") == others
        listed = os.listdir(out) + [f"rank2_vm_13.{ns}.pt.trace.json"]   # gone (renamed) before its stat
        real = os.listdir
        os.listdir = lambda path: listed
        try:
            assert cmd.own_files(out, since, 99, "vm") == others
        finally:
            os.listdir = real


def test_run_end_report_keeps_to_its_own_host():
    """Ranks in containers (one pid namespace each) on several hosts share an output directory:
    another host's rank can run the program under the same pid. Its files are not this run's: the
    end report once listed them and showed the highest rank's trace as "the last cycle"."""
    cmd = load_cmd()
    with tempfile.TemporaryDirectory() as out:
        since = time.time() - 1
        ns = int(time.time() * 1e9)   # names say when the file was written: <worker>.<ns>
        for name in (f"rank0_node-a.x_7.{ns}.pt.trace.json", f"rank0_node-a.x_7.{ns}.summary.txt",
                     f"rank1_node-b.x_7.{ns}.pt.trace.json", f"rank1_node-b.x_7.{ns}.summary.txt",
                     f"rank2_node-a.x_70.{ns}.pt.trace.json"):
            open(os.path.join(out, name), "w").close()
        assert cmd.own_files(out, since, 7, "node-a.x") == [f"rank0_node-a.x_7.{ns}.pt.trace.json",
                                                           f"rank0_node-a.x_7.{ns}.summary.txt"]
        # Without a rank the worker is <host>_<pid>; a host name's odd characters are '_' in it.
        open(os.path.join(out, f"my_host_7.{ns}.pt.trace.json"), "w").close()
        assert cmd.own_files(out, since, 7, "my host") == [f"my_host_7.{ns}.pt.trace.json"]


def test_run_end_report_dates_its_files_by_their_names():
    """On a shared file system the server's clock stamps the mtime: one a few seconds behind once
    made the end report say "no trace was written"; one ahead (or a container restarted within the
    second, same host and pid) counted the previous run's files. The name's <ns> is this host's."""
    cmd = load_cmd()
    with tempfile.TemporaryDirectory() as out:
        since = time.time() - 1
        now_ns, old_ns = int((since + 1) * 1e9), int((since - 60) * 1e9)
        ours, before = f"rank0_vm_7.{now_ns}.pt.trace.json", f"rank0_vm_7.{old_ns}.pt.trace.json"
        for name, mtime in ((ours, since - 5), (before, since + 5)):
            open(os.path.join(out, name), "w").close()
            os.utime(os.path.join(out, name), (mtime, mtime))
        assert cmd.own_files(out, since, 7, "vm") == [ours]
