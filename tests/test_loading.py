"""tests/test_loading.py — issue 13: stepprof never breaks a CUDA call, wherever the program loaded
CUDA from, and records the calls it can see. Real processes: plugin_host (no CUDA of its own) loads
libcudaplugin.so (links libcudart) with dlopen(RTLD_LOCAL), on the stand-in and on NVIDIA's real
libcudart without a driver; each run is compared line by line with the same run without stepprof."""
import os

from harness import CUDA_HOME, Skip, assert_valid, load, prog, run, runtime_events

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
    assert launch["result"] == 0 and launch["grid"] == [2, 1, 1] and launch["block"] == [64, 1, 1], launch


def test_rtld_local_plugin_real_cudart():
    """NVIDIA's libcudart with no driver: every call returns its own error (35), never stepprof's 999."""
    _real_cudart()
    bare, on = _plugin_local(fake=False)
    assert {v for _, v in _results(bare)} == {"35"}, bare.stdout
    results = {e["args"]["result"] for e in runtime_events(load(on.trace()))}
    assert results == {35}, results


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
