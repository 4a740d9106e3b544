"""tests/test_reliability.py — issue 7: the host program never notices stepprof, and stepprof never
loses what it finished. Each test runs a target of tests/programs/rel_*.c (built by
tests/programs/reliability.mk) as a real process and checks what was written: events expected and
found, files expected and found, exit status expected (the same program without the preload) and
found. Every test records those numbers in $SP_BUILD/reliability.json; `python3
tests/test_reliability.py --table` renders them as the table of docs/reliability.md.

The targets run on the CUDA runtime stand-in without its CUPTI stand-in (a private library
directory holding only libcudart), so event counts are stepprof's own records; one test runs a
signal end with the CUPTI stand-in too."""
import glob
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import LIB, Skip, TRACE_RE, assert_valid, load, prog, skip_under_sanitizer  # noqa: E402
from relrun import RESULTS, TB_RE, CYCLES, LAUNCHES, start, finish, run, read_until, wait_for, launches, runtime_calls, status, record, render_table  # noqa: E402

# ---- processes: fork, exec, posix_spawn, the processes glob ------------------------------------

def test_fork_without_exec_dataloader():
    # Seen hanging 1 run in 16-26 under make test-asan, always inside ASan's own allocator (its
    # quarantine or size-class lock, taken by a parent thread at fork() and never released in the
    # child); glibc's malloc takes its locks around fork, GCC 12's libasan does not.
    skip_under_sanitizer("ASan's allocator is not fork-safe while another thread allocates")
    bare = run([prog("rel_fork"), "8", "4", "2000"], preload=False)
    r = run([prog("rel_fork"), "8", "4", "2000"])
    assert r.returncode == bare.returncode == 0, r.stderr
    pids = {kind: [int(l.split()[1]) for l in r.stdout.splitlines() if l.startswith(kind + " ")]
            for kind in ("cpu", "cuda", "parent")}
    by_pid = {}
    for path in r.traces():
        assert_valid(path)
        worker = TRACE_RE.match(os.path.basename(path)).group(1)
        by_pid.setdefault(int(worker.rsplit("_", 1)[1]), []).append(load(path))
    parent = pids["parent"][0]
    assert sorted(by_pid) == sorted([parent] + pids["cuda"]), (by_pid.keys(), pids)
    assert not set(by_pid) & set(pids["cpu"]), "a CPU-only child wrote a file"
    (pt,) = by_pid[parent]
    want_parent = 2000 * 6
    got_parent = len(launches(pt, "parent_kernel"))
    assert got_parent == want_parent and not launches(pt, "child_kernel"), got_parent
    assert pt["stepprof_dropped_events"] == 0 and {e["pid"] for e in runtime_calls(pt)} == {parent}
    got_children = []
    for c in pids["cuda"]:
        (ct,) = by_pid[c]
        got_children.append(len(launches(ct, "child_kernel")))
        assert not launches(ct, "parent_kernel"), "a child wrote its parent's events"
        assert {e["pid"] for e in runtime_calls(ct)} == {c}
    assert got_children == [2000, 2000], got_children
    assert not r.temporaries()
    record("fork without exec (8 CPU children, 2 CUDA children ending with exit and _exit, "
           "4 parent threads recording and one holding a program lock across the forks)",
           "parent trace complete; each CUDA child writes only its own events under its own pid; "
           "CPU-only children write nothing",
           (f"parent {want_parent}, children 2000+2000", f"parent {got_parent}, children "
            f"{'+'.join(map(str, got_children))}"),
           (3, len(r.traces())), (status(bare.returncode), status(r.returncode)))


def _exec_run(env=None):
    r = run([prog("rel_exec"), "100"], env=env)
    assert r.returncode == 0, r.stderr
    printed = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[0] in ("child", "parent", "nocuda"):
            printed[parts[1] if parts[0] == "child" else parts[0]] = int(parts[-1])
    found = {}
    for path in r.traces():
        assert_valid(path)
        pid = int(TRACE_RE.match(os.path.basename(path)).group(1).rsplit("_", 1)[1])
        found[pid] = len(launches(load(path), "exec_kernel"))
    return r, printed, found


def test_exec_and_posix_spawn_children_profiled_as_themselves():
    r, printed, found = _exec_run()
    want = {printed["parent"]: 100, printed["worker-spawned"]: 100, printed["worker-execed"]: 100}
    assert found == want, (found, printed)
    assert printed["nocuda"] not in found
    record("exec / posix_spawn children (LD_PRELOAD kept)",
           "parent, posix_spawn child and fork+execv child each write their own trace with their own pid; "
           "a spawned child without CUDA writes nothing",
           ("100 per process", ", ".join(str(v) for v in found.values())), (3, len(found)),
           ("exit 0", status(r.returncode)))


def test_processes_glob_selects_by_program_name():
    r, printed, found = _exec_run({"PROF_PROCESSES": "worker-*"})
    assert found == {printed["worker-spawned"]: 100, printed["worker-execed"]: 100}, (found, printed)
    none, _, found_none = _exec_run({"PROF_PROCESSES": "no-such-program*"})
    assert found_none == {} and none.sp_lines == [] and not os.path.exists(none.outdir), none.sp_lines
    record("processes glob (`PROF_PROCESSES=worker-*`, then a glob matching nothing)",
           "only processes whose argv[0]/executable basename matches are profiled; the others stay "
           "inert: no file, no stepprof: line",
           ("100+100, then none", f"{'+'.join(str(v) for v in found.values())}, then {len(found_none)}"),
           ("2, then 0", f"{len(found)}, then {len(none.files())}"),
           ("exit 0", status(r.returncode)), f"stepprof: lines of the non-matching run: {len(none.sp_lines)}")


# ---- threads -----------------------------------------------------------------------------------

THREADS_ENV = {"PROF_MARKER": "cudaProfilerApi"}


def test_32_threads_created_during_cycle_exact_counts():
    r = run([prog("rel_threads"), "32", "2000"], env=THREADS_ENV)
    assert r.returncode == 0, r.stderr
    (path,) = r.traces()
    assert_valid(path)
    t = load(path)
    got = launches(t, "thread_kernel")
    per_tid = {}
    for e in got:
        per_tid[e["tid"]] = per_tid.get(e["tid"], 0) + 1
    assert len(got) == 64000 and sorted(per_tid.values()) == [2000] * 32, (len(got), per_tid)
    assert t["stepprof_dropped_events"] == 0 and t["stepprof_truncated"] is False
    corr = {(e["tid"], e["args"]["correlation"]) for e in got}
    assert len(corr) == len(got), "duplicated records"
    record("32 threads created during the cycle, launching at once, exited before it ends",
           "no event lost or duplicated: 2000 per thread, unique correlation ids, 0 dropped",
           (64000, len(got)), (1, len(r.traces())), ("exit 0", status(r.returncode)),
           f"{len(per_tid)} threads in the trace")


def test_32_threads_above_max_events_per_cycle_exact_drop_count():
    full = run([prog("rel_threads"), "32", "2000"], env=THREADS_ENV)
    total = len(runtime_calls(load(full.traces()[0])))
    cap = 10000
    r = run([prog("rel_threads"), "32", "2000"], env=dict(THREADS_ENV, PROF_MAX_EVENTS_PER_CYCLE=cap))
    assert r.returncode == 0, r.stderr
    (path,) = r.traces()
    assert_valid(path)
    t = load(path)
    kept, dropped = len(runtime_calls(t)), t["stepprof_dropped_events"]
    assert kept == cap and kept + dropped == total and t["stepprof_truncated"] is True, (kept, dropped, total)
    record("32 threads above `max_events_per_cycle: 10000`",
           "exactly the cap kept, kept + dropped = all calls, trace marked truncated",
           (f"{cap} kept + {total - cap} dropped", f"{kept} kept + {dropped} dropped"), (1, len(r.traces())),
           ("exit 0", status(r.returncode)), f"stepprof_truncated: {t['stepprof_truncated']}")


def test_max_trace_mb_bounds_the_file():
    full = run([prog("rel_threads"), "4", "10000"], env=THREADS_ENV)
    total = len(runtime_calls(load(full.traces()[0])))
    full_size = os.path.getsize(full.traces()[0])
    r = run([prog("rel_threads"), "4", "10000"], env=dict(THREADS_ENV, PROF_MAX_TRACE_MB=1))
    (path,) = r.traces()
    assert_valid(path)
    t = load(path)
    size, kept, dropped = os.path.getsize(path), len(runtime_calls(t)), t["stepprof_dropped_events"]
    assert full_size > (1 << 20) and size <= (1 << 20), (full_size, size)
    assert kept + dropped == total and dropped > 0 and t["stepprof_truncated"] is True, (kept, dropped, total)
    record("40000 launches with `max_trace_mb: 1`",
           "trace file at most 1 MiB, kept + dropped = all calls, marked truncated",
           (f"{total} in all", f"{kept} kept + {dropped} dropped"), (1, len(r.traces())),
           ("exit 0", status(r.returncode)), f"file {size} bytes (unbounded: {full_size})")


def test_signal_handler_calls_cuda_inside_interposer():
    r = run([prog("rel_sigcuda"), "200000"], timeout=60)
    assert r.returncode == 0, r.stderr
    handler_calls = int(r.stdout.split()[-1])
    (path,) = r.traces()
    assert_valid(path)
    t = load(path)
    # Both kernels are launched once before the timer starts (see rel_sigcuda.c).
    main_n, nested = len(launches(t, "main_kernel")) - 1, len(launches(t, "handler_kernel")) - 1
    assert main_n == 200000, main_n
    assert handler_calls > 0 and nested <= handler_calls, (nested, handler_calls)
    assert len(launches(t)) == main_n + nested + 2, "a record that is neither kernel: corrupted"
    corr = {e["args"]["correlation"] for e in launches(t)}
    assert len(corr) == len(launches(t)), "duplicated correlation ids: a record was written twice"
    record("SIGALRM every 20 us whose handler calls cudaLaunchKernel while main is launching",
           "no deadlock; main's 200000 launches all recorded; handler calls recorded at most once, "
           "those interrupting an interposer not at all (recursion guard); no corrupted record",
           (f"main 200000, handler <= {handler_calls}", f"main {main_n}, handler {nested}"),
           (1, len(r.traces())), ("exit 0", status(r.returncode)), f"{r.seconds:.1f} s")


# ---- ends of a process -------------------------------------------------------------------------

ENDS_ENV = {"PROF_MARKER": "cudaProfilerApi", "PROF_REPEAT": 0, "PROF_TABLE_PRINT": "none"}


def _launch_counts(traces):
    """Each trace checked valid: its launches and its stepprof_truncated flag, in two lists."""
    counts, flags = [], []
    for path in traces:
        assert_valid(path)
        t = load(path)
        counts.append(len(launches(t)))
        flags.append(t["stepprof_truncated"])
    return counts, flags


def _end(mode, truncated_written, sig=None, program="rel_ends", cupti=False, wait_files=False, note=""):
    argv = [prog(program)] + ([] if program == "rel_throw" else [mode]) + [str(CYCLES), str(LAUNCHES)]
    bare = start(argv, preload=False)
    p = start(argv, env=ENDS_ENV, cupti=cupti)
    sent_at = None
    for proc in (bare, p):
        if sig is not None:
            read_until(proc, "in cycle")
            if proc is p and wait_files:
                # SIGKILL: the completed cycles must be on disk first, or they are lost with it.
                wait_for(lambda: len([f for f in os.listdir(p.sp_outdir) if TRACE_RE.match(f)]) >= CYCLES
                         if os.path.isdir(p.sp_outdir) else False)
            if proc is p:
                sent_at = time.time()
            proc.send_signal(sig)
    b, r = finish(bare), finish(p)
    ended_in = time.time() - sent_at if sent_at else r.seconds
    assert r.returncode == b.returncode, (mode, status(r.returncode), status(b.returncode), r.stderr[-2000:])
    traces = r.traces()
    want_files = CYCLES + (1 if truncated_written else 0)
    assert len(traces) == want_files, (mode, traces, r.files(), r.stderr[-2000:])
    counts, flags = _launch_counts(traces)
    assert counts[:CYCLES] == [LAUNCHES] * CYCLES and flags[:CYCLES] == [False] * CYCLES, (counts, flags)
    if truncated_written and mode != "ignore-int":
        assert flags[CYCLES] is True, flags
        assert counts[CYCLES] >= LAUNCHES if mode == "exit-thread" else counts[CYCLES] == LAUNCHES, counts
    assert not r.temporaries(), r.files()
    assert ended_in < 10, f"took {ended_in:.1f}s (finalize_timeout_s is 10)"
    if "handler" in mode:
        assert "handled" in r.stdout, r.stdout
    expected_events = "+".join([str(LAUNCHES)] * want_files) + (" (last truncated)" if truncated_written and
                                                                mode != "ignore-int" else "")
    found_events = "+".join(str(c) for c in counts) + (" (last truncated)" if flags and flags[-1] else "")
    return expected_events, found_events, (want_files, len(traces)), (status(b.returncode),
                                                                     status(r.returncode)), f"{ended_in:.2f} s{note}"


def _end_test(label, checked, mode, truncated_written, **kw):
    ev_exp, ev_found, files, st, extra = _end(mode, truncated_written, **kw)
    record(label, checked, (ev_exp, ev_found), files, st, extra)


DONE_AND_TRUNC = "2 complete cycles on disk and valid; the cycle in progress written, marked truncated; " \
                 "exit status unchanged"


def test_queue_node_malloc_fails_every_window_exported():
    # exporters/worker.c: when the job's queue node cannot be allocated, the window goes on a spare
    # node and the exporter's thread still exports it (it used to run on the program's thread, beside
    # an export the worker might be running: two exports on the same collect cursors). Every node
    # fails here, so each window takes a spare, and with two queued the closing thread waits for one.
    skip_under_sanitizer("the shim replaces malloc, which the sanitizer's runtime owns")
    cycles, n = 6, 20000
    shim = os.path.join(os.path.dirname(prog("rel_ends")), "librel_nonode.so")
    env = dict(ENDS_ENV, LD_PRELOAD=f"{shim} {LIB}")
    r = run([prog("rel_ends"), "return", str(cycles), str(n)], env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    failed = [int(l.split()[1]) for l in r.stderr.splitlines() if l.startswith("rel_nonode:")]
    assert failed == [cycles + 1], (failed, r.stderr[-2000:])   # every window's node, and only those
    # Every trace put in place by the exporter's thread: none exported on the program's (the old way).
    renames = [l.split()[1:] for l in r.stderr.splitlines() if l.startswith("rel_nonode-renames:")]
    assert renames == [[str(cycles + 1), "0", "-"]], renames
    traces = r.traces()
    assert len(traces) == cycles + 1, (r.files(), r.stderr[-2000:])
    counts, flags = _launch_counts(traces)
    assert counts == [n] * (cycles + 1) and flags == [False] * cycles + [True], (counts, flags)
    assert not r.temporaries(), r.files()
    record("every queue node's malloc fails (a shim), 7 windows of 20000 launches",
           "all windows exported by the exporter's thread on spare nodes, in order, none lost",
           ("+".join([str(n)] * (cycles + 1)), "+".join(str(c) for c in counts)), (cycles + 1, len(traces)),
           ("exit 0", status(r.returncode)), f"{failed[0]} node allocations failed")


def test_end_return_from_main():
    _end_test("return from main mid-cycle", DONE_AND_TRUNC, "return", True)


def test_end_exit_from_other_thread():
    _end_test("exit(5) from another thread while main launches", DONE_AND_TRUNC, "exit-thread", True)


def test_end_underscore_exit():
    _end_test("_exit(6) (interposed)", DONE_AND_TRUNC, "_exit", True)


def test_end_abort():
    _end_test("abort()", DONE_AND_TRUNC + "; SIGABRT re-raised", "abort", True)


def test_end_uncaught_cpp_exception():
    _end_test("uncaught C++ exception (std::terminate)", DONE_AND_TRUNC, "throw", True, program="rel_throw")


def test_end_sigsegv():
    _end_test("SIGSEGV (null write)", "2 complete cycles on disk and valid; the cycle in progress is not "
              "written (fault: its state is not trusted); the fault re-executes: same signal",
              "segv", False)


def test_end_sigterm():
    _end_test("SIGTERM from outside", DONE_AND_TRUNC, "wait", True, sig=signal.SIGTERM)


def test_end_sigint():
    _end_test("SIGINT from outside", DONE_AND_TRUNC, "wait", True, sig=signal.SIGINT)


def test_end_sigterm_with_cupti_stand_in():
    _end_test("SIGTERM, CUPTI stand-in loaded", DONE_AND_TRUNC, "wait", True, sig=signal.SIGTERM, cupti=True)


def test_end_sigkill():
    _end_test("SIGKILL", "2 complete cycles on disk and valid, the cycle in progress lost, no temporary left",
              "wait", False, sig=signal.SIGKILL, wait_files=True,
              note="; sent once the 2 completed traces were on disk")


def test_end_cuda_device_reset_then_exit():
    _end_test("cudaDeviceReset() then return", DONE_AND_TRUNC, "devreset", True)


def test_end_program_handler_installed_before():
    _end_test("program's SIGTERM handler installed before activation",
              "stepprof leaves it alone; it runs (prints 'handled', returns 3); traces written at exit",
              "handler-before", True, sig=signal.SIGTERM)


def test_end_program_handler_installed_after():
    _end_test("program's SIGTERM handler installed after activation",
              "the program's handler replaces stepprof's and runs; traces written at exit",
              "handler-after", True, sig=signal.SIGTERM)


def test_end_sigint_ignored_by_program():
    _end_test("SIGINT ignored (SIG_IGN) by the program", "stays ignored: the program completes its cycle "
              "and exits 0", "ignore-int", True, sig=signal.SIGINT)


def test_sigkill_during_export_leaves_no_trace_lookalike():
    argv = [prog("rel_ends"), "wait", "1", "100"]
    p = start(argv, env=dict(ENDS_ENV, REL_FIRST_LAUNCHES=300000))
    read_until(p, "cycle 0 done")
    tmp_seen = wait_for(lambda: os.path.isdir(p.sp_outdir) and any(".tmp." in f for f in os.listdir(p.sp_outdir)),
                        timeout=10)
    p.send_signal(signal.SIGKILL)
    r = finish(p)
    assert r.returncode == -signal.SIGKILL
    leftovers = r.files()
    looks_like_trace = [f for f in leftovers if TB_RE.match(f) or TRACE_RE.match(f)]
    assert not [f for f in looks_like_trace if ".tmp." in f], looks_like_trace
    for path in r.traces():
        assert_valid(path)   # anything that does look like a trace is a complete one
    assert not TB_RE.match("host_1.1700000000000000000.pt.trace.json.tmp.1234")
    record("SIGKILL while a 300000-event trace is being written",
           "the partial file keeps its `.tmp.<pid>` name, which TensorBoard's pattern "
           "`^(.*?)(\\.\\d+)?\\.pt\\.trace\\.json(\\.gz)?$` does not match; no partial file under a trace name",
           ("no partial trace", f"{len(r.traces())} traces, {len(r.temporaries())} temporaries"),
           ("0 trace-named partial files", len([f for f in looks_like_trace if ".tmp." in f])),
           ("SIGKILL", status(r.returncode)), f"temporary seen before the kill: {'yes' if tmp_seen else 'no'}")


# ---- output: full, missing, unwritable, caps, symlinks, names ----------------------------------

def _limit_fsize(n):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))


def test_output_over_rlimit_fsize_dropped_once_program_unaffected():
    env = dict(ENDS_ENV, REL_FIRST_LAUNCHES=20000)
    argv = [prog("rel_ends"), "return", str(CYCLES), str(LAUNCHES)]
    bare = run(argv, preload=False, env={"REL_FIRST_LAUNCHES": 20000}, preexec=_limit_fsize(300000))
    r = run(argv, env=env, preexec=_limit_fsize(300000))
    assert r.returncode == bare.returncode == 0, (status(r.returncode), r.stderr[-2000:])
    assert r.stdout == bare.stdout
    counts = [len(launches(load(p))) for p in r.traces()]
    assert counts == [LAUNCHES, LAUNCHES], counts   # cycle 0 (~5 MB) dropped; 1 and the truncated 2 written
    errors = [l for l in r.sp_lines if "File too large" in l]
    assert len(errors) == 1, r.sp_lines
    assert not r.temporaries(), r.files()
    record("RLIMIT_FSIZE 300 kB: cycle 0's trace (20000 events) does not fit",
           "SIGXFSZ does not kill the program; one message; that cycle dropped, later cycles written; "
           "stdout and exit status unchanged",
           ("cycle 0 dropped, 50+50", "+".join(map(str, counts))), (2, len(counts)),
           (status(bare.returncode), status(r.returncode)), f"{len(errors)} message: {errors[0][:90]}...")


def test_output_on_full_tmpfs():
    d = tempfile.mkdtemp(prefix="sp-rel-tmpfs-")
    out = os.path.join(d, "mnt")
    os.makedirs(out)
    wrap = ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=256k tmpfs {out} && exec \"$@\"", "sh"]
    probe = subprocess.run(wrap + ["true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot mount a tmpfs here (needs root and unshare -m)")
    env = dict(ENDS_ENV, REL_FIRST_LAUNCHES=20000, PROF_OUTPUT_DIR=out)
    argv = [prog("rel_ends"), "return", str(CYCLES), str(LAUNCHES)]
    bare = run(argv, preload=False, env={"REL_FIRST_LAUNCHES": 20000}, wrap=wrap, cwd=d)
    r = run(argv, env=env, wrap=wrap, cwd=d)
    assert r.returncode == bare.returncode == 0 and r.stdout == bare.stdout, r.stderr[-2000:]
    errors = [l for l in r.sp_lines if "No space left" in l]
    assert len(errors) == 1, r.sp_lines
    # The tmpfs is gone with the namespace; the line names the trace that did not fit.
    record("output directory on a full 256 kB tmpfs (ENOSPC; private mount namespace)",
           "one message for the cycle that does not fit, which is dropped; stdout and exit status unchanged",
           ("cycle 0 dropped", f"{len(errors)} message"), ("-", "-"), (status(bare.returncode), status(r.returncode)),
           errors[0][:90] + "...")


def test_unwritable_output_dir_then_writable_again():
    cwd = tempfile.mkdtemp(prefix="sp-rel-")
    blocker = os.path.join(cwd, "blocked")
    open(blocker, "w").close()
    outdir = os.path.join(blocker, "traces")    # under a regular file: ENOTDIR even for root
    p = start([prog("rel_ends"), "wait", "1", str(LAUNCHES)], env=dict(ENDS_ENV, PROF_OUTPUT_DIR=outdir),
              cwd=cwd)
    read_until(p, "in cycle")
    time.sleep(0.3)                              # cycle 0's export fails meanwhile
    os.unlink(blocker)
    p.send_signal(signal.SIGTERM)
    r = finish(p)
    r.outdir = outdir
    assert r.returncode == -signal.SIGTERM, status(r.returncode)
    errors = [l for l in r.sp_lines if "cannot create output directory" in l]
    again = [l for l in r.sp_lines if "works again" in l]
    counts = [len(launches(load(path))) for path in r.traces()]
    assert len(errors) == 1 and len(again) == 1, r.sp_lines
    assert counts == [LAUNCHES], counts
    record("output directory unwritable (ENOTDIR) for cycle 0, then fixed",
           "one message for cycle 0 (all its files), cycle dropped; the next cycle retried and written, "
           "one line says so", ("cycle 0 dropped, 50", "+".join(map(str, counts))), (1, len(counts)),
           ("SIGTERM", status(r.returncode)), f"{len(errors)} error line, {len(again)} recovery line")


def test_missing_nested_output_dir_created():
    r = run([prog("rel_ends"), "return", "1", str(LAUNCHES)],
            env=dict(ENDS_ENV, PROF_OUTPUT_DIR=os.path.join(tempfile.mkdtemp(prefix="sp-rel-"), "a", "b", "c")))
    assert r.returncode == 0 and len(r.traces()) == 2, (r.files(), r.sp_lines)
    modes = {oct(os.stat(p).st_mode & 0o777) for p in r.traces()}
    assert modes == {"0o644"}, modes
    record("missing nested output directory", "created; files 0644 under umask 022",
           ("50+50", "+".join(str(len(launches(load(p)))) for p in r.traces())), (2, len(r.traces())),
           ("exit 0", status(r.returncode)), f"modes {sorted(modes)}")


def test_outfile_symlinks_modes_names():
    d = tempfile.mkdtemp(prefix="sp-rel-outfile-")
    p = subprocess.run([prog("rel_outfile"), d], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    checks = [l for l in p.stdout.splitlines() if l.startswith(("ok ", "FAIL "))]
    record("files: planted symlinks, umask, worker names (rel_outfile, linked with outfile.c)",
           "a symlink at the temporary name is not followed (open fails), one at the final name is "
           "replaced; 0644/0600 under umask 022/077; 10 hostile worker names stay in the directory; "
           "3 identical failures = 1 message",
           ("-", "-"), (f"{len(checks)} checks", f"{sum(l.startswith('ok') for l in checks)} ok"),
           ("exit 0", status(p.returncode)))


def test_hostile_worker_names_stay_in_output_dir():
    names = ["../../escape", "a/b", "..", "rank 0 host", "x" * 200]
    written = []
    for name in names:
        r = run([prog("rel_ends"), "return", "0", "5"], env=dict(ENDS_ENV, PROF_WORKER_NAME=name))
        assert r.returncode == 0, r.stderr
        outside = [f for f in glob.glob(os.path.join(r.cwd, "**"), recursive=True)
                   if os.path.isfile(f) and not f.startswith(r.outdir + os.sep)]
        assert not outside and len(r.traces()) == 1, (name, outside, r.files())
        written.append(os.path.basename(r.traces()[0]))
    # Past worker_name's 255 bytes it is a configuration error: profiling off, one line, no file.
    r = run([prog("rel_ends"), "return", "0", "5"], env=dict(ENDS_ENV, PROF_WORKER_NAME="x" * 300))
    assert r.returncode == 0 and not os.path.exists(r.outdir) and len(r.sp_lines) == 1, r.sp_lines
    host = None
    probe = subprocess.run(["unshare", "-u", "true"], capture_output=True)
    if probe.returncode == 0:
        # A hostname with '/', '..' and a space, set in a private UTS namespace.
        wrap = [sys.executable, "-c", "import os, socket, sys; socket.sethostname('evil/../h o'); "
                "os.execvp(sys.argv[1], sys.argv[1:])"]
        r = run([prog("rel_ends"), "return", "0", "5"], env=ENDS_ENV, wrap=["unshare", "-u"] + wrap)
        assert r.returncode == 0 and len(r.traces()) == 1, (r.files(), r.stderr)
        host = os.path.basename(r.traces()[0])
    record("worker names from PROF_WORKER_NAME (../../escape, a/b, .., spaces, 200 chars) and a hostname "
           "'evil/../h o'", "every file lands in output_dir, name made safe; a 300-byte name is a "
           "configuration error (one line, no file)",
           ("-", "-"), (len(names) + (1 if host else 0), len(written) + (1 if host else 0)), ("exit 0", "exit 0"),
           f"e.g. {written[0]}" + (f", {host}" if host else ""))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        print(render_table(sys.argv[2] if len(sys.argv) > 2 else RESULTS))
    else:
        print("run the tests with tests/run_tests.py test_reliability; --table [JSON] renders the results")
