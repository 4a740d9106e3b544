"""tests/test_schedule.py — issue 3: the step schedule from profiling.yaml and
PROF_* overrides, driven by each marker kind, end to end on real processes."""
import os
import signal
import subprocess

from harness import LIB, FAKE_DIR, load, prog, run, runtime_events, assert_valid


def steps_of(trace):
    return sorted(int(e["name"].split("#")[1]) for e in trace["traceEvents"]
                  if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))


def host_slices(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


def assert_events_inside_steps(trace):
    """Every runtime call lies inside one of the trace's ProfilerStep spans
    (the trace holds only its steps' events)."""
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in host_slices(trace, "user_annotation")
             if e["name"].startswith("ProfilerStep#")]
    for e in runtime_events(trace):
        assert any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in spans), f"{e['name']} at {e['ts']} outside steps {spans}"


def test_nvtx_schedule_two_cycles_exact_steps():
    r = run([prog("train")], env={"STEPS": 20, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 2,
                                   "PROF_WARMUP": 1, "PROF_ACTIVE": 3, "PROF_REPEAT": 2})
    assert r.returncode == 0, r.stderr
    traces = r.traces()
    assert len(traces) == 2, traces
    want = [[3, 4, 5], [9, 10, 11]]
    per_step = None
    for path, steps in zip(traces, want):
        assert_valid(path)
        t = load(path)
        assert steps_of(t) == steps, (path, steps_of(t))
        assert t["stepprof_steps"] == [steps[0], steps[-1]]
        assert_events_inside_steps(t)
        n = len(runtime_events(t))
        assert n % 3 == 0 and (per_step is None or n == per_step), n
        per_step = n
        names = {e["name"] for e in host_slices(t, "user_annotation")}
        assert {"train_step", "forward", "backward", "optimizer"} <= names, names
        assert sum(1 for e in host_slices(t, "user_annotation") if e["name"] == "train_step") == 3
    assert any("recording steps 3-5, 9-11 (wait 2, warmup 1, active 3, repeat 2)" in l for l in r.sp_lines), r.sp_lines


def test_profiler_step_spans_boundary_to_boundary_on_marker_thread():
    r = run([prog("train")], env={"STEPS": 8, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 1,
                                   "PROF_ACTIVE": 3})
    t = load(r.trace())
    ps = sorted((e for e in host_slices(t, "user_annotation") if e["name"].startswith("ProfilerStep#")),
                key=lambda e: e["ts"])
    assert [p["name"] for p in ps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    for a, b in zip(ps, ps[1:]):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 0.002, "consecutive steps share their boundary"
    steps = [e for e in host_slices(t, "user_annotation") if e["name"] == "train_step"]
    for p, s in zip(ps, sorted(steps, key=lambda e: e["ts"])):
        assert p["tid"] == s["tid"] and p["ts"] <= s["ts"] and s["ts"] + s["dur"] <= p["ts"] + p["dur"] + 0.002


def _yaml(tmpdir, text, name="profiling.yaml"):
    path = os.path.join(tmpdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_env_beats_file_and_nested_section():
    import tempfile
    d = tempfile.mkdtemp(prefix="sp-test-")
    _yaml(d, "model:\n  layers: 4\nprofiling:\n  marker: nvtx:train_step\n  wait: 1\n  warmup: 1\n  active: 1\n"
             "optimizer:\n  lr: 0.1\n")
    r = run([prog("train")], cwd=d, env={"STEPS": 10})
    assert steps_of(load(r.trace())) == [2], "file schedule applies"
    d2 = tempfile.mkdtemp(prefix="sp-test-")
    _yaml(d2, "profiling:\n  marker: nvtx:train_step\n  wait: 1\n  warmup: 1\n  active: 1\n")
    r = run([prog("train")], cwd=d2, env={"STEPS": 10, "PROF_ACTIVE": 3})
    assert steps_of(load(r.trace())) == [2, 3, 4], "PROF_ACTIVE beats the file"


def test_prof_config_names_the_file():
    import tempfile
    d = tempfile.mkdtemp(prefix="sp-test-")
    cfg = _yaml(d, "profiling:\n  marker: nvtx:train_step\n  skip_first: 2\n  warmup: 1\n  active: 2\n", "my.yaml")
    r = run([prog("train")], env={"STEPS": 10, "PROF_CONFIG": cfg})
    assert steps_of(load(r.trace())) == [3, 4]


def test_default_no_schedule_is_one_whole_run_window():
    r = run([prog("train")], env={"STEPS": 6})
    t = load(r.trace())
    assert steps_of(t) == []
    assert sum(1 for e in host_slices(t, "user_annotation") if e["name"] == "train_step") == 6


def test_use_gzip_writes_valid_gz_trace():
    r = run([prog("train")], env={"STEPS": 3, "PROF_USE_GZIP": "yes"})
    path = r.trace()
    assert path.endswith(".pt.trace.json.gz"), path
    assert_valid(path)
    assert len(runtime_events(load(path))) > 0


def test_nvtx_domain_with_registered_strings():
    r = run([prog("markers_misc"), "nvtx-domain"], env={"STEPS": 10, "PROF_MARKER": "nvtx:step@trainer",
                                                       "PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 2})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    assert steps_of(t) == [2, 3]
    names = [e["name"] for e in host_slices(t, "user_annotation")]
    assert names.count("step") == 4, "domain range + default-domain range per step"
    assert names.count("io") == 2, "start/end ranges"
    marks = [e for e in t["traceEvents"] if e.get("ph") == "i" and e.get("name") == "checkpoint"]
    assert len(marks) == 2
    assert len(runtime_events(t, "cudaLaunchKernel")) == 4


def test_nvtx_default_domain_marker_ignores_domain_ranges():
    r = run([prog("markers_misc"), "nvtx-domain"], env={"STEPS": 6, "PROF_MARKER": "nvtx:st?p",
                                                       "PROF_WARMUP": 1, "PROF_ACTIVE": 2})
    t = load(r.trace())
    assert steps_of(t) == [1, 2], "only the default-domain 'step' ranges count (glob st?p)"


def test_nvtx_marker_glob_brackets_and_utf8_characters():
    """The nvtx: glob as fnmatch in a UTF-8 locale: bracket expressions, and '?' taking one
    character: the names program's inner range ends in " e\u00e9" (two bytes), which " e?" matches
    and " e??" does not."""
    for glob, fires in (("nvtx:train_st[a-f]p", True), ("nvtx:[[:alpha:]]rain_st[!a-d]p", True),
                        ("nvtx:train_st[!e]p", False), ("nvtx:* e?", True), ("nvtx:* e??", False)):
        r = run([prog("markers_misc"), "names"], env={"STEPS": 6, "PROF_MARKER": glob, "PROF_WARMUP": 1,
                                                     "PROF_ACTIVE": 2})
        assert r.returncode == 0, (glob, r.stderr)
        if not fires:
            assert r.traces() == [], (glob, r.files())
            continue
        t = load(r.trace())
        assert steps_of(t) == [1, 2], (glob, steps_of(t))


def test_kernel_marker_every_nth_launch():
    r = run([prog("train")], env={"STEPS": 12, "PROF_MARKER": "kernel:axpy_kernel*/2", "PROF_WARMUP": 1,
                                   "PROF_ACTIVE": 2})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    assert steps_of(t) == [1, 2]
    # one axpy launch per training step, a boundary every 2nd: each recorded step holds 2 training steps'
    # optimizer launches, and the recorded window starts with a boundary launch.
    axpy = [e for e in runtime_events(t) if "axpy_kernel" in e["args"].get("kernel", "")]
    assert len(axpy) == 4, len(axpy)
    assert_events_inside_steps(t)


def test_kernel_marker_on_a_kernel_named_late():
    """A kernel whose name changes after the marker saw it (its stub registered by a module loaded
    later; first named from the symbol table): the marker's cached "never matches" is forgotten, so
    the launches under the new name are boundaries (steps 6..11 of 12: recorded steps 1-2)."""
    r = run([prog("markers_misc"), "late-name"], env={"STEPS": 12, "PROF_MARKER": "kernel:late_kernel*",
                                                      "PROF_WARMUP": 1, "PROF_ACTIVE": 2})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    assert steps_of(t) == [1, 2], steps_of(t)
    late = [e for e in runtime_events(t) if e["args"].get("kernel") == "late_kernel()"]
    assert len(late) == 2, [e["args"].get("kernel") for e in runtime_events(t)]


def test_cuda_profiler_api_ranges():
    r = run([prog("markers_misc"), "profiler"], env={"STEPS": 12, "PROF_MARKER": "cudaProfilerApi",
                                                    "PROF_REPEAT": 2})
    assert r.returncode == 0, r.stderr
    traces = r.traces()
    assert len(traces) == 2, traces
    launches = [len(runtime_events(load(p), "cudaLaunchKernel")) for p in traces]
    assert launches == [6, 4], launches   # steps 3..5 and 8..9, two launches each
    first = runtime_events(load(traces[0]))
    assert first[0]["name"] == "cudaProfilerStart"


def test_cuda_profiler_api_default_records_first_range_only():
    r = run([prog("markers_misc"), "profiler"], env={"STEPS": 12, "PROF_MARKER": "cudaProfilerApi"})
    assert len(r.traces()) == 1
    assert any("recording the first cudaProfilerStart/Stop range;" in l for l in r.sp_lines), r.sp_lines


def _run_with_signals(marker, at_steps, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF_")}
    import tempfile
    d = tempfile.mkdtemp(prefix="sp-test-")
    env.update({"LD_PRELOAD": (os.environ.get("SP_PRELOAD_FIRST", "") + " " + LIB).strip(),
                "LD_LIBRARY_PATH": FAKE_DIR, "PROF_MARKER": marker, "STEPS": "14",
                "PROF_OUTPUT_DIR": os.path.join(d, "traces"), "STEP_SLEEP_MS": "60"})
    env.update(extra or {})
    p = subprocess.Popen([prog("markers_misc"), "signal"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=d)
    seen = []
    for line in p.stdout:
        seen.append(line)
        if line.strip() in {f"step {s}" for s in at_steps}:
            p.send_signal(signal.SIGUSR2)
    err = p.stderr.read()
    p.wait(timeout=60)
    import glob
    return p.returncode, seen, err, sorted(glob.glob(os.path.join(d, "traces", "*.pt.trace.json")))


def test_sigusr2_arms_one_cycle_at_next_boundary():
    rc, out, err, traces = _run_with_signals("nvtx:train_step,signal", [3], {"PROF_WARMUP": "1", "PROF_ACTIVE": "2"})
    assert rc == 0, err
    assert out[-1].strip() == "done"
    assert len(traces) == 1, (traces, err)
    assert steps_of(load(traces[0])) == [4, 5], err   # armed at step 3's boundary: warmup 3, record 4-5
    assert "signal received" in err


def test_signal_only_toggles_a_window():
    rc, out, err, traces = _run_with_signals("signal:USR2", [3, 8])
    assert rc == 0, err
    assert len(traces) == 1, err
    t = load(traces[0])
    launches = len(runtime_events(t, "cudaLaunchKernel"))
    # The handler only sets a flag; the next intercepted call acts on it. The first signal opens the
    # window at step 3's first call (recorded), the second closes it at step 8's: steps 3-7, 2 each.
    assert launches == 10, launches


def test_signal_only_toggles_two_windows_on_the_same_thread():
    # The call that closes a window on a signal must give back the recursion guard it took: the
    # thread that noticed the close is the one that records (and notices the next signal) later.
    rc, out, err, traces = _run_with_signals("signal:USR2", [3, 5, 8, 10])
    assert rc == 0, err
    assert len(traces) == 2, (traces, err)
    launches = [len(runtime_events(load(t), "cudaLaunchKernel")) for t in traces]
    assert launches == [4, 4], launches   # steps 3-4 and 8-9, 2 launches each


def test_marker_never_seen_says_so_once_at_exit():
    """A step marker that never matches (a misspelt NVTX range or domain, a
    kernel glob matching nothing, no cudaProfilerStart) records nothing: the
    run ends with one line naming the marker, not in silence. The program's
    output and exit code are unchanged."""
    base = run([prog("train")], preload=False, env={"STEPS": 4})
    for marker in ("nvtx:no_such_range", "nvtx:train_step@no_such_domain", "kernel:no_such_kernel*",
                   "cudaProfilerApi"):
        r = run([prog("train")], env={"STEPS": 4, "PROF_MARKER": marker, "PROF_ACTIVE": 1, "PROF_REPEAT": 0})
        assert (r.returncode, r.stdout, r.other_stderr) == (base.returncode, base.stdout, base.stderr), marker
        said = [l for l in r.sp_lines if "never" in l]
        assert len(said) == 1 and marker in said[0], (marker, r.sp_lines)
        assert r.traces() == [], marker
    # A marker that is seen says nothing of the kind.
    r = run([prog("train")], env={"STEPS": 4, "PROF_MARKER": "nvtx:train_step", "PROF_ACTIVE": 1})
    assert not [l for l in r.sp_lines if "never" in l] and len(r.traces()) == 1, r.sp_lines
