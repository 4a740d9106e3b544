"""tests/test_cupti.py — issue 4: GPU truth from CUPTI, on the CPU stand-ins
(tests/fakecuda: libcudart.so.13 + libcupti.so.13 with the real record
layouts). Checks what the trace says about kernels, copies, flows, streams,
steps and devices, and the three ways CUPTI can be unavailable."""
import collections
import os
import tempfile

import test_reports as reports
from harness import FAKE_DIR, Skip, assert_valid, load, prog, run, runtime_events

SCHED = {"PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 3}


def need_fake_cupti():
    if not os.path.exists(os.path.join(FAKE_DIR, "libcupti.so.13")):
        raise Skip("the CUPTI stand-in build/fakecuda/libcupti.so.13 was not built")


def gpu(trace, cat):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


def train_trace(binary="train", env=None):
    need_fake_cupti()
    r = run([prog(binary)], env={"STEPS": 8, **SCHED, **(env or {})})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    return r, load(path)


def test_every_launch_has_one_kernel_with_flow():
    r, t = train_trace()
    assert not any("CUPTI" in l for l in r.sp_lines), r.sp_lines
    assert t["stepprof_gpu_source"] == "cupti"
    launches = runtime_events(t, "__cudaLaunchKernel")
    kernels = gpu(t, "kernel")
    assert launches and len(kernels) == len(launches), (len(kernels), len(launches))
    by_corr = {e["args"]["correlation"]: e for e in launches}
    assert len(by_corr) == len(launches), "one correlation id per launch"
    flows_s = {e["id"]: e for e in t["traceEvents"] if e.get("ph") == "s"}
    flows_f = {e["id"]: e for e in t["traceEvents"] if e.get("ph") == "f"}
    for k in kernels:
        c = k["args"]["correlation"]
        launch = by_corr.get(c)
        assert launch, f"kernel {k['name']} has no launching call {c}"
        assert launch["args"]["kernel"] == k["name"], (launch["args"]["kernel"], k["name"])
        assert k["ts"] >= launch["ts"], ("a kernel runs after its launch", k["ts"], launch["ts"], launch["dur"])
        assert c in flows_s and c in flows_f, "ac2g flow pair"
        assert flows_s[c]["tid"] == launch["tid"] and flows_f[c]["tid"] == k["tid"]
        assert k["pid"] == k["args"]["device"] and k["tid"] == k["args"]["stream"]


def test_no_call_appears_twice():
    _, t = train_trace()
    rt = runtime_events(t, all_sources=True)
    keys = collections.Counter((e["tid"], e["args"]["correlation"]) for e in rt)
    assert max(keys.values()) == 1, [k for k, v in keys.items() if v > 1][:5]
    ours = runtime_events(t)
    assert ours and len(ours) < len(rt), "CUPTI adds the calls nobody intercepted, marked stepprof_source"
    # Kineto's links: a call carries its innermost enclosing range's External id, its kernels the same.
    ranges = {e["args"]["External id"]: e for e in t["traceEvents"] if e.get("cat") == "user_annotation"}
    assert len(ranges) == sum(1 for e in t["traceEvents"] if e.get("cat") == "user_annotation"), "unique ids"
    by_corr = {e["args"]["correlation"]: e for e in ours}
    for k in gpu(t, "kernel"):
        launch = by_corr[k["args"]["correlation"]]
        ext = launch["args"]["External id"]
        assert k["args"]["External id"] == ext, (k["args"], launch["args"])
        r = ranges[ext]
        assert r["tid"] == launch["tid"] and r["ts"] <= launch["ts"] <= r["ts"] + r["dur"]
        assert r["name"] in ("forward", "backward", "optimizer", "train_step"), r["name"]
        # the innermost one (no torch operator here: plain NVTX ranges keep their calls)
        assert not [q for q in ranges.values() if q is not r and q["tid"] == r["tid"] and
                    r["ts"] <= q["ts"] <= launch["ts"] <= q["ts"] + q["dur"]], (launch, r)


def test_streams_never_overlap_and_copies_named():
    _, t = train_trace()
    per_stream = collections.defaultdict(list)
    for cat in ("kernel", "gpu_memcpy", "gpu_memset"):
        for e in gpu(t, cat):
            per_stream[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert per_stream
    for key, spans in per_stream.items():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert b0 >= a1 - 0.001, f"overlap on {key}: {a0}-{a1} and {b0}-{b1}"
    names = {e["name"] for e in gpu(t, "gpu_memcpy")}
    # train.cu: pageable and pinned batch uploads, the loss downloaded into pinned memory
    assert names == {"Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)",
                     "Memcpy DtoH (Device -> Pinned)"}, names
    assert all(e["args"]["bytes"] > 0 and (e["dur"] == 0 or e["args"]["memory bandwidth (GB/s)"] > 0)
               for e in gpu(t, "gpu_memcpy"))
    assert any(e["name"] == "Memset (Device)" for e in gpu(t, "gpu_memset"))


def test_steps_hold_exactly_their_gpu_work():
    _, t = train_trace()
    steps = {int(e["name"].split("#")[1]): e for e in t["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert sorted(steps) == [2, 3, 4]
    launches = {e["args"]["correlation"]: e for e in runtime_events(t)}
    # Steps are drawn on the CPU only: TensorBoard counts every ProfilerStep# as a step (issue 12).
    assert not [e for e in gpu(t, "gpu_user_annotation") if e["name"].startswith("ProfilerStep#")]
    ranges = {e["args"]["External id"]: e for e in t["traceEvents"] if e.get("cat") == "user_annotation"}
    spans = {(e["args"]["External id"], e["tid"]): e for e in gpu(t, "gpu_user_annotation")}
    assert len(spans) == len(gpu(t, "gpu_user_annotation")), "one span per (range, stream)"
    for k in gpu(t, "kernel") + gpu(t, "gpu_memcpy"):
        launch = launches[k["args"]["correlation"]]
        owner = [n for n, s in steps.items() if s["ts"] <= launch["ts"] <= s["ts"] + s["dur"]]
        assert len(owner) == 1, f"{k['name']} launched outside the recorded steps"
        # the enclosing train_step range of that step, drawn on this stream around the work
        ts = [i for i, r in ranges.items() if r["name"] == "train_step" and r["ts"] <= launch["ts"] <= r["ts"] + r["dur"]]
        assert len(ts) == 1, k
        g = spans[(ts[0], k["tid"])]
        assert g["name"] == "train_step" and g["pid"] == k["pid"], g
        assert g["ts"] <= k["ts"] + 0.001 and k["ts"] + k["dur"] <= g["ts"] + g["dur"] + 0.001


def test_device_properties_in_whole_run_trace_written_at_exit():
    need_fake_cupti()
    r = run([prog("train")], env={"STEPS": 2})
    t = load(r.trace())
    assert len(t["deviceProperties"]) == 1 and t["deviceProperties"][0]["numSms"] > 0
    assert all("est. achieved occupancy %" in k["args"] for k in gpu(t, "kernel"))


def test_device_properties_from_the_device():
    _, t = train_trace()
    props = t["deviceProperties"]
    assert len(props) == 1 and props[0]["id"] == 0, props
    for key in ("name", "totalGlobalMem", "computeMajor", "computeMinor", "maxThreadsPerBlock",
                "maxThreadsPerMultiprocessor", "regsPerBlock", "warpSize", "sharedMemPerBlock", "numSms"):
        assert key in props[0], key
    k = gpu(t, "kernel")[0]["args"]
    assert list(k)[:6] == ["External id", "queued", "device", "context", "stream", "correlation"], list(k)
    assert 0 <= k["est. achieved occupancy %"] <= 100 and k["blocks per SM"] > 0


def test_kinds_enabled_only_in_windows():
    """CUPTI's kinds are on from each cycle's warmup to its window's collect, off in the wait steps
    between cycles and after the last one. They stayed on from the first warmup to the exit (the
    window's close forced the step's action to NONE, so no transition turned them off): on an H200 a
    transformer's steps after its window took x1.4-1.7, and the old check of the last four calls
    passed on it (the probe's pair and the exit's). A collect still pending at the next warmup
    rightly leaves them on: five wait steps, each synced on 5 ms kernels, give it >= 100 ms."""
    need_fake_cupti()
    with tempfile.TemporaryDirectory(prefix="sp-test-") as d:
        log = os.path.join(d, "cupti.log")
        r = run([prog("train")], env={"STEPS": 18, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 5,
                                       "PROF_WARMUP": 1, "PROF_ACTIVE": 2, "PROF_REPEAT": 2, "FAKECUPTI_LOG": log,
                                       "FAKECUDA_KERNEL_NS": 5000000})
        lines = [l.split() for l in open(log)]
    assert r.returncode == 0 and len(r.traces()) == 2
    kernel_kind = "10"   # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    seq = [l[1] for l in lines if len(l) > 2 and l[2] == kernel_kind and l[1] in ("enable", "disable")]
    # the probe at init, then on for cycle 1 (warmup + active), off, on for cycle 2, off
    assert seq == ["enable", "disable"] * 3, seq
    assert lines[-1][1] == "finalize", lines[-3:]


def test_degrade_another_subscriber():
    need_fake_cupti()
    r = run([prog("train")], env={"STEPS": 3, "FAKECUPTI_SUBSCRIBE_ERROR": 39})
    assert r.returncode == 0
    msg = [l for l in r.sp_lines if "CUPTI" in l]
    assert len(msg) == 1 and "already subscribed" in msg[0], r.sp_lines
    t = load(r.trace())
    assert runtime_events(t) and not gpu(t, "kernel") and t["stepprof_gpu_source"] == "none"


def test_degrade_enable_fails_no_driver():
    need_fake_cupti()
    r = run([prog("train")], env={"STEPS": 3, "FAKECUPTI_ENABLE_ERROR": 999})
    msg = [l for l in r.sp_lines if "CUPTI" in l]
    assert len(msg) == 1 and "999" in msg[0], r.sp_lines
    assert runtime_events(load(r.trace()))


def test_degrade_nsys_owns_cupti():
    r = run([prog("train")], env={"STEPS": 3, "NSYS_PROFILING_SESSION_ID": "1"})
    msg = [l for l in r.sp_lines if "CUPTI" in l]
    assert len(msg) == 1 and "Nsight Systems" in msg[0], r.sp_lines
    assert runtime_events(load(r.trace()))


def test_degrade_real_cupti_without_driver():
    r = run([prog("train")], env={"STEPS": 3, "LD_LIBRARY_PATH": FAKE_DIR + "/nocupti"}, fake=False)
    # the real runtime, the real CUPTI: no driver
    msg = [l for l in r.sp_lines if "CUPTI" in l]
    from harness import CUDA_HOME
    expect = "no GPU or driver" if os.path.exists(os.path.join(CUDA_HOME, "lib64", "libcupti.so.13")) else "not found"
    assert len(msg) == 1 and expect in msg[0], r.sp_lines
    assert runtime_events(load(r.trace()))


def test_degrade_cupti_13_2_without_driver():
    """pip's CUDA 13.2 runtime and CUPTI (torch's nvidia-cuda-cupti 13.2.86): that CUPTI overflows the stack
    in cuptiSubscribe where no working libcuda.so.1 loads (13.0 returns 999): no driver at all, or the
    toolkit's stub as libcuda.so.1 (as CPU-only build containers install it). stepprof checks for a driver
    that answers first: one line, the program's own output and exit code, a trace of its calls."""
    from harness import CUDA_HOME
    try:
        import nvidia
    except ImportError:
        raise AssertionError("pip's nvidia-cuda-cupti (a torch dependency, installed by scripts/pydeps.sh) is missing")
    libdir = next((os.path.join(d, "cu13", "lib") for d in nvidia.__path__
                   if os.path.exists(os.path.join(d, "cu13", "lib", "libcupti.so.13"))), None)
    assert libdir, f"pip's nvidia-cuda-cupti has no libcupti.so.13 in {nvidia.__path__}"
    stub = os.path.join(CUDA_HOME, "lib64", "stubs", "libcuda.so")
    assert os.path.exists(stub), stub
    with tempfile.TemporaryDirectory() as stubdir:
        os.symlink(stub, os.path.join(stubdir, "libcuda.so.1"))
        for path in (libdir, stubdir + ":" + libdir):
            env = {"STEPS": 3, "LD_LIBRARY_PATH": path}
            bare = run([prog("train")], env=env, fake=False, preload=False)
            r = run([prog("train")], env=env, fake=False)
            assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout), (path, r.returncode, r.stderr[-2000:])
            msg = [l for l in r.sp_lines if "CUPTI" in l]
            assert len(msg) == 1 and "no GPU or driver" in msg[0] and "libcuda.so.1" in msg[0], r.sp_lines
            assert runtime_events(load(r.trace()))


def test_static_cudart_on_stand_in():
    need_fake_cupti()
    r = run([prog("train_static")], env={"STEPS": 3})
    assert r.returncode == 0
    assert len([l for l in r.sp_lines if "statically" in l]) == 1


def test_graph_kernels_one_by_one_attributed_to_graph_launch():
    need_fake_cupti()
    r = run([prog("markers_misc"), "graph"], env={"STEPS": 6, **SCHED})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    launches = runtime_events(t, "cudaGraphLaunch")
    assert len(launches) == 3, len(launches)       # steps 2-4
    corr = {e["args"]["correlation"] for e in launches}
    kernels = gpu(t, "kernel")
    assert len(kernels) == 9 and {k["args"]["correlation"] for k in kernels} == corr
    # (the CUPTI stand-in names only kernels registered by nvcc code; these are plain C functions)
    per_launch = {c: sum(1 for k in kernels if k["args"]["correlation"] == c) for c in corr}
    assert set(per_launch.values()) == {3}, per_launch
    flows = [e for e in t["traceEvents"] if e.get("ph") == "s"]
    assert len(flows) == 3, "one arrow per graph launch"


def test_summary_copies_per_step_and_direction():
    r, t = train_trace()
    summary = r.trace().replace(".pt.trace.json", ".summary.json.txt")
    import json
    steps = json.load(open(summary))["steps"]
    assert [s["step"] for s in steps] == [2, 3, 4]
    # train.cu: one pageable and one pinned 256 KiB batch upload, one 4-byte loss download per step;
    # the stand-in copies at FAKECUDA_COPY_GBPS (20) after FAKECUDA_COPY_LATENCY_NS (1500) per copy.
    want = 2 * 262144 / (2 * (1500 + 262144 / 20.0))
    for s in steps:
        assert s["h2d_bytes"] == 2 * 262144 and s["d2h_bytes"] == 4 and s["d2d_bytes"] == 0, s
        assert abs(s["h2d_gbps"] - want) < 0.1, (s, want)


def test_calls_paired_with_cupti_records_despite_clock_offset():
    """The host-to-CUPTI clock offset can be off by more than a call lasts
    (~17 us seen under valgrind): calls still pair with their own records,
    so none is drawn twice and every kernel keeps its launching call.
    Open: with CUPTI's clock running ahead instead (+50 us), calls at a
    window's edges are assigned to the wrong window (membership is decided on
    CUPTI's clock) and those edges mispair; see the session note."""
    _, t = train_trace(env={"FAKECUPTI_CLOCK_SKEW_NS": -50000})
    extra = [e["name"] for e in runtime_events(t, all_sources=True) if e["args"].get("stepprof_source") == "cupti"]
    intercepted = {e["name"] for e in runtime_events(t)}
    assert not [n for n in extra if n in intercepted], extra
    by_corr = {e["args"]["correlation"]: e for e in runtime_events(t)}
    for k in gpu(t, "kernel"):
        launch = by_corr[k["args"]["correlation"]]   # its own launch (GPU times carry the skew)
        assert launch["args"]["kernel"] == k["name"], (launch["args"], k["name"])


def launch_durations(env):
    r, t = train_trace(env=env)
    launches = runtime_events(t, "__cudaLaunchKernel")
    assert len(launches) == 12, len(launches)
    return r, t, launches


def test_launch_durations_from_cupti_records():
    """launch_durations: a launch reads the clock once while CUPTI records API calls, and takes its
    duration from CUPTI's record of the same call; a second read otherwise (CUPTI off or refusing
    the runtime kind, or `host`; not when it refuses the driver kind only); never with `start` (0
    without CUPTI). Other calls always read twice. The header counts the launches timed by their start (stepprof_launch_ends)."""
    _, t, launches = launch_durations({})
    assert t["stepprof_launch_ends"] == {"cupti": 12, "none": 0}, t.get("stepprof_launch_ends")
    steps = [e for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#") and e.get("ph") == "X"
             and e.get("cat") == "user_annotation"]
    assert len(steps) == 3, steps
    for e in launches:
        assert e["dur"] > 0, e
        step = [s for s in steps if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        assert step and e["ts"] + e["dur"] <= step[0]["ts"] + step[0]["dur"], ("inside its step", e, step)
    for env in ({"PROF_LAUNCH_DURATIONS": "host"}, {"PROF_CUPTI": "false"},
                {"FAKECUPTI_ENABLE_ERROR": 1, "FAKECUPTI_ENABLE_ERROR_KIND": 5}):   # RUNTIME refused
        _, t, launches = launch_durations(env)
        assert "stepprof_launch_ends" not in t, (env, t["stepprof_launch_ends"])
        assert all(e["dur"] > 0 for e in launches), (env, launches)
    _, t, launches = launch_durations({"PROF_LAUNCH_DURATIONS": "start", "PROF_CUPTI": "false"})
    assert t["stepprof_launch_ends"] == {"cupti": 0, "none": 12}, t.get("stepprof_launch_ends")
    assert all(e["dur"] == 0 for e in launches), launches
    copies = runtime_events(t, "cudaMemcpy")
    assert copies and all(e["dur"] > 0 for e in copies), copies
    _, t, launches = launch_durations({"PROF_LAUNCH_DURATIONS": "start"})
    assert t["stepprof_launch_ends"] == {"cupti": 12, "none": 0}, t.get("stepprof_launch_ends")
    # The DRIVER kind (4) refused: a runtime launch's record is a RUNTIME one, still one read.
    r, t, launches = launch_durations({"FAKECUPTI_ENABLE_ERROR": 1, "FAKECUPTI_ENABLE_ERROR_KIND": 4})
    assert [l for l in r.sp_lines if "refused to record driver API calls" in l], r.sp_lines
    assert t["stepprof_launch_ends"] == {"cupti": 12, "none": 0}, t.get("stepprof_launch_ends")
    assert all(e["dur"] > 0 for e in launches), launches


def test_launches_read_the_clock_twice_once_cupti_loses_records():
    """A whole run of 60k launches with one 4 MiB CUPTI buffer: once CUPTI is refused a buffer it drops
    records, and a launch whose record is lost would last 0; from then on launches read the clock
    twice again (launch_durations: auto). Only the launch in flight at the refusal may last 0, and
    any whose record CUPTI started later than the next launch (a preemption on a busy machine): with
    the loss unnoticed, 52541 of them lasted 0."""
    need_fake_cupti()
    r = run([prog("launch_bench"), "60000", "1"], env={"FAKECUDA_KERNEL_NS": 0, "PROF_CUPTI_BUFFER_MB": 4})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    launches = runtime_events(t, "cudaLaunchKernel")
    ends = t["stepprof_launch_ends"]
    assert len(launches) == 70000 and t["stepprof_cupti_dropped_records"] > 0, (len(launches), ends)
    assert ends["cupti"] > 1000 and ends["none"] <= 50, ends
    assert sum(1 for e in launches if e["dur"] == 0) == ends["none"], ends


def test_syncs_drawn_on_their_devices_pid():
    """CUPTI's synchronization records carry a context id and no device: each sync is drawn on the pid
    of the device whose kernels showed that context (Kineto maps it alike), a stream sync on its
    stream's lane beside that stream's kernel, a context sync on lane 0; also GPU 1's first context
    sync, made before GPU 1 ran anything (its context's work is parsed after it). Every sync was on
    pid 0 before: GPU 1's among GPU 0's lanes, for Perfetto, TensorBoard and HTA (pid = device)."""
    need_fake_cupti()
    r = run([prog("sync_devices")], env={"FAKECUDA_DEVICES": 2})
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    # sync_devices: on GPU 1, then GPU 0: a context sync, a kernel on a created stream, a sync of that
    # stream, a context sync.
    kernels = {k["args"]["context"]: k for k in gpu(t, "kernel")}
    assert sorted(k["pid"] for k in kernels.values()) == [0, 1], kernels
    syncs = sorted(gpu(t, "cuda_sync"), key=lambda e: e["ts"])
    assert [(s["name"], s["pid"]) for s in syncs] == [
        ("Context Sync", 1), ("Stream Sync", 1), ("Context Sync", 1),
        ("Context Sync", 0), ("Stream Sync", 0), ("Context Sync", 0)], syncs
    for s in syncs:
        k = kernels[s["args"]["context"]]
        assert s["pid"] == s["args"]["device"] == k["pid"], (s, k)
        assert s["tid"] == (k["tid"] if s["name"] == "Stream Sync" else 0), (s, k)
        if s["name"] == "Stream Sync":
            assert s["args"]["stream"] == k["args"]["stream"], (s, k)
    # The reports read the same events: the offline tool, from the trace's pids, agrees with them.
    headers, rows = reports.parse_table(reports.outputs(r, ".key_averages.txt"))
    calls = {row["Name"]: int(row["# of Calls"]) for row in rows}
    assert calls["Context Sync"] == 4 and calls["Stream Sync"] == 2, calls
    assert reports.tool(path, "--row-limit", "-1").stdout == reports.outputs(r, ".key_averages.txt")
    assert reports.tool(path, "--summary-json").stdout == reports.outputs(r, ".summary.json.txt")
