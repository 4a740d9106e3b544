"""tests/test_driver.py — issue 13: the CUDA driver API on the libcuda.so.1 stand-in
(tests/fakecuda/fakedriver.c). drv_work.c does the same GPU work with entry points from the program's
own imports, from cuGetProcAddress (itself fetched through cuGetProcAddress), from dlopen + dlsym of
cuGetProcAddress_v2 only (static cudart's way), and from a library the program did not link, loaded
RTLD_LOCAL. Each run must print what it prints without stepprof, and record every driver call once as
a cuda_driver event with its CUPTI driver cbid, every launch with its kernel name and shape, paired
(same correlation id) with CUPTI's kernel record."""
from harness import LIB, assert_valid, load, prog, run

CALLS = (["cuMemAlloc_v2", "cuMemcpyHtoD_v2"] + ["cuLaunchKernel"] * 5 +
         ["cuMemsetD8_v2", "cuMemcpyDtoH_v2", "cuStreamSynchronize", "cuCtxSynchronize", "cuMemFree_v2"])
CBIDS = {"cuMemAlloc_v2": 243, "cuMemcpyHtoD_v2": 276, "cuLaunchKernel": 307, "cuMemsetD8_v2": 249,
         "cuMemcpyDtoH_v2": 278, "cuStreamSynchronize": 126, "cuCtxSynchronize": 17, "cuMemFree_v2": 245}


def _check(argv, libs=()):
    for lib in libs:
        prog(lib)
    bare = run(argv, preload=False)
    assert bare.returncode == 0, bare.stderr
    r = run(argv)
    assert r.returncode == 0 and r.stdout == bare.stdout, (r.returncode, r.stdout, r.stderr)
    assert "launches=5" in r.stdout
    path = r.trace()
    assert_valid(path)
    ev = load(path)["traceEvents"]
    host = [e for e in ev if e.get("cat") == "cuda_driver" and e.get("ph") == "X"
            and e["args"].get("stepprof_source") != "cupti"]
    assert [e["name"] for e in host] == CALLS, [e["name"] for e in host]
    for e in host:
        assert e["args"]["cbid"] == CBIDS[e["name"]] and e["args"]["result"] == 0, e
    # Once each: CUPTI's own record of an intercepted call is merged into the host event.
    cupti_dups = [e["name"] for e in ev if e.get("cat") == "cuda_driver" and e["name"] in CBIDS
                  and e["args"].get("stepprof_source") == "cupti"]
    assert not cupti_dups, cupti_dups
    assert not [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaLaunch")]
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
    _check([prog("drv_linked"), "direct"])


def test_driver_cugetprocaddress():
    _check([prog("drv_linked"), "proc"])


def test_driver_static_cudart_style():
    """Reaches the driver only through dlopen("libcuda.so.1") + dlsym("cuGetProcAddress_v2")."""
    _check([prog("drv_static"), "dlopen"])


def test_driver_from_unlinked_library():
    """cuBLAS-style: a library the program did not link, loaded RTLD_LOCAL, launches through the driver."""
    _check([prog("plugin_host"), "drv"], libs=("libdrvblas.so",))


def test_driver_memory():
    """Driver allocations feed profile_memory: the block is allocated and freed, nothing leaks."""
    r = run([prog("drv_linked"), "direct"], env={"PROF_PROFILE_MEMORY": 1})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    mem = [e for e in t["traceEvents"] if e.get("name") == "[memory]"]
    assert [e["args"]["Bytes"] for e in mem] == [4096, -4096], mem


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
    for name in CBIDS:
        assert names.count(name) == (5 if name == "cuLaunchKernel" else 1), (name, names)
    launches = [e["args"]["correlation"] for e in drv if e["name"] == "cuLaunchKernel"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(launches)


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
