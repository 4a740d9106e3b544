"""tests/test_cupti_fidelity.py — issue 15: the collector against a CUPTI
stand-in that behaves like NVIDIA's where the first stand-in did not
(tests/fakecuda/README.md, "real CUPTI / stand-in / test that covers it"):
driver records whose cbids overlap runtime ones (lazy module loading inside
the first cudaMalloc), correlation ids that must not collide, peer copies,
errno, fork children, short-lived threads."""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import ROOT, assert_valid, load, prog, run, runtime_events
from test_cupti import gpu, need_fake_cupti


def whole_run(binary="train", env=None, args=()):
    need_fake_cupti()
    r = run([prog(binary), *args], env={"STEPS": 2, **(env or {})})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    return r, load(path)


def test_lazy_load_driver_record_does_not_steal_the_first_malloc():
    """Lazy loading puts cuModuleLoadDataEx (driver cbid 20) inside the
    first cudaMalloc (runtime cbid 20) on the same thread. With CUPTI's clock
    50 us off, only pairing per domain keeps every cudaMalloc with its own
    runtime record: none is drawn twice, the driver call is drawn once as
    CUPTI's own cuda_driver event, inside the cudaMalloc that issued it."""
    _, t = whole_run(env={"FAKECUPTI_CLOCK_SKEW_NS": -50000})
    mallocs = runtime_events(t, "cudaMalloc")
    assert len(mallocs) == 6, [e["name"] for e in mallocs]
    extra = [e["name"] for e in runtime_events(t, all_sources=True) if e["args"].get("stepprof_source") == "cupti"]
    assert "cudaMalloc" not in extra, extra
    drv = [e for e in t["traceEvents"] if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    loads = [e for e in drv if e["name"] == "cuModuleLoadDataEx"]
    assert len(loads) == 1, [e["name"] for e in drv]
    assert loads[0]["args"]["cbid"] == 20 and mallocs[0]["args"]["cbid"] == 20
    # the ids of intercepted calls: CUPTI's where paired, else synthetic ones that no CUPTI id can equal
    ids = collections.Counter(e["args"]["correlation"] for e in runtime_events(t))
    assert max(ids.values()) == 1, [k for k, v in ids.items() if v > 1][:5]


def test_synthetic_correlation_ids_above_every_cupti_id():
    """A call no CUPTI record claimed gets a synthetic id (exporters/gpu_trace.h sp_gpuv_host_corr):
    the header's stepprof_host_correlation_base plus the call's index among the window's host events,
    so unique, dense (few digits) and above every CUPTI id of the window, or it would name some
    kernel's launch; never below 32768, or HTA narrows the column and fails on row numbers."""
    r, t = whole_run(env={"FAKECUPTI_ENABLE_ERROR": 999})
    assert any("CUPTI" in l for l in r.sp_lines), r.sp_lines
    calls = runtime_events(t)
    assert len(calls) > 20
    ids = [e["args"]["correlation"] for e in calls]
    base = t["stepprof_host_correlation_base"]
    assert base == 32768 and min(ids) >= base and max(ids) < base + len(t["traceEvents"]), (base, sorted(ids)[:5])
    assert len(set(ids)) == len(ids)
    # with CUPTI: the base is above every id CUPTI gave, and each call has CUPTI's id or its own
    r, t = whole_run()
    base = t["stepprof_host_correlation_base"]
    cupti_ids = [e["args"]["correlation"] for e in t["traceEvents"]
                 if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert cupti_ids and base > max(cupti_ids) and base >= 32768, (base, max(cupti_ids))
    ids = [e["args"]["correlation"] for e in runtime_events(t, all_sources=True)]
    assert len(set(ids)) == len(ids)


def _errno_after_each_call(preload, env):
    r = run([prog("calls_all"), "calls.json"], preload=preload, env=env)
    assert r.returncode == 0, r.stderr
    calls = json.load(open(os.path.join(r.cwd, "calls.json")))
    assert len(calls) == 28, len(calls)
    return [(c["name"], c["errno"]) for c in calls]


def test_errno_preserved_across_every_interposer():
    """calls_all sets errno to a sentinel before each intercepted call and
    writes errno after it: under stepprof (first call activates it, CUPTI
    on, memory profiling on: every slow path) each value must be what the
    runtime alone left."""
    need_fake_cupti()
    bare = _errno_after_each_call(False, {})
    assert any(e == 4242 for _, e in bare), bare
    for env in ({}, {"PROF_PROFILE_MEMORY": 1}, {"PROF_WITH_STACK": 1}, {"PROF_MARKER": "nvtx:x", "PROF_WAIT": 0}):
        got = _errno_after_each_call(True, env)
        assert got == bare, (env, [(g, b) for g, b in zip(got, bare) if g != b])


def test_own_device_queries_not_in_trace():
    """stepprof reads device properties with cudaGetDeviceCount /
    cudaGetDeviceProperties; CUPTI records those calls too, but they are not
    the program's (train makes none): no trace event, properties still there."""
    _, t = whole_run()
    names = {e["name"] for e in runtime_events(t, all_sources=True)}
    assert not names & {"cudaGetDeviceCount", "cudaGetDeviceProperties"}, names
    assert t["deviceProperties"] and t["deviceProperties"][0]["name"], t.get("deviceProperties")


def test_no_false_another_tool_line_in_fork_children():
    """A fork child inherits CUPTI's copy of its parent's subscription: it
    must not claim that another tool subscribed, nor that CUPTI records its
    GPU work (it makes no CUPTI call: its traces have no GPU source)."""
    need_fake_cupti()
    r = run([prog("rel_fork"), "4", "1", "200"])
    assert r.returncode == 0, r.stderr
    assert "cuda " in r.stdout, r.stdout
    assert not [l for l in r.stderr.splitlines() if "another tool" in l], r.stderr
    assert len(r.traces()) == 3, r.traces()
    sources = sorted(load(p)["stepprof_gpu_source"] for p in r.traces())
    assert sources == ["cupti", "none", "none"], sources


def test_peer_copies_are_gpu_memcpy_ptop():
    """CUPTI reports cudaMemcpyPeer / cudaMemcpyPeerAsync as MEMCPY2
    (CUpti_ActivityMemcpyPtoP4): each becomes a gpu_memcpy PtoP event with
    its bytes, correlated to its call."""
    r, t = whole_run("calls_all", args=("calls.json",))
    calls = {e["name"]: e for e in runtime_events(t)}
    peers = [e for e in gpu(t, "gpu_memcpy") if "PtoP" in e["name"]]
    assert sorted(e["args"]["bytes"] for e in peers) == [4099, 8209], [e["name"] for e in gpu(t, "gpu_memcpy")]
    for p in peers:
        call = "cudaMemcpyPeer" if p["args"]["bytes"] == 8209 else "cudaMemcpyPeerAsync"
        assert p["args"]["correlation"] == calls[call]["args"]["correlation"], (p["args"], calls[call]["args"])


def test_refused_kind_reported_once_by_name():
    """cuptiActivityEnable can refuse one kind (CUPTI_ERROR_NOT_COMPATIBLE,
    14, here for MEMCPY2, kind 22) and accept the others: one stepprof: line
    names what is missing, however often the kinds are switched on, and the
    rest is still recorded."""
    need_fake_cupti()
    r = run([prog("train")], env={"STEPS": 12, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 2, "PROF_WARMUP": 1,
                                   "PROF_ACTIVE": 2, "PROF_REPEAT": 2, "FAKECUPTI_ENABLE_ERROR": 14,
                                   "FAKECUPTI_ENABLE_ERROR_KIND": 22})
    assert r.returncode == 0, r.stderr
    refused = [l for l in r.sp_lines if "refused" in l]
    assert len(refused) == 1 and "peer copies" in refused[0] and "22" in refused[0], r.sp_lines
    traces = r.traces()
    assert len(traces) == 2, traces
    for path in traces:
        assert gpu(load(path), "kernel")


def test_ten_thousand_short_lived_threads_do_not_exhaust_the_pool():
    """20 recorded cycles of 500 threads that each make one CUDA call and
    exit (10k threads) with a 64 MB pool (1024 chunks of 64 KiB): an exited
    thread's chunk must come back once its records are written, or the pool
    is gone after two cycles and the calls are dropped."""
    need_fake_cupti()
    r = run([prog("short_threads"), "20", "500"], env={"PROF_MARKER": "cudaProfilerApi", "PROF_REPEAT": 0, "PROF_BUFFER_MB": 64},
            timeout=170)
    assert r.returncode == 0, r.stderr
    assert "threads 10000" in r.stdout, r.stdout
    traces = sorted(r.traces())
    assert len(traces) == 20, len(traces)
    for path in traces:
        t = load(path)
        assert t["stepprof_dropped_events"] == 0, (path, t["stepprof_dropped_events"])
        sets = runtime_events(t, "cudaMemsetAsync")
        assert len(sets) == 500 and len({e["tid"] for e in sets}) == 500, (path, len(sets))


def test_buffers_completed_on_cuptis_worker_thread():
    """CUPTI hands full buffers to the client on its own worker thread, while
    launching threads keep filling new ones: 8 threads x 4000 launches fill
    several 4 MB buffers mid-run, and every launch still has its kernel."""
    need_fake_cupti()
    r = run([prog("threads"), "8", "4000"])
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    launches = runtime_events(t, "cudaLaunchKernel")
    kernels = gpu(t, "kernel")
    assert len(launches) == 32000 and len(kernels) == 32000, (len(launches), len(kernels))
    assert t["stepprof_dropped_events"] == 0


def test_gpu_checklist_passes_on_the_stand_ins():
    """scripts/gpu_checklist.py (run by gpu-validate.sh) checks on a GPU what
    the stand-in assumes; on the stand-ins every check must say ok. With the
    runtime's own driver calls recorded (FAKECUPTI_RUNTIME_DRIVER_RECORDS; a
    GPU's CUPTI records none, and then the nested-call line has nothing to
    check: n/a), so that every line checks something."""
    need_fake_cupti()
    out = tempfile.mkdtemp(prefix="sp-checklist-")
    try:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu_checklist.py"), out],
                           capture_output=True, text=True, timeout=170,
                           env=dict(os.environ, FAKECUPTI_RUNTIME_DRIVER_RECORDS="1"))
        assert p.returncode == 0, p.stdout + p.stderr
        checks = [l for l in p.stdout.splitlines() if l.startswith("- [")]
        assert len(checks) == 9 and all(l.startswith("- [ok]") for l in checks), p.stdout
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_gpu_work_may_start_before_its_launch_returns():
    """On an idle stream a GPU starts a kernel while the launch call is still
    returning; the stand-in does too, and each such kernel keeps its launch."""
    _, t = whole_run()
    launches = {e["args"]["correlation"]: e for e in runtime_events(t) if e["name"].endswith("LaunchKernel")}
    early = [k for k in gpu(t, "kernel") if k["ts"] < launches[k["args"]["correlation"]]["ts"] +
             launches[k["args"]["correlation"]]["dur"]]
    assert early, "no kernel started inside its launch call"
    assert all(k["ts"] >= launches[k["args"]["correlation"]]["ts"] for k in early)


def _window_membership(skew):
    """Several windows: each trace holds every kernel and every CUPTI API
    record of exactly its own steps, with CUPTI's clock `skew` ns off."""
    need_fake_cupti()
    # cupti_api_filter none: cudaGetLastError, a CUPTI-only query, is counted per window too
    r = run([prog("train")], env={"STEPS": 14, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 1,
                                   "PROF_WARMUP": 1, "PROF_ACTIVE": 2, "PROF_REPEAT": 3,
                                   "FAKECUPTI_CLOCK_SKEW_NS": skew, "PROF_CUPTI_API_FILTER": "none"})
    assert r.returncode == 0, r.stderr
    paths = r.traces()
    assert len(paths) == 3, paths
    for p in paths:
        assert_valid(p)
        t = load(p)
        kernels = gpu(t, "kernel")
        launches = [e for e in runtime_events(t) if e["name"] == "cudaLaunchKernel"]
        # two steps of four launches each: none lost to a neighbour, none doubled
        assert len(kernels) == 8 and len(launches) == 8, (p, len(kernels), len(launches))
        # per step of train.cu: 4 launches (each with push/pop call configuration and
        # cudaGetLastError, calls only CUPTI sees), 2 cudaMemcpyAsync, 1 each of the rest
        calls = collections.Counter(e["name"] for e in runtime_events(t, all_sources=True))
        per_step = {"cudaLaunchKernel": 4, "__cudaPushCallConfiguration": 4, "__cudaPopCallConfiguration": 4,
                    "cudaGetLastError": 4, "cudaMemcpyAsync": 2, "cudaMemcpy": 1, "cudaMemset": 1,
                    "cudaStreamSynchronize": 1}
        assert calls == {k: 2 * v for k, v in per_step.items()}, (p, calls)
        paired = [e for e in runtime_events(t) if e["args"]["correlation"] < t["stepprof_host_correlation_base"]]
        assert len(paired) == len(runtime_events(t)), (p, len(paired), len(runtime_events(t)))
        assert {k["args"]["correlation"] for k in kernels} == {e["args"]["correlation"] for e in launches}


def test_window_membership_cupti_clock_ahead():
    _window_membership(50000)


def test_window_membership_cupti_clock_behind():
    _window_membership(-50000)


def test_calls_only_cupti_records_stay_inside_their_nvtx_range():
    """A call stepprof does not intercept (__cudaPush/PopCallConfiguration,
    cudaGetLastError) has only CUPTI's time, drawn beside NVTX ranges timed by
    the TSC: the two clocks' calibrations must agree to well under the ~60 ns
    between `nvtxRangePushA("optimizer")` and the launch after it, or the call
    is drawn before the range and takes the outer range's External id. A cold,
    1 us-wide calibration bracket once did that in most runs (clock.c). Every
    CUPTI-only call carries the External id of the launch it belongs to
    (push, pop, launch, cudaGetLastError), in three runs."""
    need_fake_cupti()
    for attempt in range(3):
        r = run([prog("train")], env={"STEPS": 5, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 1,
                                       "PROF_ACTIVE": 3, "PROF_CUPTI_API_FILTER": "none"})
        assert r.returncode == 0, r.stderr
        t = load(r.trace())
        calls = sorted(runtime_events(t, all_sources=True), key=lambda e: e["ts"])
        seq = [e["name"] for e in calls]   # cudaLaunchKernel: as drawn for __cudaLaunchKernel too
        launches = [i for i, name in enumerate(seq) if name == "cudaLaunchKernel"]
        assert len(launches) == 12, seq
        for i in launches:
            near = calls[i - 2:i + 2]
            assert [e["name"] for e in near] == ["__cudaPushCallConfiguration", "__cudaPopCallConfiguration",
                                                   "cudaLaunchKernel", "cudaGetLastError"], (attempt, seq[i - 3:i + 3])
            ext = [e["args"].get("External id") for e in near]
            assert len(set(ext)) == 1, (attempt, [(e["name"], e["ts"], e["args"].get("External id")) for e in near])
