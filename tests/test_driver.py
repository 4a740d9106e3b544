"""tests/test_driver.py — issue 13: the CUDA driver API on the libcuda.so.1 stand-in
(tests/fakecuda/fakedriver.c). drv_work.c does the same GPU work with entry points from the program's
own imports, from cuGetProcAddress (itself fetched through cuGetProcAddress), from dlopen + dlsym of
cuGetProcAddress_v2 only (static cudart's way), and from a library the program did not link, loaded
RTLD_LOCAL. Each run must print what it prints without stepprof, and record every driver call once as
a cuda_driver event with its CUPTI driver cbid, every launch with its kernel name and shape, paired
(same correlation id) with CUPTI's kernel record."""
import collections
import json
import os
import tempfile

import test_reports as reports
from harness import LIB, assert_valid, call_result, load, prog, run

# drv_work.c's context sync as each mode gets it: the linked cuCtxSynchronize(void) (direct), or what
# cuGetProcAddress answers at CUDA 13 (proc, dlopen): cuCtxSynchronize_v2(CUcontext), its own cbid.
CTX_SYNC = {"direct": "cuCtxSynchronize", "proc": "cuCtxSynchronize_v2", "dlopen": "cuCtxSynchronize_v2"}
CBIDS = {"cuMemAlloc_v2": 243, "cuMemcpyHtoD_v2": 276, "cuLaunchKernel": 307, "cuMemsetD8_v2": 249,
         "cuMemcpyDtoH_v2": 278, "cuStreamSynchronize": 126, "cuCtxSynchronize": 17, "cuCtxSynchronize_v2": 800,
         "cuMemFree_v2": 245}


def calls(mode):
    """drv_work.c's recorded calls, in order, in `mode`."""
    return (["cuMemAlloc_v2", "cuMemcpyHtoD_v2"] + ["cuLaunchKernel"] * 5 +
            ["cuMemsetD8_v2", "cuMemcpyDtoH_v2", "cuStreamSynchronize", CTX_SYNC[mode], "cuMemFree_v2"])


def _check(argv, mode, libs=()):
    for lib in libs:
        prog(lib)
    bare = run(argv, preload=False)
    assert bare.returncode == 0, bare.stderr
    r = run(argv)
    assert r.returncode == 0 and r.stdout == bare.stdout, (r.returncode, r.stdout, r.stderr)
    assert "launches=5" in r.stdout
    path = r.trace()
    assert_valid(path)
    trace = load(path)
    ev = trace["traceEvents"]
    host = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"
            and e["args"].get("stepprof_source") != "cupti"]
    assert [e["name"] for e in host] == calls(mode), [e["name"] for e in host]
    for e in host:
        assert e["args"]["cbid"] == CBIDS[e["name"]] and call_result(e) == 0, e
    # Once each: CUPTI's own record of an intercepted call is merged into the host event.
    cupti_dups = [e["name"] for e in ev if e.get("cat") == "cuda_driver" and e["name"] in CBIDS
                  and e["args"].get("stepprof_source") == "cupti"]
    assert not cupti_dups, cupti_dups
    assert not [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaLaunch")]
    # launch_durations: auto: a driver launch reads the clock at both ends (CUPTI records no DRIVER
    # record of the driver calls a runtime makes: on a GPU, cuBLAS's and cuDNN's launches then lasted 0).
    assert "stepprof_launch_ends" not in trace, trace["stepprof_launch_ends"]
    assert all(e["dur"] > 0 for e in host if e["name"] == "cuLaunchKernel"), host
    launches = [e["args"] for e in host if e["name"] == "cuLaunchKernel"]
    for a in launches:
        assert a["kernel"] == "drv_kernel(float*)", a
        assert a["grid"] == [4, 1, 1] and a["block"] == [256, 1, 1] and a["shared memory"] == 128, a
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(a["correlation"] for a in launches)
    assert {k["name"] for k in kernels} == {"drv_kernel(float*)"}
    alloc = host[0]["args"]
    assert alloc["bytes"] == 4096 and alloc["ptr"] != 0, alloc
    return ev


def test_driver_linked():
    _check([prog("drv_linked"), "direct"], "direct")


def test_driver_cugetprocaddress():
    _check([prog("drv_linked"), "proc"], "proc")


def test_driver_static_cudart_style():
    """Reaches the driver only through dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2")."""
    _check([prog("drv_static"), "dlopen"], "dlopen")


def test_driver_launch_durations():
    """launch_durations: `start` times a driver launch by its start too, its end CUPTI's DRIVER record's;
    `auto` (above) and `host` read the clock at both ends."""
    r = run([prog("drv_linked"), "direct"], env={"PROF_LAUNCH_DURATIONS": "start"})
    assert r.returncode == 0 and "launches=5" in r.stdout, r.stderr
    t = load(r.trace())
    launches = [e for e in t["traceEvents"] if e.get("name") == "cuLaunchKernel" and e.get("ph") == "X"
                and e["args"].get("stepprof_source") != "cupti"]
    assert t["stepprof_launch_ends"] == {"cupti": 5, "none": 0}, t.get("stepprof_launch_ends")
    assert len(launches) == 5 and all(e["dur"] > 0 for e in launches), launches


def test_driver_from_unlinked_library():
    """cuBLAS-style: a library the program did not link, loaded RTLD_LOCAL, launches through the driver."""
    _check([prog("plugin_host"), "drv"], "direct", libs=("libdrvblas.so",))


def test_driver_memory():
    """Driver allocations feed profile_memory: the block is allocated and freed, nothing leaks."""
    r = run([prog("drv_linked"), "direct"], env={"PROF_PROFILE_MEMORY": 1})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    mem = [e for e in t["traceEvents"] if e.get("name") == "[memory]"]
    assert [e["args"]["Bytes"] for e in mem] == [4096, -4096], mem


def test_driver_kernel_marker():
    """A kernel: marker on driver-API launches (Triton's way): the CUfunction is named when the marker
    first sees it, before any window records (it used to stay unnamed, so cached "never matches", and
    the run recorded nothing). A boundary per launch of drv_kernel: steps 0-1 are launches 2 and 3."""
    for argv in ([prog("drv_linked"), "direct"], [prog("drv_static"), "dlopen"]):
        r = run(argv, env={"PROF_MARKER": "kernel:drv_kernel*", "PROF_WARMUP": 1, "PROF_ACTIVE": 2})
        assert r.returncode == 0 and "launches=5" in r.stdout, (r.stdout, r.stderr)
        t = load(r.trace())
        launches = [e for e in t["traceEvents"] if e.get("cat") == "cuda_driver" and e["name"] == "cuLaunchKernel"
                    and e["args"].get("stepprof_source") != "cupti"]
        assert [e["args"]["kernel"] for e in launches] == ["drv_kernel(float*)"] * 2, (argv, launches)


def test_driver_injection_only():
    """Static cudart's case on a GPU machine without LD_PRELOAD: the driver loads stepprof from
    CUDA_INJECTION64_PATH; every driver call comes from CUPTI's DRIVER records (named as the driver
    exports them), on a thread stepprof never saw, and its kernels are paired with them."""
    r = run([prog("drv_static"), "dlopen"], preload=False, env={"CUDA_INJECTION64_PATH": LIB})
    assert r.returncode == 0 and "launches=5" in r.stdout, r.stderr
    path = r.trace()
    assert_valid(path)  # the CUPTI-only thread has its thread_name
    ev = load(path)["traceEvents"]
    drv = [e for e in ev if e.get("cat") == "cuda_driver"]
    assert all(e["args"].get("stepprof_source") == "cupti" for e in drv)
    names = [e["name"] for e in drv]
    for name in calls("dlopen"):
        assert names.count(name) == (5 if name == "cuLaunchKernel" else 1), (name, names)
    assert "cuCtxSynchronize" not in names, names
    for e in drv:
        assert e["args"]["cbid"] == CBIDS.get(e["name"], e["args"]["cbid"]), e
    launches = [e["args"]["correlation"] for e in drv if e["name"] == "cuLaunchKernel"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(launches)


# ---- CUDA 13's new ABIs: cuCtxSynchronize_v2(ctx), cuCtxGetDevice_v2(dev, ctx) ---------------------------
# Found on an H200 (CUDA 13): cuGetProcAddress asked for "cuCtxSynchronize" at 13000 answers with
# cuCtxSynchronize_v2, which stepprof did not interpose, so such programs' context syncs went undrawn.
# drv_versions.c's syncs, in order: at 13000 with NULL and with its context, at 12080, dlsym's
# cuCtxSynchronize_v2 and cuCtxSynchronize (with a second device: at 13000 with that device's context).
VERSIONED_SYNCS = ["cuCtxSynchronize_v2", "cuCtxSynchronize_v2", "cuCtxSynchronize", "cuCtxSynchronize_v2",
                   "cuCtxSynchronize"]


def _blocking_calls(summary):
    """The summary's "Blocking host calls" rows: [name, "count", N]."""
    return [l.split()[:3] for l in summary.split("Blocking host calls")[1].split("\n\n")[0].splitlines()[1:]]


def _versioned_syncs(r, source):
    """r's drawn context syncs of `source` ("host" or "cupti") as (name, cbid), checked against
    drv_versions' output and its CUPTI records: each once, the other device's waited on its context."""
    ev = load(r.trace())["traceEvents"]
    drv = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"
           and e["name"].startswith("cuCtxSynchronize")]
    assert all((e["args"].get("stepprof_source") == "cupti") == (source == "cupti") for e in drv), drv
    contexts = {e["args"]["correlation"]: e["args"]["context"] for e in ev if e.get("name") == "Context Sync"}
    assert sorted(contexts) == sorted(e["args"]["correlation"] for e in drv), (contexts, drv)
    assert list(contexts.values()) == [1] * (len(drv) - 1) + [2 if "current=0" in r.stdout else 1], contexts
    return [(e["name"], e["args"]["cbid"]) for e in drv]


def test_context_sync_asked_by_version():
    """cuGetProcAddress("cuCtxSynchronize") answers by version, as NVIDIA's: CUDA 13's
    cuCtxSynchronize_v2(CUcontext) at 13000, cuCtxSynchronize(void) at 12080 (cuCtxGetDevice alike);
    dlsym gives each by its exported name. Preloaded, every answer is stepprof's interposer of the very
    function the driver gave: the program prints what it prints bare, and each sync is drawn once under
    the name and cbid of the function called (cuCtxSynchronize_v2: 800, cuCtxSynchronize: 17). Static
    cudart's case (CUDA_INJECTION64_PATH, no preload) draws the same from CUPTI's records."""
    for env in ({}, {"FAKECUDA_DEVICES": 2}):
        want = [(n, CBIDS[n]) for n in VERSIONED_SYNCS + ["cuCtxSynchronize_v2"] * bool(env)]
        bare = run([prog("drv_versions")], preload=False, env=env)
        assert bare.returncode == 0 and "distinct=1" in bare.stdout and "devices=0,0,0" in bare.stdout, bare
        assert ("current=0" in bare.stdout) == bool(env), bare.stdout
        r = run([prog("drv_versions")], env=env)
        assert r.returncode == 0 and r.stdout == bare.stdout, (r.stdout, r.stderr)
        assert _versioned_syncs(r, "host") == want, env
        # Both are waits in the summary's count (exporters/summary.c lists sync calls by name).
        blocking = _blocking_calls(reports.outputs(r, ".summary.txt"))
        assert sorted(blocking) == [["cuCtxSynchronize", "count", "2"],
                                    ["cuCtxSynchronize_v2", "count", str(3 + bool(env))]], blocking
        r = run([prog("drv_versions")], preload=False, env={**env, "CUDA_INJECTION64_PATH": LIB})
        assert r.returncode == 0 and r.stdout == bare.stdout, (r.stdout, r.stderr)
        assert _versioned_syncs(r, "cupti") == want, env


# ---- deviceProperties without a shared runtime to ask (issue 17) --------------------------------------
# A static-cudart or driver-API program has no shared libcudart: on an H200 its trace's deviceProperties
# was empty. stepprof then asks the driver (cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
# cuDeviceTotalMem_v2, cuDeviceGetAttribute). The driver stand-in brings the runtime stand-in into the
# process (tests/fakecuda/README.md), so here the runtime's answer is made to fail with FAKECUDA_FAIL,
# which the driver's own entry points do not share.
OWN_QUERIES = {"cudaGetDeviceCount", "cudaGetDeviceProperties", "cuDeviceGetCount", "cuDeviceGetName",
               "cuDeviceTotalMem_v2", "cuDeviceGetAttribute"}


def _shared_runtime_props():
    r = run([prog("train")], env={"STEPS": 2})
    assert r.returncode == 0, r.stderr
    props = load(r.trace())["deviceProperties"]
    assert len(props) == 1 and props[0]["name"] and props[0]["numSms"] > 0, props
    return props


def _props_and_calls(preload, env):
    bare = run([prog("drv_static"), "dlopen"], preload=False)
    # cupti_api_filter none: the program's own query records (cuDeviceGet) stay, to tell them from ours.
    r = run([prog("drv_static"), "dlopen"], preload=preload, env=dict(env, PROF_CUPTI_API_FILTER="none"))
    assert r.returncode == 0 and r.stdout == bare.stdout, (r.stdout, r.stderr)
    path = r.trace()
    assert_valid(path)
    t = load(path)
    calls = collections.Counter(e["name"] for e in t["traceEvents"] if e.get("ph") == "X"
                                and e.get("cat") in ("cuda_runtime", "cuda_driver"))
    # None of stepprof's queries is the program's call; the program's cuDeviceGet and cuInit stay, once
    # each (stepprof never calls cuInit: its queries wait for the program's).
    assert not OWN_QUERIES & set(calls) and calls["cuDeviceGet"] == 1 and calls["cuInit"] == 1, calls
    return t["deviceProperties"]


def test_device_properties_through_driver():
    """Preloaded: the first try runs after an intercepted driver call returns; the runtime answers
    nothing (its count or its properties fail), the driver gives what a shared-runtime program gets."""
    want = _shared_runtime_props()
    for fail in ("cudaGetDeviceProperties", "cudaGetDeviceCount"):
        assert _props_and_calls(True, {"FAKECUDA_FAIL": fail}) == want, fail


def test_device_properties_injection_only():
    """Static cudart's case on a GPU: stepprof loaded by the driver, no call of the program intercepted,
    so the only try is the exit's, before its trace is written; from the runtime or else the driver."""
    want = _shared_runtime_props()
    for env in ({}, {"FAKECUDA_FAIL": "cudaGetDeviceProperties"}):
        assert _props_and_calls(False, {"CUDA_INJECTION64_PATH": LIB, **env}) == want, env


def test_device_properties_unknown_when_nothing_answers():
    """Neither the runtime nor the driver answers: deviceProperties is [], every try's calls stay out of
    the trace, the program's run is unchanged."""
    env = {"FAKECUDA_FAIL": "cudaGetDeviceProperties,cuDeviceGetAttribute"}
    assert _props_and_calls(True, env) == []


def test_runtime_kernel_launched_through_driver():
    """An nvcc kernel (registered by the runtime) launched with cuLaunchKernel on the CUfunction from
    cudaGetFuncBySymbol: each launch once, named, paired with its kernel."""
    bare = run([prog("drv_bysym")], preload=False)
    r = run([prog("drv_bysym")])
    assert bare.returncode == r.returncode == 0 and r.stdout == bare.stdout and "launches=3" in r.stdout, r.stderr
    path = r.trace()
    assert_valid(path)
    ev = load(path)["traceEvents"]
    launches = [e for e in ev if e.get("name") == "cuLaunchKernel"]
    assert len(launches) == 3 and all(e["args"].get("stepprof_source") != "cupti" for e in launches)
    assert {e["args"]["kernel"] for e in launches} == {"drv::scale_kernel(float*, float)"}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(e["args"]["correlation"] for e in launches)


# ---- a runtime call implemented by a driver call is one call -----------------------------------------
# The runtime stand-in implements cudaMalloc, cudaFree, cudaMemset, cudaMemcpy (HtoD, DtoH),
# cudaLaunchKernel, cudaStreamSynchronize and cudaDeviceSynchronize with driver calls it got from
# dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2") + cuGetProcAddress, as NVIDIA's runtime does.
# Under the preload those pointers are stepprof's driver interposers (inject/driver_proc.c).

ROUTED = ("cuMemAlloc", "cuMemFree", "cuMemsetD8", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuLaunchKernel",
          "cuStreamSynchronize", "cuCtxSynchronize")
TRAIN = {"STEPS": 8, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 1, "PROF_ACTIVE": 3,
         "PROF_TABLE_ROW_LIMIT": -1, "FAKECUDA_LOG_DRIVER": 1}
# train_c's calls in the 3 recorded steps.
TRAIN_CALLS = {"cudaLaunchKernel": 12, "cudaMemcpy": 3, "cudaMemcpyAsync": 6, "cudaMemset": 3,
               "cudaStreamSynchronize": 3}


def _driver_origins(stderr):
    return dict(l[len("fakecuda: "):].split(" from ") for l in stderr.splitlines() if l.startswith("fakecuda: cu"))


def _train(env):
    bare = run([prog("train_c")], preload=False, env=TRAIN)
    assert bare.returncode == 0, bare.stderr
    assert all(v.endswith("/libcuda.so.1") for v in _driver_origins(bare.stderr).values()), bare.stderr
    r = run([prog("train_c")], env={**TRAIN, **env})
    assert r.returncode == 0 and r.stdout == bare.stdout, r.stderr
    got = _driver_origins(r.stderr)
    # Every driver entry point the runtime calls is stepprof's wrapper: the test reaches the interposers.
    assert sorted(got) == sorted(ROUTED) and all(v == LIB for v in got.values()), got
    path = r.trace()
    assert_valid(path)
    return r, load(path)["traceEvents"]


def _tables_count_each_call_once(r):
    headers, rows = reports.parse_table(reports.outputs(r, ".key_averages.txt"))
    calls = {row["Name"]: row for row in rows}
    for name, n in TRAIN_CALLS.items():
        assert int(calls[name]["# of Calls"]) == n, (name, calls[name])
    drv = [n for n in calls if n.startswith("cu") and n[2:3].isupper()]
    assert not drv, f"driver calls made inside runtime calls are not rows of their own: {drv}"
    # The inner driver call takes no self time from its runtime call.
    for name in TRAIN_CALLS:
        assert calls[name]["Self CPU"] == calls[name]["CPU total"], calls[name]
    summary = reports.outputs(r, ".summary.txt")
    blocking = _blocking_calls(summary)
    assert blocking == [["cudaStreamSynchronize", "count", "3"]], blocking
    # The offline tool reading the trace agrees.
    assert reports.tool(r.trace(), "--row-limit", "-1").stdout == reports.outputs(r, ".key_averages.txt")
    assert reports.tool(r.trace(), "--summary").stdout == summary


def test_runtime_call_through_driver_recorded_once():
    """Host side (no CUPTI): the driver interposer reached from inside the runtime call records nothing
    (the runtime interposer holds the recursion guard); each call is one event, one table count."""
    r, ev = _train({"PROF_CUPTI": 0})
    assert not [e for e in ev if e.get("cat") == "cuda_driver"], "no driver event: each call is recorded once"
    rt = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime" and e.get("ph") == "X")
    for name, n in TRAIN_CALLS.items():
        assert rt[name] == n, (name, rt)
    _tables_count_each_call_once(r)


def test_runtime_call_driver_calls_unrecorded_by_cupti():
    """As on a GPU, CUPTI writes no DRIVER record of the driver calls the runtime makes: the trace has
    no driver event at all, each kernel pairs with its runtime launch (the runtime call's id), and the
    tables count each runtime call once."""
    r, ev = _train({})
    assert not [e for e in ev if e.get("cat") == "cuda_driver"], "no driver event"
    launches = {e["args"]["correlation"] for e in ev if e.get("name") == "cudaLaunchKernel" and e.get("ph") == "X"}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert len(kernels) == 12 and {k["args"]["correlation"] for k in kernels} == launches
    _tables_count_each_call_once(r)


def test_runtime_call_nested_driver_records_stay_out_of_tables():
    """Should a CUPTI record the driver call each runtime call makes with the runtime call's id (the
    stand-in's FAKECUPTI_RUNTIME_DRIVER_RECORDS; no GPU has shown it), the trace draws it nested in its
    runtime call as CUPTI gave it, inside it whatever the offset between CUPTI's clock and the host's
    (the launch itself lasts as long as CUPTI's record of it); the table and the summary count the
    runtime call only."""
    nested = {"FAKECUPTI_RUNTIME_DRIVER_RECORDS": 1}
    for skew in (5000, -5000):
        _, ev = _train({**nested, "FAKECUPTI_CLOCK_SKEW_NS": skew})
        _nested_inside(ev)
    r, ev = _train(nested)
    _nested_inside(ev)
    _tables_count_each_call_once(r)


def _nested_inside(ev):
    host = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"
            and e["args"].get("stepprof_source") != "cupti"}
    inner = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    assert not [e for e in inner if e["args"].get("stepprof_source") != "cupti"], "no host driver event"
    names = collections.Counter(e["name"] for e in inner)
    assert names == {"cuLaunchKernel": 12, "cuMemcpyHtoD_v2": 3, "cuMemsetD8_v2": 3,
                     "cuStreamSynchronize": 3}, names
    for e in inner:
        # Its id is the runtime call's, written so that clients do not count the call's GPU work twice.
        assert "correlation" not in e["args"], e
        outer = host.get(e["args"]["stepprof_runtime_correlation"])
        assert outer and outer["tid"] == e["tid"], e
        assert outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"], (outer, e)
        assert {"cuLaunchKernel": "cudaLaunchKernel", "cuMemcpyHtoD_v2": "cudaMemcpy", "cuMemsetD8_v2": "cudaMemset",
                "cuStreamSynchronize": "cudaStreamSynchronize"}[e["name"]] == outer["name"], (outer, e)
    # Every kernel still pairs with its runtime launch.
    launches = {c for c, e in host.items() if e["name"] == "cudaLaunchKernel"}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert len(kernels) == 12 and {k["args"]["correlation"] for k in kernels} == launches


def test_nested_driver_records_dropped_whatever_starts_between():
    """The table drops a nested driver record by looking up its runtime call by correlation id. GPU work
    that starts inside a runtime call, before that call's driver record (the stream's earlier kernel, as
    happened under ASan's slower host calls), sorts between the two: each lookup must still find the
    runtime call, not the event that took its slot when an earlier nested record left the set. A hand-
    written trace through the offline tool, the same aggregation the profiled process runs, so the order
    is fixed; the program's own driver call on another thread (its own id) stays a row."""
    ev, n = [], 5
    for i in range(n):
        t, c = 10.0 * i, i + 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
                   "dur": 8.0, "args": {"cbid": 211, "correlation": c, "grid": [1, 1, 1], "block": [32, 1, 1]}})
        ev.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2,
                   "dur": 3.0, "args": {"cbid": 307, "stepprof_runtime_correlation": c, "stepprof_source": "cupti"}})
        if i:   # the previous launch's kernel starts inside this call, before its driver record
            ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 1, "dur": 9.0,
                       "args": {"correlation": c - 1}})
    ev.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 2, "ts": 3.0,
               "dur": 4.0, "args": {"cbid": 307, "correlation": 100}})
    with tempfile.TemporaryDirectory(prefix="sp-test-") as d:
        path = os.path.join(d, "nested.pt.trace.json")
        with open(path, "w") as f:
            json.dump({"traceEvents": ev}, f)
        _, rows = reports.parse_table(reports.tool(path, "--row-limit", "-1").stdout)
    calls = {row["Name"]: row for row in rows}
    assert sorted(calls) == ["cuLaunchKernel", "cudaLaunchKernel", "k"], sorted(calls)
    assert calls["cudaLaunchKernel"]["# of Calls"] == str(n) and calls["cuLaunchKernel"]["# of Calls"] == "1", calls
    assert calls["cudaLaunchKernel"]["Self CPU"] == calls["cudaLaunchKernel"]["CPU total"] == "40.000us", calls


def test_function_of_a_module_loaded_after_an_unload_gets_its_own_name():
    """A module unloaded frees its functions; one got from a module loaded later may have the same
    address (the stand-in's heap, as NVIDIA's, hands it out again: drv_reload prints reused=1). That
    function is named as the program gets it (cuModuleGetFunction), as a runtime stub is at its
    registration: its launches are not drawn under the unloaded kernel's name, and a kernel: marker's
    verdict on the old function ("never matches") is not kept for the new one."""
    r = run([prog("drv_reload")], env={"PROF_CUPTI": 0})
    assert r.returncode == 0 and "reused=1" in r.stdout and "launches=6" in r.stdout, (r.stdout, r.stderr)
    launches = [e for e in load(r.trace())["traceEvents"] if e.get("name") == "cuLaunchKernel"]
    assert len(launches) == 6, launches
    assert [e["args"]["kernel"] for e in launches[3:]] == ["kernel_b(float*)"] * 3, launches
    # A boundary per launch of kernel_b: after a warmup step, the window holds one launch.
    r = run([prog("drv_reload")], env={"PROF_MARKER": "kernel:kernel_b*", "PROF_WAIT": 0, "PROF_WARMUP": 1,
                                       "PROF_ACTIVE": 1})
    assert r.returncode == 0 and "reused=1" in r.stdout, (r.stdout, r.stderr)
    t = load(r.trace())
    drawn = [e for e in t["traceEvents"] if e.get("name") == "cuLaunchKernel" and
             e["args"].get("stepprof_source") != "cupti"]
    assert [e["args"]["kernel"] for e in drawn] == ["kernel_b(float*)"], drawn
    assert sorted(e["name"] for e in t["traceEvents"] if e.get("cat") == "kernel") == ["kernel_b(float*)"]
