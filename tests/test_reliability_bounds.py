"""tests/test_reliability_bounds.py — issue 14 items 2, 3, 5, 6, 9: the test
runner fails a test skipped for a missing tool and leaves no temporaries;
config files are read only when regular, small and shallow; summary.json
stays JSON whatever bytes a name holds; NVTX ranges opened before the first
CUDA call are recorded; every byte kept (CUPTI's records included) is bounded
by the settings, with exact drop counts."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import ROOT, assert_valid, load, prog, run


# ---- item 9: the runner ----------------------------------------------------------------------

_FAKE_TESTS = '''
import os, tempfile
from harness import Skip, skip_under_sanitizer
def test_a_passes():
    d = tempfile.mkdtemp(prefix="sp-test-")
    open(os.path.join(d, "f"), "w").write("x")
def test_b_missing_tool():
    raise Skip("nvcc is not installed")
def test_c_sanitizer():
    skip_under_sanitizer("measures RSS")
def test_d_fails():
    tempfile.mkdtemp(prefix="sp-test-")
    assert False, "boom"
'''


def _runner(tmp, env, *filters):
    """Run a copy of tests/run_tests.py (and harness.py) over a test file of our own."""
    t = os.path.join(tmp, "tests")
    os.makedirs(os.path.join(t, "lib"))
    shutil.copy(os.path.join(ROOT, "tests", "run_tests.py"), t)
    shutil.copy(os.path.join(ROOT, "tests", "lib", "harness.py"), os.path.join(t, "lib"))
    with open(os.path.join(t, "test_fake.py"), "w") as f:
        f.write(_FAKE_TESTS)
    scratch = os.path.join(tmp, "scratch")
    os.makedirs(scratch)
    e = {k: v for k, v in os.environ.items() if k != "SP_PRELOAD_FIRST"}   # a sanitizer run is ours to set
    e.update(TMPDIR=scratch, **env)
    p = subprocess.run([sys.executable, os.path.join(t, "run_tests.py")] + list(filters),
                       env=e, capture_output=True, text=True, timeout=60)
    return p, scratch


def test_runner_fails_a_test_skipped_for_a_missing_tool():
    tmp = tempfile.mkdtemp(prefix="sp-runner-")
    p, scratch = _runner(tmp, {}, "test_a", "test_b")
    assert p.returncode != 0, p.stdout
    assert "FAIL test_fake:test_b_missing_tool" in p.stdout and "install step" in p.stdout, p.stdout
    assert "1 passed, 1 failed, 0 skipped" in p.stdout, p.stdout
    assert os.listdir(scratch) == [], ("temporaries left behind", os.listdir(scratch))


def test_runner_skips_only_the_sanitizer_tests_by_name():
    tmp = tempfile.mkdtemp(prefix="sp-runner-")
    p, scratch = _runner(tmp, {"SP_PRELOAD_FIRST": "/nonexistent/libasan.so"}, "test_a", "test_c")
    assert p.returncode == 0, p.stdout
    assert "SKIP test_fake:test_c_sanitizer" in p.stdout and "skipped: test_fake:test_c_sanitizer" in p.stdout
    assert "1 passed, 0 failed, 1 skipped" in p.stdout, p.stdout
    p, _ = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {}, "test_c")
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout   # no sanitizer: the test runs
    assert os.listdir(scratch) == [], os.listdir(scratch)


def test_runner_keeps_failing_tests_temporaries_only_when_asked():
    p, scratch = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {}, "test_a", "test_d")
    assert p.returncode != 0 and os.listdir(scratch) == [], (p.stdout, os.listdir(scratch))
    p, scratch = _runner(tempfile.mkdtemp(prefix="sp-runner-"), {"SP_KEEP_FAILED": "1"}, "test_a", "test_d")
    assert p.returncode != 0
    (root,) = os.listdir(scratch)
    kept = os.listdir(os.path.join(scratch, root))
    assert len(kept) == 1, kept
    assert "kept the temporary directories of failing tests" in p.stdout, p.stdout
    assert f"test_fake:test_d_fails -> {os.path.join(scratch, root, kept[0])}" in p.stdout, p.stdout


# ---- item 3: config files are read only if regular, small and shallow ---------------------------

def _one_config_error(r, bare, needles):
    assert (r.returncode, r.stdout, r.other_stderr) == (bare.returncode, bare.stdout, bare.stderr), \
        (r.returncode, r.stdout, r.stderr)
    assert len(r.sp_lines) == 1 and "disabled" in r.sp_lines[0], r.sp_lines
    assert all(n in r.sp_lines[0] for n in needles), (r.sp_lines[0], needles)
    assert not os.path.exists(r.outdir), os.listdir(r.outdir)


def _piped(data):
    """A pipe's read end holding data (then end of file), for a target's stdin."""
    rfd, wfd = os.pipe()
    os.write(wfd, data)
    os.close(wfd)
    return os.fdopen(rfd, "rb")


def test_config_fifo_is_refused_not_waited_on():
    d = tempfile.mkdtemp(prefix="sp-bounds-")
    fifo = os.path.join(d, "cfg.fifo")
    os.mkfifo(fifo)
    bare = run([prog("exitcode")], preload=False)
    # Named by PROF_CONFIG, and as ./profiling.yaml in the working directory.
    r = run([prog("exitcode")], env={"PROF_CONFIG": fifo}, timeout=60)
    _one_config_error(r, bare, [fifo, "not a regular file"])
    os.mkfifo(os.path.join(d, "profiling.yaml"))
    r = run([prog("exitcode")], cwd=d, timeout=60)
    _one_config_error(r, bare, ["profiling.yaml", "not a regular file"])


def test_config_dev_stdin_leaves_the_programs_input_alone():
    data = b"profiling:\n  active: 1\n" + b"x" * 3000
    with _piped(data) as f:
        bare = run([prog("rel_bounds"), "stdin"], preload=False, stdin=f)
    assert bare.stdout.startswith(f"read {len(data)} bytes: profiling:"), bare.stdout
    with _piped(data) as f:
        r = run([prog("rel_bounds"), "stdin"], env={"PROF_CONFIG": "/dev/stdin"}, stdin=f, timeout=60)
    _one_config_error(r, bare, ["/dev/stdin", "not a regular file"])


def test_config_directory_and_oversized_file_are_refused():
    d = tempfile.mkdtemp(prefix="sp-bounds-")
    bare = run([prog("exitcode")], preload=False)
    r = run([prog("exitcode")], env={"PROF_CONFIG": d})
    _one_config_error(r, bare, [d, "directory"])
    big = os.path.join(d, "big.yaml")
    with open(big, "w") as f:   # valid YAML, 5 MiB: a config this big is not one
        f.write("profiling:\n  enabled: true\n")
        line = "# " + "c" * 77 + "\n"
        f.write(line * (5 * 2**20 // len(line)))
    r = run([prog("exitcode")], env={"PROF_CONFIG": big})
    _one_config_error(r, bare, [big, "bytes"])


def test_config_deep_nesting_stops_the_parse():
    d = tempfile.mkdtemp(prefix="sp-bounds-")
    deep = os.path.join(d, "deep.yaml")
    depth = 200000   # 400 KB of flow sequences: libyaml alone takes minutes on it
    with open(deep, "w") as f:
        f.write("profiling:\n  active: 1\nmodel: " + "[" * depth + "]" * depth + "\n")
    bare = run([prog("exitcode")], preload=False)
    r = run([prog("exitcode")], env={"PROF_CONFIG": deep}, timeout=60)
    _one_config_error(r, bare, [deep + ":3:", "nested deeper than 64 levels"])
    # A real config nests a few levels: still read.
    ok = os.path.join(d, "ok.yaml")
    with open(ok, "w") as f:
        f.write("profiling:\n  enabled: true\nmodel: " + "[" * 20 + "]" * 20 + "\n")
    r = run([prog("exitcode")], env={"PROF_CONFIG": ok})
    assert r.returncode == 7 and not any("disabled" in l for l in r.sp_lines) and os.path.isdir(r.outdir), r.sp_lines


# ---- item 6: summary.json is JSON whatever bytes a name holds ------------------------------------

def test_summary_json_is_valid_with_invalid_utf8_names():
    r = run([prog("rel_bounds"), "names", "3"])
    assert r.returncode == 0 and r.stdout == "names done\n", (r.returncode, r.stdout, r.stderr)
    found = [f for f in r.files() if f.endswith(".summary.json.txt")]
    assert len(found) == 1, r.files()
    with open(os.path.join(r.outdir, found[0]), "rb") as f:
        raw = f.read()
    s = json.loads(raw.decode("utf-8"))   # strict: raw 0xff bytes fail here
    ranges = {x["name"]: x["count"] for x in s["ranges"]}
    assert ranges == {"step\ufffd\ufffd": 3}, ranges
    # The same replacement as the trace's, so names match across the two files.
    trace = json.loads(open(r.trace(), "rb").read().decode("utf-8"))
    names = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}
    assert "step\ufffd\ufffd" in names, names


# ---- item 5: NVTX ranges opened before the first CUDA call --------------------------------------

def test_nvtx_ranges_opened_before_the_first_cuda_call_are_in_a_whole_run_trace():
    bare = run([prog("rel_bounds"), "early"], preload=False)
    r = run([prog("rel_bounds"), "early"])
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) == (0, "early done\n"), r.stderr
    assert_valid(r.trace())
    t = load(r.trace())
    ranges = {e["name"]: e for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e.get("ph") == "X"}
    assert {"early_outer", "early_started"} <= set(ranges), sorted(ranges)
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"]
    assert len(kernels) == 4, len(kernels)
    outer = ranges["early_outer"]
    for k in kernels:   # the early ranges enclose the work they wrapped
        for name in ("early_outer", "early_started"):
            e = ranges[name]
            assert e["ts"] <= k["ts"] and k["ts"] + k["dur"] <= e["ts"] + e["dur"], (name, e, k)
    # Their start is when they were opened, 20 ms before stepprof started (its clock converted).
    first = min(k["ts"] for k in kernels)
    assert all(first - ranges[n]["ts"] >= 19000 for n in ("early_outer", "early_started")), \
        (first, outer["ts"], ranges["early_started"]["ts"])
    # A push/pop range's nesting holds: `inner` (opened after the first CUDA call) sits inside.
    assert outer["ts"] <= ranges["inner"]["ts"] and ranges["inner"]["ts"] + ranges["inner"]["dur"] <= outer["ts"] + outer["dur"]


def test_nvtx_ranges_and_marks_completed_before_the_first_cuda_call_are_in_a_whole_run_trace():
    bare = run([prog("rel_bounds"), "closed"], preload=False)
    r = run([prog("rel_bounds"), "closed"])
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) == (0, "closed done\n"), r.stderr
    assert_valid(r.trace())
    t = load(r.trace())
    ann = {e["name"]: e for e in t["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"pre_outer", "pre_inner", "pre_thread", "pre_mark"} <= set(ann), sorted(ann)
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"]
    assert len(kernels) == 4, len(kernels)
    first = min(k["ts"] for k in kernels)
    outer, inner, mark, other = ann["pre_outer"], ann["pre_inner"], ann["pre_mark"], ann["pre_thread"]
    assert outer["ph"] == inner["ph"] == other["ph"] == "X" and mark["ph"] == "i", (outer, inner, mark)
    # Nesting: inner strictly inside outer (1 ms either side), the mark inside inner.
    assert outer["ts"] + 900 <= inner["ts"] and inner["ts"] + inner["dur"] + 900 <= outer["ts"] + outer["dur"], (outer, inner)
    assert inner["ts"] <= mark["ts"] <= inner["ts"] + inner["dur"], (inner, mark)
    assert 900 <= inner["dur"] and 2700 <= outer["dur"], (inner, outer)
    # All ended at least 10 ms before the first CUDA call's record (the clock converted, not "now").
    for e in (outer, inner, other):
        assert first - (e["ts"] + e["dur"]) >= 9000, (first, e)
    assert outer["ts"] + outer["dur"] <= other["ts"], (outer, other)
    # Threads: the main thread's ranges on the launching thread's lane, the worker's on its own.
    assert outer["tid"] == inner["tid"] == mark["tid"] == kernels[0]["tid"], (outer, inner, mark, kernels[0])
    assert other["tid"] != outer["tid"], (other, outer)
    assert t["stepprof_dropped_events"] == 0


def test_nvtx_records_completed_before_the_first_cuda_call_are_bounded_with_exact_drops():
    n = 3000   # the ring holds 1024; 3000 marks + 3 ranges + 1 mark are offered
    r = run([prog("rel_bounds"), "closed", str(n)])
    assert (r.returncode, r.stdout) == (0, "closed done\n"), r.stderr
    t = load(r.trace())
    ann = [e for e in t["traceEvents"] if e.get("cat") == "user_annotation"]
    many = [e for e in ann if e["name"] == "pre_many"]
    assert len(many) == 1024 and len(ann) == 1024, (len(many), len(ann))
    assert len(ann) + t["stepprof_dropped_events"] == n + 4, (len(ann), t["stepprof_dropped_events"])


def test_nvtx_ranges_completed_before_the_first_cuda_call_are_not_written_with_a_schedule():
    # They belong to no recorded step: with wait/warmup/active only the steps' work is written.
    r = run([prog("rel_bounds"), "closed"], env={"PROF_WAIT": 0, "PROF_WARMUP": 0, "PROF_ACTIVE": 1,
                                                 "PROF_MARKER": "kernel:rel_bounds_kernel"})
    assert (r.returncode, r.stdout) == (0, "closed done\n"), r.stderr
    assert r.traces(), r.stderr
    for f in r.traces():
        names = {e["name"] for e in load(f)["traceEvents"]}
        assert "cudaLaunchKernel" in names, (f, sorted(names))
        assert not names & {"pre_outer", "pre_inner", "pre_thread", "pre_mark"}, (f, names)


# ---- item 2: every byte kept is bounded by the settings, CUPTI's records included ---------------

# The CUPTI stand-in (tests/fakecuda) gives 2 records per cudaLaunchKernel: its runtime call and its
# kernel (as NVIDIA's CUPTI, no DRIVER record of the cuLaunchKernel the runtime makes for it).
CUPTI_PER_LAUNCH = 2


def _steps(n, env):
    r = run([prog("rel_bounds"), "steps", str(n)],
            env=dict({"FAKECUDA_KERNEL_NS": 0, "PROF_FINALIZE_TIMEOUT_S": 150}, **env), timeout=170)
    assert r.returncode == 0, (r.returncode, r.stderr)
    out = dict(l.split() for l in r.stdout.splitlines())
    assert int(out["launches"]) == 4 * n, r.stdout
    return r, int(out["VmHWM"]), int(out["VmRSS"])


def test_whole_run_with_cupti_holds_steady_memory_100k_to_400k_steps():
    # Small buffers so both fill long before 100k steps; the trace itself is not waited for.
    env = {"PROF_BUFFER_MB": 1, "PROF_CUPTI_BUFFER_MB": 4, "PROF_FINALIZE_TIMEOUT_S": 0}
    _, hwm1, rss1 = _steps(100000, env)
    _, hwm4, rss4 = _steps(400000, env)
    # Unbounded, CUPTI's parsed records grew ~1 KB per step: +300 MB here.
    print(f"VmHWM {hwm1} -> {hwm4} kB, VmRSS {rss1} -> {rss4} kB")
    assert hwm4 - hwm1 < 4096 and rss4 - rss1 < 4096, f"VmHWM {hwm1} -> {hwm4} kB, VmRSS {rss1} -> {rss4} kB"


def _intercepted(t):
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and (
        (e.get("cat") == "cuda_runtime" and e["args"].get("stepprof_source") != "cupti") or e.get("cat") == "user_annotation")]


def test_max_events_per_cycle_applies_to_cupti_records_with_exact_counts():
    cap = 4000
    counts = []
    for n in (5000, 10000):
        r, _, _ = _steps(n, {"PROF_MAX_EVENTS_PER_CYCLE": cap})
        t = load(r.trace())
        kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
        kept, dropped, cdropped = len(_intercepted(t)), t["stepprof_dropped_events"], t["stepprof_cupti_dropped_records"]
        assert kept == cap and kept + dropped == 5 * n + 1, (kept, dropped, n)   # 4 launches + 1 range a step, 1 sync
        assert 0 < len(kernels) <= cap and t["stepprof_truncated"] is True, (len(kernels), t["stepprof_truncated"])
        summary = [f for f in r.files() if f.endswith(".summary.json.txt")]
        s = json.load(open(os.path.join(r.outdir, summary[0])))
        assert s["dropped_events"] == dropped + cdropped, (s["dropped_events"], dropped, cdropped)
        counts.append(cdropped)
    # Every CUPTI record of the 5000 extra steps is counted as dropped, none lost silently.
    assert counts[1] - counts[0] == CUPTI_PER_LAUNCH * 4 * 5000, counts


def test_max_trace_mb_bounds_the_file_with_cupti_records():
    r, _, _ = _steps(5000, {})
    full = os.path.getsize(r.trace())
    r, _, _ = _steps(5000, {"PROF_MAX_TRACE_MB": 1})
    path = r.trace()
    assert_valid(path)
    t = load(path)
    size = os.path.getsize(path)
    assert full > (2 << 20) and size <= (1 << 20), (full, size)
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    kept, dropped = len(_intercepted(t)), t["stepprof_dropped_events"]
    assert kernels and kept + dropped == 5 * 5000 + 1 and t["stepprof_truncated"] is True, (len(kernels), kept, dropped)
    assert t["stepprof_cupti_dropped_records"] > 0


def test_buffer_mb_1_every_call_kept_or_counted_with_cupti():
    n = 20000
    r, _, _ = _steps(n, {"PROF_BUFFER_MB": 1})
    t = load(r.trace())
    kept, dropped = len(_intercepted(t)), t["stepprof_dropped_events"]
    assert dropped > 0 and kept + dropped == 5 * n + 1, (kept, dropped)
    # CUPTI's records: those of the kernels kept plus those counted dropped are all of them.
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) + t["stepprof_cupti_dropped_records"] >= 4 * n, (len(kernels), t["stepprof_cupti_dropped_records"])


def test_buffer_mb_1_four_threads_exiting_every_call_kept_or_counted_with_cupti():
    # Four recording threads fill the 1 MB pool together and exit (their last chunks handed over at
    # thread exit) before main's last call; the whole-run window closes at process exit.
    n = 5000
    for env in ({"PROF_BUFFER_MB": 1}, {"PROF_BUFFER_MB": 1, "PROF_MAX_EVENTS_PER_CYCLE": 30000}):
        r = run([prog("rel_bounds"), "threads", str(n)], env=dict({"FAKECUDA_KERNEL_NS": 0}, **env), timeout=170)
        assert (r.returncode, r.stdout) == (0, f"launches {16 * n}\n"), (r.returncode, r.stdout, r.stderr)
        t = load(r.trace())
        kept, dropped = len(_intercepted(t)), t["stepprof_dropped_events"]
        assert dropped > 0 and kept + dropped == 4 * 5 * n + 1, (env, kept, dropped)


def test_cupti_records_past_the_cap_in_warmup_are_not_counted_in_the_window():
    # One recorded step after a wait step, with and without a warmup step before it (the program's
    # first step, before its first CUDA call, is not seen). Each step makes 8 CUPTI records (per
    # launch: the runtime call and the kernel) and the cap is 4, so the warmup step overflows it too;
    # its drops must not be added to the recorded cycle's: 8 - 4 = 4 dropped. Without a warmup the
    # window also holds the lazy module load, a driver record inside the first launch CUPTI
    # observes: 5.
    # Kernels take no simulated time here, so no warmup kernel still runs on the GPU once the window
    # opens (one that does is the window's by its time, and its drop is rightly counted).
    # The program runs on for 100 steps after the window: CUPTI records them until the exporter's
    # collect turns it off, and they are not the window's drops either (they were, as many as the
    # program got through before the collect: 38 instead of 11 in one run in 12).
    drops = []
    for wait, warmup in ((2, 0), (1, 1)):
        r, _, _ = _steps(104, {"FAKECUDA_KERNEL_MIN_NS": 0, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": wait,
                               "PROF_WARMUP": warmup, "PROF_ACTIVE": 1, "PROF_MAX_EVENTS_PER_CYCLE": 4})
        drops.append(load(r.trace())["stepprof_cupti_dropped_records"])
    assert drops == [CUPTI_PER_LAUNCH * 4 + 1 - 4, CUPTI_PER_LAUNCH * 4 - 4], drops


def test_cupti_window_drops_count_its_gpu_work_that_runs_after_the_close():
    # 5 ms kernels: those of the first steps (which CUPTI does not observe) keep the stream busy for
    # tens of ms, so the recorded step's kernels start long after its window closed (a few ms even
    # under ASan). Their records past the cap are still the window's drops (their launches were its
    # calls, by correlation id), while the calls and kernels of the steps after it are not:
    # 8 + the lazy module load - 4 kept = 5.
    r, _, _ = _steps(6, {"FAKECUDA_KERNEL_NS": 5000000, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 2,
                         "PROF_WARMUP": 0, "PROF_ACTIVE": 1, "PROF_MAX_EVENTS_PER_CYCLE": 4})
    t = load(r.trace())
    window = [e for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    assert len(window) == 1 and kernels and kernels[0]["ts"] > window[0]["ts"] + window[0]["dur"], (window, kernels)
    assert t["stepprof_cupti_dropped_records"] == CUPTI_PER_LAUNCH * 4 + 1 - 4, t["stepprof_cupti_dropped_records"]
