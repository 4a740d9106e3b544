"""tests/test_window_close.py — issue 10 item 2: closing a window on the program's thread only
enqueues; the device sync, the CUPTI flush and take and the memory merge run in the exporter's
job (sp_cupti_collect, sp_mem_cycle_take). What that must not break, on the CUDA and CUPTI
stand-ins: every window gets exactly its own GPU records when windows follow each other with
no gap (the next window opens before the exporter has collected the previous one), and a
program that exits right after a window closed neither hangs (the exit holds the program's
threads, CUPTI's worker among them, while the exporter may still be flushing) nor loses a
kernel. The stall itself is measured by `make bench` (scripts/bench_export.py), not here."""
import collections
import os

from harness import FAKE_DIR, Skip, assert_valid, load, prog, run, runtime_events


def need_fake_cupti():
    if not os.path.exists(os.path.join(FAKE_DIR, "libcupti.so.13")):
        raise Skip("the CUPTI stand-in build/fakecuda/libcupti.so.13 was not built")


def kernels(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]


def test_back_to_back_windows_each_get_exactly_their_kernels():
    need_fake_cupti()
    steps = 10
    r = run([prog("train_c")], env={"STEPS": steps, "PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 0,
                                    "PROF_WARMUP": 1, "PROF_ACTIVE": 1, "PROF_REPEAT": 0,
                                    "PROF_PROFILE_MEMORY": 1}, timeout=120)
    assert r.returncode == 0, r.stderr
    traces = r.traces()
    # warmup 1 + active 1, repeat forever: a cycle every 2 steps (the warmup of the next starts as
    # the window closes), so the exporter's collect of one window races the next window's records.
    assert len(traces) == steps // 2, (len(traces), r.stderr)
    seen = collections.Counter()
    for path in traces:
        assert_valid(path)
        t = load(path)
        launches = {e["args"]["correlation"] for e in runtime_events(t, "cudaLaunchKernel")}
        ks = kernels(t)
        assert len(launches) == 4, (path, len(launches))   # four kernels per training step
        assert sorted(k["args"]["correlation"] for k in ks) == sorted(launches), path
        assert t["stepprof_dropped_events"] == 0
        seen.update(launches)
    assert len(seen) == 4 * steps // 2 and max(seen.values()) == 1, "a launch in two traces"


def test_exit_right_after_a_window_closed_mid_run_loses_nothing():
    """export_bench closes its window with the push of the next "step" and returns from main at
    once: the exit meets the exporter collecting 100k launches' records."""
    need_fake_cupti()
    n = 100000
    r = run([prog("export_bench"), str(n)], env={"PROF_MARKER": "nvtx:step", "PROF_WAIT": 0, "PROF_WARMUP": 1,
                                                 "PROF_ACTIVE": 1, "PROF_REPEAT": 1, "PROF_BUFFER_MB": 256,
                                                 "FAKECUDA_KERNEL_NS": 0}, timeout=170)
    assert r.returncode == 0, r.stderr
    assert not [f for f in os.listdir(r.outdir) if ".tmp" in f]
    t = load(r.trace())
    launches = runtime_events(t, "cudaLaunchKernel")
    assert len(launches) == n
    assert sorted(k["args"]["correlation"] for k in kernels(t)) == sorted(e["args"]["correlation"] for e in launches)
