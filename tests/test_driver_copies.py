"""tests/test_driver_copies.py — the driver API's copies, sets, host / managed / pitched / pool allocations,
event syncs, stream waits and host functions (drv_copies.c), as JAX/XLA, CuPy, Numba and a static cudart
make them. Each call must be a cuda_driver event with its CUPTI driver cbid and the payload its runtime
equivalent gets (bytes, cudaMemcpyKind as cudaMemcpy* records it: cuMemcpy / cuMemcpyAsync are Default as
cudaMemcpyDefault, cuMemcpy2D/3D from the descriptor's memory types, peer copies PtoP; a set's bytes and
value; a wait's event), paired with the GPU work CUPTI reports for it; the allocations must reach the
memory report on their side (device, managed, pinned host); the per-thread build's twins must be drawn
under the plain names; and every run must print and exit as it does bare. Entry points come from the
program's imports, cuGetProcAddress and dlsym."""
import collections

from harness import assert_valid, call_result, load, prog, run

N = 4096
# (drawn name, cbid, payload the runtime equivalent records), in call order; None: not checked here.
CALLS = [
    ("cuMemAlloc_v2", 243, {"bytes": N}), ("cuMemAlloc_v2", 243, {"bytes": N}),
    ("cuMemAllocHost_v2", 294, {"bytes": N}), ("cuMemHostAlloc", 39, {"bytes": N, "flags": 1}),
    ("cuMemAllocManaged", 371, {"bytes": N, "flags": 1}), ("cuMemAllocPitch_v2", 244, {"bytes": 512 * 4, "pitch": 512}),
    ("cuMemAllocPitch_v2", 244, {"result": 1, "ptr": 0, "pitch": 0}),
    ("cuMemAllocFromPoolAsync", 611, {"bytes": N, "stream handle": 0}),
    ("cuMemcpy2D_v2", 287, {"bytes": 400, "kind": "HtoD"}),
    ("cuMemcpy2DAsync_v2", 289, {"bytes": 400, "kind": "DtoH", "stream handle": 0}),
    ("cuMemsetD32_v2", 251, {"bytes": N, "value": 7}),
    ("cuMemcpy", 305, {"bytes": N, "kind": "Default"}),
    ("cuMemcpyAsync", 306, {"bytes": N, "kind": "Default", "stream handle": 0}),
    ("cuMemcpyDtoD_v2", 280, {"bytes": N, "kind": "DtoD"}),
    ("cuMemcpyDtoDAsync_v2", 281, {"bytes": N, "kind": "DtoD", "stream handle": 0}),
    ("cuMemcpyPeer", 318, {"bytes": N, "kind": "PtoP"}),
    ("cuMemcpyPeerAsync", 319, {"bytes": N, "kind": "PtoP", "stream handle": 0}),
    ("cuMemcpy3D_v2", 290, {"bytes": 512, "kind": "DtoD"}),
    ("cuMemcpy3DAsync_v2", 291, {"bytes": 512, "kind": "Default", "stream handle": 0}),
    ("cuMemcpyDtoH_v2", 278, {"bytes": 8, "kind": "DtoH"}),
    ("cuMemsetD8Async", 216, {"bytes": N, "value": 1, "stream handle": 0}),
    ("cuMemsetD16_v2", 250, {"bytes": N, "value": 0x0102}),
    ("cuMemsetD16Async", 218, {"bytes": N, "value": 0x0304, "stream handle": 0}),
    ("cuMemsetD32Async", 220, {"bytes": N, "value": 0x85060708, "stream handle": 0}),
    ("cuStreamWaitEvent", 295, {"stream handle": 0}),
    ("cuEventSynchronize", 121, {}),
    ("cuLaunchHostFunc", 527, {"stream handle": 0}),
    ("cuStreamSynchronize", 126, {"stream handle": 0}),
    ("cuMemcpyDtoH_v2", 278, {"bytes": 4, "kind": "DtoH"}),
    ("cuMemFreeAsync", 600, {"stream handle": 0}),
] + [("cuMemFree_v2", 245, {})] * 4 + [("cuMemFreeHost", 38, {})] * 2
# The per-thread build's twin of each drawn name (its own name in args.stepprof_api, its own cbid).
TWINS = {"cuMemAllocFromPoolAsync": 612, "cuMemcpy2D_v2": 405, "cuMemcpy2DAsync_v2": 424, "cuMemsetD32_v2": 413,
         "cuMemcpy": 408, "cuMemcpyAsync": 418, "cuMemcpyDtoD_v2": 399, "cuMemcpyDtoDAsync_v2": 423,
         "cuMemcpyPeer": 409, "cuMemcpyPeerAsync": 426, "cuMemcpy3D_v2": 407, "cuMemcpy3DAsync_v2": 425,
         "cuMemcpyDtoH_v2": 398, "cuMemsetD8Async": 428, "cuMemsetD16_v2": 412, "cuMemsetD16Async": 429,
         "cuMemsetD32Async": 430, "cuStreamWaitEvent": 436, "cuLaunchHostFunc": 528, "cuStreamSynchronize": 440,
         "cuMemFreeAsync": 601}
TWIN_SUFFIX = {"cuMemcpy2D_v2": "_ptds", "cuMemsetD32_v2": "_ptds", "cuMemcpy": "_ptds", "cuMemcpyDtoD_v2": "_ptds",
               "cuMemcpyPeer": "_ptds", "cuMemcpy3D_v2": "_ptds", "cuMemcpyDtoH_v2": "_ptds", "cuMemsetD16_v2": "_ptds"}
MODES = ("direct", "proc", "dlsym")


def _driver_calls(argv, env=None):
    """The run's intercepted driver calls, after checking it printed and exited as bare, that no call
    was drawn twice (CUPTI's record is merged into the intercepted one) and that every GPU copy and set
    is paired with the call that made it."""
    bare = run(argv, preload=False, env=env)
    assert bare.returncode == 0, bare.stderr
    assert "check=7,7 pinned=90 last=0x85060708 hostfn=1" in bare.stdout, bare.stdout
    r = run(argv, env=env)
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout), (r.returncode, r.stdout, r.stderr)
    path = r.trace()
    assert_valid(path)
    ev = load(path)["traceEvents"]
    drv = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    host = [e for e in drv if e["args"].get("stepprof_source") != "cupti"]
    names = {n for n, _, _ in CALLS}
    assert not [e["name"] for e in drv if e["name"] in names and e not in host]
    by_corr = {e["args"]["correlation"]: e["name"] for e in host}
    gpu = [(e["cat"], by_corr.get(e["args"]["correlation"])) for e in ev
           if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    assert gpu and all(n for _, n in gpu), gpu
    return host, ev, r


def _check_plain(host):
    assert [e["name"] for e in host] == [n for n, _, _ in CALLS], [e["name"] for e in host]
    for e, (name, cbid, want) in zip(host, CALLS):
        a = e["args"]
        assert a["cbid"] == cbid and "stepprof_api" not in a, e
        assert call_result(e) == want.get("result", 0), e
        assert {k: a.get(k) for k in want if k != "result"} == {k: v for k, v in want.items() if k != "result"}, e
        assert "dstDevice" not in a and "srcDevice" not in a, e   # contexts, not devices: unknown


def test_driver_copies_sets_allocs_syncs_recorded():
    """Linked imports, cuGetProcAddress (no per-thread flag) and dlsym: every call drawn with the runtime
    equivalent's payload, its GPU work paired with it."""
    for mode in MODES:
        host, ev, _ = _driver_calls([prog("drv_copies"), mode])
        _check_plain(host)
        waits = {e["name"]: e["args"] for e in host if e["name"] in ("cuStreamWaitEvent", "cuEventSynchronize")}
        assert waits["cuStreamWaitEvent"]["event"] == waits["cuEventSynchronize"]["event"] != 0, waits
        kinds = [e["name"] for e in ev if e.get("cat") == "gpu_memcpy"]
        assert kinds.count("Memcpy DtoD (Device -> Device)") == 6 and "Memcpy HtoD (Pinned -> Device)" in kinds, kinds
        syncs = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_sync")
        assert syncs["Event Sync"] == 1 and syncs["Stream Wait Event"] == 1, syncs


def test_driver_per_thread_twins_drawn_under_plain_names():
    """The per-thread build calls cuMemcpy_ptds, cuMemsetD32Async_ptsz, cuStreamWaitEvent_ptsz, ...
    (linked, from cuGetProcAddress with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, from dlsym):
    each is recorded as the plain build's call, with the twin's name and cbid in its args."""
    for mode in MODES:
        host, _, _ = _driver_calls([prog("drv_copies_pt"), mode])
        assert [e["name"] for e in host] == [n for n, _, _ in CALLS], (mode, [e["name"] for e in host])
        for e, (name, _, want) in zip(host, CALLS):
            a = e["args"]
            if name in TWINS:
                assert a.get("stepprof_api") == name + TWIN_SUFFIX.get(name, "_ptsz") and a["cbid"] == TWINS[name], e
            assert {k: a.get(k) for k in want if k != "result"} == {k: v for k, v in want.items() if k != "result"}, e


def test_driver_allocations_in_memory_report():
    """profile_memory: pinned host memory (cuMemAllocHost, cuMemHostAlloc) counts on the host, managed,
    pitched (pitch x height) and pool memory on the GPU, as their runtime equivalents do; all freed."""
    host, ev, r = _driver_calls([prog("drv_copies"), "direct"], env={"PROF_PROFILE_MEMORY": 1})
    mem = [(e["args"]["Bytes"], e["args"]["Device Type"]) for e in ev if e.get("name") == "[memory]"]
    assert mem == [(N, 1), (N, 1), (N, 0), (N, 0), (N, 1), (512 * 4, 1), (N, 1),
                   (-N, 1), (-512 * 4, 1), (-N, 1), (-N, 1), (-N, 1), (-N, 0), (-N, 0)], mem
    frees = [e["args"].get("bytes") for e in host if e["name"] in ("cuMemFreeAsync", "cuMemFree_v2", "cuMemFreeHost")]
    assert frees == [N, 512 * 4, N, N, N, N, N], frees
    report = open(r.trace().replace(".pt.trace.json", ".memory.txt")).read()
    peak = report.split("== Peak per device")[1].split("\n\n")[0].splitlines()
    rows = {l[:12].strip(): l.split()[-4:-1] for l in peak[2:] if not l.startswith("process")}
    # ... allocs frees failed: five GPU blocks (one pitched, one from the pool), two pinned host ones
    assert rows == {"GPU 0": ["5", "5", "0"], "pinned host": ["2", "2", "0"]}, peak


def test_driver_allocations_counted_on_the_current_contexts_device():
    """A driver-only program on its second GPU (its primary context made current, no cudaSetDevice, as
    JAX does per device): its blocks count on GPU 1, the current context's device (cuCtxGetDevice), not
    on the thread's cudaSetDevice device 0."""
    host, ev, r = _driver_calls([prog("drv_copies"), "direct"],
                                env={"PROF_PROFILE_MEMORY": 1, "FAKECUDA_DEVICES": 2, "DRV_DEVICE": 1})
    devices = {e["args"]["Device Id"] for e in ev if e.get("name") == "[memory]" and e["args"]["Device Type"] == 1}
    assert devices == {1}, devices
    report = open(r.trace().replace(".pt.trace.json", ".memory.txt")).read()
    peak = report.split("== Peak per device")[1].split("\n\n")[0].splitlines()
    rows = {l[:12].strip(): l.split()[-4:-1] for l in peak[2:] if not l.startswith("process")}
    assert rows == {"GPU 1": ["5", "5", "0"], "pinned host": ["2", "2", "0"]}, peak
