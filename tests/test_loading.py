"""tests/test_loading.py — issue 13: stepprof never breaks a CUDA call, wherever the program loaded
CUDA from, and records the calls it can see. Real processes: plugin_host (no CUDA of its own) loads
libcudaplugin.so (links libcudart) with dlopen(RTLD_LOCAL), on the stand-in and on NVIDIA's real
libcudart without a driver; each run is compared line by line with the same run without stepprof."""
import os
import shutil
import subprocess
import tempfile

from harness import (CUDA_HOME, LIB, Skip, assert_valid, call_result, load, prog, run, runtime_events,
                     skip_under_sanitizer)

PLUGIN_CALLS = ["cudaMalloc", "cudaMemset", "cudaLaunchKernel", "cudaMemcpy", "cudaDeviceSynchronize", "cudaFree"]


def _results(r):
    """NAME=RESULT lines of plugin_host, in order."""
    return [tuple(l.split("=", 1)) for l in r.stdout.splitlines() if "=" in l]


def _real_cudart():
    real = os.path.join(CUDA_HOME, "lib64", "libcudart.so.13")
    if not os.path.exists(real):
        raise Skip(f"no NVIDIA libcudart at {real}")


def _plugin_local(fake):
    prog("libcudaplugin.so")
    bare = run([prog("plugin_host"), "local"], preload=False, fake=fake)
    assert bare.returncode == 0, bare.stderr
    on = run([prog("plugin_host"), "local"], fake=fake)
    off = run([prog("plugin_host"), "local"], fake=fake, env={"PROF_ENABLED": "false"})
    for r in (on, off):
        assert r.returncode == 0, r.stderr
        assert r.stdout == bare.stdout, f"stepprof changed what CUDA returned:\n{r.stdout}\nvs\n{bare.stdout}"
    assert off.sp_lines == [] and off.traces() == [], (off.sp_lines, off.traces())
    path = on.trace()
    assert_valid(path)
    got = [e["name"] for e in runtime_events(load(path))]
    assert got == PLUGIN_CALLS * 2, got
    return bare, on


def test_rtld_local_plugin_fake():
    bare, on = _plugin_local(fake=True)
    assert {v for _, v in _results(bare)} == {"0"}, bare.stdout
    t = load(on.trace())
    launch = runtime_events(t, "cudaLaunchKernel")[0]["args"]
    assert "result" not in launch and launch["grid"] == [2, 1, 1] and launch["block"] == [64, 1, 1], launch


def test_rtld_local_plugin_real_cudart():
    """NVIDIA's libcudart with no driver: every call returns its own error (35), never stepprof's 999."""
    _real_cudart()
    bare, on = _plugin_local(fake=False)
    assert {v for _, v in _results(bare)} == {"35"}, bare.stdout
    results = {call_result(e) for e in runtime_events(load(on.trace()))}
    assert results == {35}, results



# One run of libcopyplugin.c's copy_run: the calls stepprof interposes, the last two through dlsym.
COPY_CALLS = ["cudaMalloc", "cudaLaunchKernel", "cudaMemcpy", "cudaDeviceSynchronize", "cudaFree", "cudaMalloc",
              "cudaFree"]


def _copies(mode, other, host=None, fake=True):
    """plugin_host copies [late]: plugin A and plugin `other`, each linking its own runtime copy
    (libcudart.so.13 and libcudart-b.so.13, the stand-in under another soname, as auditwheel renames a
    wheel's), both loaded RTLD_LOCAL. Each plugin's calls, also those through dlsym(RTLD_DEFAULT), reach
    its own copy as without stepprof; A's (run twice) are recorded, the other's are not, and one
    warning names the other's copy and its user."""
    for name in ("libcopy_a.so", f"libcopy_{other}.so"):
        prog(name)
    argv = [host or prog("plugin_host"), "copies"] + mode
    bare = run(argv, preload=False, fake=fake)
    assert bare.returncode == 0, bare.stderr
    on = run(argv, fake=fake)
    assert on.returncode == 0, on.stderr
    assert on.stdout == bare.stdout, f"a plugin's calls reached another runtime:\n{on.stdout}\nvs\n{bare.stdout}"
    path = on.trace()
    assert_valid(path)
    got = [e["name"] for e in runtime_events(load(path))]
    assert got == COPY_CALLS * 2, got
    said = [l for l in on.sp_lines if "second CUDA library copy" in l]
    assert len(said) == 1 and "copies/libcudart-b.so.13" in said[0] and "libcopy_b.so" in said[0], on.sp_lines
    return bare


def test_plugins_with_their_own_runtime_copies():
    """Plugin B registers its kernel from its constructor, inside dlopen: the registration reaches B's
    runtime, which then knows the kernel (cudaFuncGetName, not interposed, asks it)."""
    bare = _copies([], "b")
    lines = bare.stdout.splitlines()
    assert "a.cudaFuncGetName=0 copy_kernel_a" in lines and "b.cudaFuncGetName=0 copy_kernel_b" in lines, lines
    assert {v for k, v in _results(bare) if not k.endswith("cudaFuncGetName")} == {"0"}, lines


def test_plugin_with_its_own_runtime_copy_loaded_after_activation():
    """Plugin C registers nothing and is loaded after A's calls activated stepprof and after B brought
    the second copy in (and so made stepprof watch every load): its first call is already its own
    runtime's. (Had C come first, nothing would have told stepprof: README, not covered.)"""
    bare = _copies(["late"], "c")
    assert {v for k, v in _results(bare) if not k.endswith("cudaFuncGetName")} == {"0"}, bare.stdout

def _real_copies(mode, other):
    """The same with NVIDIA's runtimes: A gets libcudart.so.13 from the toolkit, the other plugin a copy
    of it renamed as auditwheel does (`patchelf --set-soname`), found through its RUNPATH $ORIGIN/copies;
    plugin_host and the plugins are copied beside it. Without a driver every call returns 35 in either
    copy, so what shows the calls' way is the trace: had the other plugin's calls gone through
    stepprof's interposers (to A's copy), they would be recorded."""
    _real_cudart()
    d = tempfile.mkdtemp(prefix="sp-copies-")
    os.makedirs(os.path.join(d, "copies"))
    for name in ("plugin_host", "libcopy_a.so", f"libcopy_{other}.so") + (("libcopy_b.so",) if mode else ()):
        shutil.copy2(prog(name), d)
    b = os.path.join(d, "copies", "libcudart-b.so.13")
    shutil.copy2(os.path.join(CUDA_HOME, "lib64", "libcudart.so.13"), b)
    subprocess.run(["patchelf", "--set-soname", "libcudart-b.so.13", b], check=True)  # scripts/deps.sh
    try:
        bare = _copies(mode, other, host=os.path.join(d, "plugin_host"), fake=False)
        assert {v for _, v in _results(bare)} == {"35 -", "35"}, bare.stdout
    finally:
        shutil.rmtree(d)


def test_plugins_with_their_own_runtime_copies_real_cudart():
    _real_copies([], "b")


def test_plugin_with_its_own_runtime_copy_loaded_after_activation_real_cudart():
    _real_copies(["late"], "c")


def _late(fake, want):
    prog("libcudaplugin.so")
    r = run([prog("plugin_host"), "late"], fake=fake)
    assert r.returncode == 0, r.stderr
    res = dict(_results(r))
    # The first call had no runtime anywhere in the process; once the plugin brought one, the same
    # pointer reaches it (a failed lookup is not remembered).
    assert res["early"] == "999", res
    assert res["late"] == want and res["cudaMalloc"] == want, res
    missing = [l for l in r.sp_lines if "no loaded library defines it" in l]
    assert len(missing) == 1 and "cudaMalloc" in missing[0], r.sp_lines
    names = [e["name"] for e in runtime_events(load(r.trace()))]
    assert names == ["cudaMalloc"] + PLUGIN_CALLS + ["cudaMalloc"] + (["cudaFree"] if want == "0" else []), names


def test_library_loaded_after_failed_lookup():
    _late(True, "0")


def test_library_loaded_after_failed_lookup_real_cudart():
    _real_cudart()
    _late(False, "35")


def _probe(fake):
    prog("libcudaplugin.so")
    bare = run([prog("plugin_host"), "probe"], preload=False, fake=fake)
    on = run([prog("plugin_host"), "probe"], fake=fake)
    for r in (bare, on):
        assert r.returncode == 0 and r.stdout.endswith("done\n"), (r.returncode, r.stdout, r.stderr)
    assert on.stdout == bare.stdout, f"a probe for CUDA answered differently:\n{on.stdout}\nvs\n{bare.stdout}"
    lines = bare.stdout.splitlines()
    # Nothing in the global scope defines a CUDA name, bare: stepprof's own exports must not say otherwise
    # (it exported them all: a CPU program probing dlsym(RTLD_DEFAULT, "cudaMalloc") took CUDA as present).
    assert len([l for l in lines if l.endswith("=absent")]) == 32 and "no dlerror" not in bare.stdout, lines
    # Inside the plugin, cudaMalloc is found (its own dependency) and the call it made is recorded.
    assert any(l.startswith("plugin_probe=") and l != "plugin_probe=none" for l in lines), lines
    assert [e["name"] for e in runtime_events(load(on.trace()))] == ["cudaMalloc"]


def test_cuda_probe_by_dlsym_as_bare():
    """dlsym(RTLD_DEFAULT) and dlsym(dlopen(NULL)) find a CUDA name with stepprof exactly when they do
    without it: not in a process whose global scope has no CUDA (stepprof's interposers would be found
    there first), and in a plugin whose own dependencies have it (stepprof's interposer, recorded)."""
    _probe(fake=True)


def test_cuda_probe_by_dlsym_as_bare_real_cudart():
    _real_cudart()
    _probe(fake=False)


def test_plugin_closed_and_reopened_real_cudart():
    """A plugin loaded RTLD_GLOBAL brings libcudart into the global scope (RTLD_NEXT finds it there);
    closed, libcudart is unloaded with it, and reopened it may be mapped elsewhere. The interposers
    must keep reaching a live runtime: same results as bare, every round recorded (the real function
    a lookup returned was cached while its library could still be unloaded: a crash in round 2).
    NVIDIA's libcudart: the stand-in's is never unloaded."""
    _real_cudart()
    prog("libcudaplugin.so")
    bare = run([prog("plugin_host"), "reopen"], preload=False, fake=False)
    assert bare.returncode == 0 and bare.stdout.endswith("done\n"), (bare.returncode, bare.stderr)
    on = run([prog("plugin_host"), "reopen"], fake=False)
    assert on.returncode == 0, (on.returncode, on.stderr)
    assert on.stdout == bare.stdout, f"stepprof changed what CUDA returned:\n{on.stdout}\nvs\n{bare.stdout}"
    got = [e["name"] for e in runtime_events(load(on.trace()))]
    assert got == PLUGIN_CALLS * 3, got


def test_failing_dlopen_error_unchanged_with_function_marker():
    """A function: marker arms stepprof's dlopen (later libraries get their call sites hooked), which
    then searches the caller's RUNPATH itself. glibc stops at the first file it finds: when that file
    cannot load (a missing dependency), dlerror() names the dependency. stepprof went on searching its
    own path and left a different message ("libdlerr_broken.so: cannot open ...")."""
    # ASan's dlopen interceptor calls dlopen from libasan: the caller's RUNPATH is not searched, and
    # even the bare run says "libdlerr_broken.so: cannot open ..." (make test-asan, 2026-11-26).
    skip_under_sanitizer("ASan interposes dlopen ahead of the program, so the caller's RUNPATH is not searched")
    prog("dlerr/libdlerr_broken.so")
    env = {"PROF_MARKER": "function:puts@libc"}
    bare = run([prog("dlopen_err")], preload=False, env=env)
    on = run([prog("dlopen_err")], env=env)
    assert bare.returncode == on.returncode == 0, (on.returncode, on.stderr)
    assert "error=libdlerr_missing.so: cannot open shared object file" in bare.stdout, bare.stdout
    assert on.stdout == bare.stdout, f"stepprof changed what dlopen/dlerror said:\n{on.stdout}\nvs\n{bare.stdout}"
    assert any("marker function:puts@libc hooks" in l for l in on.sp_lines), on.sp_lines


def test_dlopen_library():
    """No large initial-exec TLS: the library loads into a process that did not preload it."""
    r = run([prog("dlopen_lib"), LIB], preload=False)
    assert r.returncode == 0 and r.stdout == "loaded\n", (r.returncode, r.stderr)
    flags = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True, check=True).stdout
    assert "STATIC_TLS" not in flags, "libstepprof.so asks for static TLS, which dlopen may not have"


def _injection_trace(env):
    r = run([prog("train"), "3"], preload=False, env=env)
    assert r.returncode == 0, r.stderr
    path = r.trace()
    assert_valid(path)
    return load(path)["traceEvents"]


KERNELS = {"model::forward_kernel(float const*, float const*, float*, int)",
           "loss_kernel(float const*, float const*, float*, int)",
           "model::backward_kernel(float const*, float const*, float const*, float*, int)",
           "void axpy_kernel<float, 4>(float, float const*, float*, int)"}


def test_cuda_injection_only():
    """No LD_PRELOAD: the driver (here the stand-in runtime, which does what cuInit does) loads stepprof
    from CUDA_INJECTION64_PATH; GPU work comes from CUPTI, NVTX ranges through the NVTX injection
    variable stepprof then claims for itself."""
    ev = _injection_trace({"CUDA_INJECTION64_PATH": LIB})
    kernels = [e["name"] for e in ev if e.get("cat") == "kernel"]
    assert sorted(kernels) == sorted(sorted(KERNELS) * 3), kernels
    api = [e for e in ev if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"]
    assert api and all(e["args"].get("stepprof_source") == "cupti" for e in api), "no interposer without preload"
    ranges = sorted(e["name"] for e in ev if e.get("cat") == "user_annotation")
    assert ranges == sorted(["train_step", "forward", "backward", "optimizer"] * 3), ranges


def test_cuda_and_nvtx_injection():
    lib_env = {"CUDA_INJECTION64_PATH": LIB, "NVTX_INJECTION64_PATH": LIB}
    ev = _injection_trace(lib_env)
    assert len([e for e in ev if e.get("cat") == "kernel"]) == 12
    ranges = sorted(e["name"] for e in ev if e.get("cat") == "user_annotation")
    assert ranges == sorted(["train_step", "forward", "backward", "optimizer"] * 3), ranges


def test_dlsym_rtld_next_keeps_its_meaning():
    """stepprof exports dlsym (to catch driver entry points); RTLD_NEXT must still be relative to the
    library that asked, not to stepprof: libnext_a's lookup finds libnext_b's definition."""
    prog("libnext_b.so")
    for preload in (False, True):
        r = run([prog("dlsym_next")], preload=preload)
        assert r.returncode == 0 and r.stdout == "next=b\n", (preload, r.stdout, r.stderr)


def test_dlsym_rtld_default_searches_the_callers_scope():
    """dlsym(RTLD_DEFAULT) also depends on the caller: glibc searches the global scope, then the caller's
    own dependencies when it was loaded RTLD_LOCAL (a Python extension linking libcuda). A cu* name there
    must be found with stepprof as without (it searched stepprof's scope: not found)."""
    prog("libnext_b.so")
    prog("libdefault_dep.so")
    for preload in (False, True):
        r = run([prog("dlsym_next"), prog("libdefault_user.so")], preload=preload)
        assert r.returncode == 0 and r.stdout == "next=b\ndefault=dep\n", (preload, r.stdout, r.stderr)


def test_driver_program_disabled():
    """enabled: false: a driver-only program (dlopen + cuGetProcAddress) runs as without stepprof."""
    bare = run([prog("drv_static"), "dlopen"], preload=False)
    off = run([prog("drv_static"), "dlopen"], env={"PROF_ENABLED": "false"})
    assert bare.returncode == off.returncode == 0 and off.stdout == bare.stdout, (off.stdout, off.stderr)
    assert off.sp_lines == [] and off.traces() == []
