"""tests/test_runtime.py — issue 2: libstepprof.so records the runtime calls of
unmodified programs into a valid Chrome trace. Every test starts real processes
under LD_PRELOAD and checks the files they wrote."""
import json
import os
import re
import subprocess

from harness import (LIB, ROOT, CUDA_HOME, Skip, api_name, assert_valid, call_result, load, prog, run, runtime_events)
from check_trace import check

API_NAMES = None


def api_names():
    """The interposed symbols, read from collectors/api.h's table."""
    global API_NAMES
    if API_NAMES is None:
        src = open(os.path.join(ROOT, "collectors", "api.h")).read()
        API_NAMES = re.findall(r"X\((\w+), \d+, \w+, [01]\)", src)
    return API_NAMES


def test_exports_only_interposed_symbols():
    out = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True, check=True).stdout
    syms = {line.split()[-1] for line in out.splitlines() if line.strip()}
    allowed = set(api_names()) | {"__cudaRegisterFunction", "__cudaGetKernel", "InitializeInjectionNvtx2",
                                  "stepprof_torch",  # the PyTorch bootstrap calls back (inject/torch.c)
                                  "stepprof_pystack",  # with_stack: the bootstrap turns Python frames on (inject/pystack.c)
                                  "stepprof_torch_lists",  # record_shapes: operators' tensor-list args (inject/torch_lists.c)
                                  "stepprof_torch_dist",  # torch.distributed's rank and backend (inject/torch.c)
                                  "InitializeInjection", "dlopen", "_exit", "_Exit",
                                  # main's pthread_exit: the process still ends with its last thread
                                  "pthread_exit",
                                  # a program that ends itself by its signal at SIG_DFL (selfsignal.c)
                                  "raise", "kill", "pthread_kill",
                                  # exec writes the image's recording first (inject/exec_hooks.c)
                                  "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve",
                                  # driver allocation calls and the device tracker of profile_memory
                                  "cudaSetDevice", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync",
                                  "cuMemAllocAsync_ptsz", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemCreate",
                                  "cuMemRelease", "cuMemMap", "cuMemUnmap",
                                  # a CUfunction named as the program gets it (inject/driver_api_hooks.c)
                                  "cuModuleGetFunction",
                                  # driver API rows of collectors/api.h and the entry-point hand-out hooks
                                  "cuGetProcAddress", "cuGetProcAddress_v2", "dlsym"}
    allowed |= set(re.findall(r"DRV\((\w+), \d+, \w+, [01]\)", open(os.path.join(ROOT, "collectors", "api.h")).read()))
    extra = sorted(s for s in syms if s not in allowed)
    assert not extra, f"unexpected exported symbols: {extra}"
    assert set(api_names()) <= syms, f"missing interposers: {sorted(set(api_names()) - syms)}"


def _compare_calls(binary):
    r0 = run([prog(binary), "expected.json"])
    assert r0.returncode == 0, r0.stderr
    expected = json.load(open(os.path.join(r0.cwd, "expected.json")))
    path = r0.trace()
    assert_valid(path)
    got = runtime_events(load(path))
    names = [api_name(e) for e in got]
    assert names == [x["name"] for x in expected], f"order/names differ:\n got {names}\n exp {[x['name'] for x in expected]}"
    tid = {e["tid"] for e in got}
    assert len(tid) == 1 and tid == {got[0]["pid"]}, f"calls came from the main thread, got tids {tid}"
    for g, x in zip(got, expected):
        a = g["args"]
        assert call_result(g) == x["ret"], f"{x['name']}: result {call_result(g)} != {x['ret']}"
        for key in ("kind", "stream", "value", "grid", "block", "shared memory", "event", "dstDevice",
                    "srcDevice"):
            if key in x:  # a call's stream is "stream handle": HTA reads args.stream as GPU work
                got_v = a.get("stream handle" if key == "stream" else key)
                if key == "shared memory":  # written only when not 0 (docs/formats.md)
                    assert a.get(key) != 0, f"{x['name']}: shared memory 0 is never written"
                    got_v = a.get(key, 0)
                assert got_v == x[key], f"{x['name']}: {key} {got_v} != {x[key]}"
        if "bytes" in x:
            want = x["bytes"] if x["name"] != "cudaMallocPitch" or not x.get("pitch") else x["pitch"] * x["height"]
            assert a.get("bytes") == want, f"{x['name']}: bytes {a.get('bytes')} != {want}"
        if "ptr" in x:
            key = "dst" if x["name"].startswith("cudaMemcpy") else "ptr"  # a copy's "ptr" is where it wrote
            assert a.get(key) == x["ptr"], f"{x['name']}: {key} {a.get(key)} != {x['ptr']}"
        if x.get("flags"):
            assert a.get("flags") == x["flags"], f"{x['name']}: flags"
        assert g["args"]["cbid"] > 0 and g["dur"] >= 0
    return got


def test_every_call_once_in_order_with_arguments():
    got = _compare_calls("calls_all")
    assert all(call_result(e) == 0 for e in got), [(e["name"], call_result(e)) for e in got if call_result(e)]


def test_every_call_ptsz_spellings():
    got = _compare_calls("calls_all_ptsz")
    names = {api_name(e) for e in got}
    assert {"cudaMemcpy_ptds", "cudaMemcpyAsync_ptsz", "cudaLaunchKernel_ptsz", "cudaMemset_ptds"} <= names, names


def _train_kernels(binary, launch_api):
    r = run([prog(binary)], env={"STEPS": 5})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    launches = runtime_events(t, launch_api)
    assert launches, f"no {launch_api} events"
    kernels = {e["args"].get("kernel") for e in launches}
    assert None not in kernels, "a launch without kernel name"
    assert any("<" in k and ">" in k for k in kernels), f"no demangled template kernel in {kernels}"
    assert not any(k.startswith("_Z") for k in kernels), f"mangled names left: {kernels}"
    return t, kernels


def test_train_cu_launches_cuda13_path_demangled():
    t, kernels = _train_kernels("train", "__cudaLaunchKernel")
    assert not runtime_events(t, "cudaLaunchKernel"), "CUDA 13 <<<>>> should go through __cudaLaunchKernel"
    assert any("::" in k for k in kernels), f"namespaced kernel missing: {kernels}"


def test_train_cu_per_thread_default_stream():
    t, _ = _train_kernels("train_ptsz", "__cudaLaunchKernel_ptsz")
    names = {api_name(e) for e in runtime_events(t)}
    assert "cudaMemcpyAsync_ptsz" in names and "cudaMemcpy_ptds" in names, names


def test_train_c_trace_valid_and_complete():
    r = run([prog("train_c")], env={"STEPS": 4})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    launches = runtime_events(t, "cudaLaunchKernel")
    assert len(launches) % 4 == 0 and launches, len(launches)
    assert all(e["args"].get("kernel") for e in launches), "C host functions named via dladdr"
    assert re.match(r".*/[^/]+_\d+\.\d+\.pt\.trace\.json$", path), path
    assert t["traceName"] == path or t["traceName"].endswith(os.path.basename(path))
    assert t["stepprof_dropped_events"] == 0


def test_no_cuda_program_unchanged_and_writes_nothing():
    bare = run([prog("nocuda")], preload=False, fake=False)
    pre = run([prog("nocuda")])
    assert (pre.returncode, pre.stdout, pre.stderr) == (bare.returncode, bare.stdout, bare.stderr)
    assert pre.returncode == 3
    assert not os.path.exists(pre.outdir), "a process without CUDA must write nothing"
    assert os.listdir(pre.cwd) == [], os.listdir(pre.cwd)


def test_output_and_exit_code_unchanged():
    for name, args in (("exitcode", []), ("train_c", [])):
        bare = run([prog(name)] + args, preload=False, env={"STEPS": 3})
        pre = run([prog(name)] + args, env={"STEPS": 3})
        assert pre.returncode == bare.returncode, (name, pre.returncode, bare.returncode)
        assert pre.stdout == bare.stdout, name
        assert pre.other_stderr == bare.stderr, (name, pre.other_stderr, bare.stderr)
    assert bare.returncode == 0 and run([prog("exitcode")]).returncode == 7


def test_real_cudart_without_gpu():
    real = os.path.join(CUDA_HOME, "lib64", "libcudart.so.13")
    if not os.path.exists(real):
        raise Skip(f"no NVIDIA libcudart at {real}")
    names = ["train_c"]
    if os.path.exists(os.path.join(os.path.dirname(LIB), "programs", "train")):
        names.append("train")
    for name in names:
        bare = run([prog(name)], preload=False, fake=False, env={"STEPS": 2})
        r = run([prog(name)], fake=False, env={"STEPS": 2})
        assert r.returncode == bare.returncode == 0, (name, r.returncode, r.stderr[-2000:])
        assert r.stdout == bare.stdout
        path = r.trace()
        assert_valid(path)
        ev = runtime_events(load(path))
        assert ev, "calls recorded"
        failed = [e for e in ev if call_result(e) != 0]
        assert len(failed) == len(ev), f"{name}: with no driver every call fails; ok: {[e['name'] for e in ev if call_result(e) == 0]}"
        assert {call_result(e) for e in ev if e["name"] == "cudaMalloc"} == {35}


def test_threads_exact_count():
    r = run([prog("threads"), "8", "10000"], env={"FAKECUDA_KERNEL_NS": 0})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    launches = runtime_events(t, "cudaLaunchKernel")
    assert len(launches) == 80000, len(launches)
    assert t["stepprof_dropped_events"] == 0
    per_thread = {}
    for e in launches:
        per_thread[e["tid"]] = per_thread.get(e["tid"], 0) + 1
    assert sorted(per_thread.values()) == [10000] * 8, per_thread
    corr = {(e["tid"], e["args"]["correlation"]) for e in launches}
    assert len(corr) == 80000, "correlation ids unique"


def test_threads_tiny_buffer_exact_drop_count():
    full = run([prog("threads"), "8", "10000"], env={"FAKECUDA_KERNEL_NS": 0})
    total = len(runtime_events(load(full.trace())))  # the launches plus the main thread's own calls
    r = run([prog("threads"), "8", "10000"], env={"FAKECUDA_KERNEL_NS": 0, "PROF_BUFFER_MB": 1})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    kept = len(runtime_events(t))
    dropped = t["stepprof_dropped_events"]
    assert dropped > 0 and kept > 0, (kept, dropped)
    assert kept + dropped == total, (kept, dropped, total)


def test_static_cudart_warning():
    r = run([prog("train_static")], env={"STEPS": 1})
    assert r.returncode == 0
    assert any("statically" in l for l in r.sp_lines), r.sp_lines
    assert len([l for l in r.sp_lines if "statically" in l]) == 1


def test_trace_checker_selftest():
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run(["python3", os.path.join(here, "lib", "test_check_trace.py")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_unit_binaries():
    unit = os.path.join(os.path.dirname(LIB), "unit")
    bins = sorted(os.listdir(unit)) if os.path.isdir(unit) else []
    bins = [b for b in bins if b.startswith("test_") and "." not in b]
    assert bins, "unit tests were not built"
    for b in bins:
        p = subprocess.run([os.path.join(unit, b)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"{b} failed:\n{p.stdout[-3000:]}{p.stderr[-2000:]}"


def test_names_escaped_and_rewritten():
    r = run([prog("markers_misc"), "names"], env={"STEPS": 2})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)   # valid JSON despite quotes, control characters and invalid UTF-8
    names = [e["name"] for e in t["traceEvents"] if e.get("cat") == "user_annotation"]
    want = 'quote" back/slash tab\t nl ctrl\x01 bad\ufffd e\u00e9'
    assert names.count(want) == 2, names
    thread = [e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "thread_name"]
    assert any('q"b/t\tx' in n for n in thread), thread


def test_finalize_timeout_expiry_loses_only_the_last_cycle():
    """An export still running when the exit's bound (exit_timeout_s; finalize_timeout_s is the
    signals') expires is given up: the program exits with its own status, one line says so, and
    nothing that looks like a trace is left half-written. (The exporter may still win the race on a
    loaded machine: then the trace is whole and the line says that its reports are lost; 800k events,
    ~0.3 s of export, make that rare. 160k once lost the race in clean-clone CI.)"""
    r = run([prog("threads"), "8", "100000"], env={"FAKECUDA_KERNEL_NS": 0, "PROF_CUPTI": 0,
                                                   "PROF_EXIT_TIMEOUT_S": 0})
    assert r.returncode == 0 and "total_launches 800000" in r.stdout, r.stderr
    lost = [l for l in r.sp_lines if "exit_timeout_s" in l]
    assert len(lost) == 1, r.sp_lines
    # The line says what the directory holds: no trace and the trace's events lost, or (the writer won
    # the race) a complete trace and only reports lost.
    if r.traces():
        assert "the last trace is whole" in lost[0] and "lost" in lost[0], lost
        for path in r.traces():
            assert_valid(path)
    else:
        assert "the trace being written (" in lost[0] and " events) is lost" in lost[0], lost
