"""tests/test_marker_function.py — the `function:SYMBOL[@LIBRARY]` step marker
(inject/funchook*.c) end to end: a function of a shared library called through
the program's PLT, through the PLT of a plugin dlopen()ed after stepprof
started, and static functions of the executable (entry patch). Each call is one
step boundary, the hooked program's behaviour (stdout, exit code, the
arguments its functions receive) is unchanged, and a marker that cannot be
installed says why in one line while the program runs on."""
import ctypes

from harness import Skip, assert_valid, load, prog, run, runtime_events, skip_under_sanitizer

SCHEDULE = {"PROF_WAIT": 2, "PROF_WARMUP": 1, "PROF_ACTIVE": 3, "PROF_REPEAT": 1, "STEPS": 12}


def steps_of(trace, cat="user_annotation"):
    """Step numbers of the ProfilerStep#N slices of one category (None: any,
    e.g. also the gpu_user_annotation copies on the GPU tracks)."""
    return sorted(int(e["name"].split("#")[1]) for e in trace["traceEvents"]
                  if e.get("name", "").startswith("ProfilerStep#") and cat in (None, e.get("cat")))


def need_capstone():
    try:
        ctypes.CDLL("libcapstone.so.4")
    except OSError:
        raise Skip("libcapstone.so.4 is not installed (apt-get install libcapstone4)")


def marker_run(binary, marker, env=None):
    """Runs binary with the test schedule and marker; checks the one trace
    holds steps 3-5 and only their CUDA calls (2 launches, 1 memcpy each), and
    that stdout and the exit code are those of a run without stepprof."""
    extra = dict(env or {})
    bare = run([prog(binary)], preload=False, env={**SCHEDULE, **extra})
    r = run([prog(binary)], env={**SCHEDULE, **extra, "PROF_MARKER": marker})
    assert r.returncode == bare.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout == bare.stdout, f"stdout changed under stepprof:\n{r.stdout}\nvs\n{bare.stdout}"
    assert r.other_stderr == bare.stderr, r.other_stderr
    errors = [l for l in r.sp_lines if "never fired" in l or f"{marker}:" in l]
    assert not errors, errors
    path = r.trace()
    assert_valid(path)
    t = load(path)
    assert steps_of(t) == [3, 4, 5], (steps_of(t), r.sp_lines)
    assert set(steps_of(t, None)) == {3, 4, 5}, steps_of(t, None)
    assert len(runtime_events(t, "cudaLaunchKernel")) == 6, len(runtime_events(t, "cudaLaunchKernel"))
    assert len(runtime_events(t, "cudaMemcpy")) == 3, len(runtime_events(t, "cudaMemcpy"))
    return r


def test_library_function_called_through_plt():
    marker_run("marker_lib", "function:markstep_train_step")


def test_library_function_bound_at_load_time():
    """LD_BIND_NOW: the GOT slot already holds the function when the hook is installed."""
    marker_run("marker_lib", "function:markstep_train_step", env={"LD_BIND_NOW": "1"})


def test_library_function_qualified_by_library():
    marker_run("marker_lib", "function:markstep_train_step@libmarkstep.so")
    marker_run("marker_lib", "function:markstep_train_step@libmark*")


def test_library_function_called_from_plugin_loaded_later():
    """The plugin is dlopen()ed by bare name after stepprof started (found via
    the program's RUNPATH, which the dlopen interposer must keep honouring) and
    calls the function through its own, lazily bound PLT."""
    skip_under_sanitizer("ASan interposes dlopen ahead of stepprof, so library search paths change")
    marker_run("marker_dlopen", "function:markstep_train_step")


def test_dlopen_interposer_transparent_without_function_marker():
    skip_under_sanitizer("ASan interposes dlopen ahead of stepprof, so library search paths change")
    bare = run([prog("marker_dlopen")], preload=False, env={"STEPS": 3})
    r = run([prog("marker_dlopen")], env={"STEPS": 3})
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) and r.returncode == 0, r.stderr


def test_static_function_entry_patched():
    need_capstone()
    marker_run("marker_static", "function:do_train_step")
    marker_run("marker_static", "function:do_train_step@marker_static")


def test_entry_patch_preserves_variadic_and_float_arguments():
    """abi_probe(3, double, double, double): %al and %xmm0-2 must reach it
    intact through the trampoline; stdout prints what it computed."""
    need_capstone()
    marker_run("marker_static", "function:abi_probe")


def _failing_marker(binary, marker, must_mention):
    bare = run([prog(binary)], preload=False, env=SCHEDULE)
    r = run([prog(binary)], env={**SCHEDULE, "PROF_MARKER": marker})
    assert (r.returncode, r.stdout, r.other_stderr) == (bare.returncode, bare.stdout, bare.stderr), r.stderr
    lines = [l for l in r.sp_lines if f"{marker}:" in l]
    assert len(lines) == 1, r.sp_lines
    assert all(w in lines[0] for w in must_mention), lines[0]
    for path in r.traces():
        assert not steps_of(load(path), None), "no step can be marked"
    return lines[0]


def test_unknown_symbol_is_one_error_and_program_unchanged():
    _failing_marker("marker_lib", "function:no_such_symbol", ["'no_such_symbol'"])


def test_library_not_loaded_is_one_error():
    _failing_marker("marker_lib", "function:markstep_train_step@libnotloaded", ["'libnotloaded'"])


def test_library_without_the_symbol_is_one_error():
    _failing_marker("marker_lib", "function:no_such_symbol@libmarkstep.so", ["'libmarkstep.so'", "'no_such_symbol'"])


def test_marker_that_never_fires_is_reported_at_exit():
    r = run([prog("marker_lib")], env={**SCHEDULE, "STEPS": 0, "PROF_MARKER": "function:markstep_train_step"})
    assert r.returncode == 0, r.stderr
    assert sum("never fired" in l for l in r.sp_lines) == 1, r.sp_lines
