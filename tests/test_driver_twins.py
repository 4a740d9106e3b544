"""tests/test_driver_twins.py — the driver's per-thread-default-stream twins. A program built with
-DCUDA_API_PER_THREAD_DEFAULT_STREAM (nvcc --default-stream per-thread) calls cuLaunchKernel_ptsz,
cuMemcpyHtoD_v2_ptds, ... (cuda.h renames the plain names), and cuGetProcAddress asked with
CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM hands those twins out (a per-thread static cudart, Triton,
JAX). drv_work.c is built both ways (drv_linked / drv_linked_pt, drv_static / drv_static_pt): each
per-thread run must record the calls the plain run records, drawn under the same names (the twin's own
name in args.stepprof_api, its own CUPTI cbid), launches named and paired with their kernels."""
import collections

from harness import LIB, assert_valid, call_result, load, prog, run
from test_driver import CBIDS, CTX_SYNC

# The context syncs' cbids: each its own (cuCtxSynchronize_v2 is no twin of cuCtxSynchronize).
CTX_SYNC_CBIDS = {name: CBIDS[name] for name in CTX_SYNC.values()}


def calls(mode):
    """What drv_work.c calls with "more" in `mode`, drawn under these names (its context sync as the mode
    gets it: test_driver.CTX_SYNC)."""
    return {"cuMemAlloc_v2": 1, "cuMemcpyHtoD_v2": 1, "cuLaunchKernel": 5, "cuMemsetD8_v2": 1, "cuMemcpyDtoH_v2": 1,
            "cuMemcpyHtoDAsync_v2": 1, "cuLaunchKernelEx": 1, "cuLaunchCooperativeKernel": 1, "cuGraphLaunch": 1,
            "cuMemcpyDtoHAsync_v2": 1, "cuStreamSynchronize": 1, CTX_SYNC[mode]: 1, "cuMemFree_v2": 1}


# The twin each per-thread build calls, and its cbid.
TWINS = {"cuLaunchKernel": ("cuLaunchKernel_ptsz", 442), "cuLaunchKernelEx": ("cuLaunchKernelEx_ptsz", 653),
         "cuLaunchCooperativeKernel": ("cuLaunchCooperativeKernel_ptsz", 478),
         "cuGraphLaunch": ("cuGraphLaunch_ptsz", 515), "cuMemcpyHtoD_v2": ("cuMemcpyHtoD_v2_ptds", 397),
         "cuMemcpyDtoH_v2": ("cuMemcpyDtoH_v2_ptds", 398), "cuMemsetD8_v2": ("cuMemsetD8_v2_ptds", 411),
         "cuMemcpyHtoDAsync_v2": ("cuMemcpyHtoDAsync_v2_ptsz", 421),
         "cuMemcpyDtoHAsync_v2": ("cuMemcpyDtoHAsync_v2_ptsz", 422),
         "cuStreamSynchronize": ("cuStreamSynchronize_ptsz", 440)}
LAUNCHES = ("cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel")


def _twin_and_cbid(e):
    """The twin a per-thread call drawn as e is (None: no twin) and the cbid it carries (the context
    syncs': their own, which no twin changes; the rest: not checked)."""
    return TWINS.get(e["name"], (None, CTX_SYNC_CBIDS.get(e["name"], e["args"]["cbid"])))


def _host_calls(argv):
    """The run's stdout (the bare run's too) and its intercepted driver calls, checked for pairing."""
    bare = run(argv, preload=False)
    assert bare.returncode == 0, bare.stderr
    r = run(argv)
    assert r.returncode == 0 and r.stdout == bare.stdout, (r.returncode, r.stdout, r.stderr)
    assert "launches=5" in r.stdout and "cuGraphLaunch=1" in r.stdout, r.stdout
    path = r.trace()
    assert_valid(path)
    ev = load(path)["traceEvents"]
    drv = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    host = [e for e in drv if e["args"].get("stepprof_source") != "cupti"]
    # Once each: CUPTI's own record of an intercepted call is merged into the host event.
    assert not [e["name"] for e in drv if e["name"] in calls(argv[1]) and e not in host]
    launches = [e["args"] for e in host if e["name"] in LAUNCHES]
    for a in launches:
        assert a["kernel"] == "drv_kernel(float*)" and a["grid"] == [4, 1, 1] and a["block"] == [256, 1, 1], a
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(a["correlation"] for a in launches)
    graph = [e for e in host if e["name"] == "cuGraphLaunch"]
    assert len(graph) == 1 and call_result(graph[0]) == 1, graph
    return host


def _same_calls_as_plain(plain, per_thread):
    want = _host_calls(plain)
    got = _host_calls(per_thread)
    assert collections.Counter(e["name"] for e in want) == calls(plain[1]), [e["name"] for e in want]
    assert [e["name"] for e in got] == [e["name"] for e in want], [e["name"] for e in got]
    for e in want:
        assert "stepprof_api" not in e["args"], e
        assert e["args"]["cbid"] == CTX_SYNC_CBIDS.get(e["name"], e["args"]["cbid"]), e
    for e in got:
        twin, cbid = _twin_and_cbid(e)
        assert e["args"].get("stepprof_api") == twin and e["args"]["cbid"] == cbid, e


def test_per_thread_build_linked():
    """The program's own imports: cuda.h's per-thread names, every one interposed like its plain twin."""
    _same_calls_as_plain([prog("drv_linked"), "direct", "more"], [prog("drv_linked_pt"), "direct", "more"])


def test_per_thread_flag_through_cugetprocaddress():
    """dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2"), then cuGetProcAddress with the per-thread
    flag for cuLaunchKernel & co. (a per-thread static cudart's way): the driver answers with the twins,
    and so does stepprof, with its interposers; also cuGetProcAddress_v2 fetched through itself."""
    _same_calls_as_plain([prog("drv_static"), "dlopen", "more"], [prog("drv_static_pt"), "dlopen", "more"])
    _same_calls_as_plain([prog("drv_linked"), "proc", "more"], [prog("drv_linked_pt"), "proc", "more"])


def test_per_thread_kernel_marker():
    """A kernel: marker counts per-thread launches as it counts plain ones: a boundary per launch of
    drv_kernel, steps 0-1 are launches 2 and 3."""
    for argv in ([prog("drv_linked_pt"), "direct"], [prog("drv_static_pt"), "dlopen"]):
        r = run(argv, env={"PROF_MARKER": "kernel:drv_kernel*", "PROF_WARMUP": 1, "PROF_ACTIVE": 2})
        assert r.returncode == 0 and "launches=5" in r.stdout, (r.stdout, r.stderr)
        launches = [e for e in load(r.trace())["traceEvents"] if e.get("cat") == "cuda_driver"
                    and e["name"] == "cuLaunchKernel" and e["args"].get("stepprof_source") != "cupti"]
        assert [(e["args"]["kernel"], e["args"]["stepprof_api"]) for e in launches] == \
            [("drv_kernel(float*)", "cuLaunchKernel_ptsz")] * 2, (argv, launches)


def test_per_thread_injection_only():
    """No preload (stepprof loaded by the driver as CUDA_INJECTION64_PATH): the twins come from CUPTI's
    DRIVER records alone, drawn under the plain names as the intercepted ones are, paired with kernels."""
    r = run([prog("drv_static_pt"), "dlopen", "more"], preload=False, env={"CUDA_INJECTION64_PATH": LIB})
    assert r.returncode == 0 and "launches=5" in r.stdout, r.stderr
    path = r.trace()
    assert_valid(path)
    ev = load(path)["traceEvents"]
    drv = [e for e in ev if e.get("cat") == "cuda_driver" and e["name"] in calls("dlopen")]
    assert all(e["args"].get("stepprof_source") == "cupti" for e in drv)
    assert collections.Counter(e["name"] for e in drv) == calls("dlopen"), [e["name"] for e in drv]
    for e in drv:
        assert e["args"]["cbid"] == _twin_and_cbid(e)[1], e
    launches = [e["args"]["correlation"] for e in drv if e["name"] in LAUNCHES]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(launches)
