"""tests/test_reliability_exit.py — issue 14 items 1, 4, 7, 8 and issue 10 item 3: the first exit
wins, a finished recording is never lost at a normal exit, no `.tmp` file is ever left, signals
during the exit's wait, exec, and one line per output problem. Each test runs a target of
tests/programs/rel_*.c as a real process, the same program without the preload as the reference,
and checks what was written; results go to $SP_BUILD/reliability.json like test_reliability.py's
(rendered into docs/reliability.md with `python3 tests/test_reliability.py --table`)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "lib"))
import relrun as rel  # noqa: E402
from harness import assert_valid, load, prog  # noqa: E402

# No schedule, no marker: the whole run is one window, written at exit.
WHOLE_RUN = {"PROF_TABLE_PRINT": "none"}
# Launches of a whole-run recording whose export takes a second or more here (~85 MB of JSON). Not
# more: the profiled process peaks near 1.4 KB per event while exporting, and a later test
# (test_reports:test_large_trace_is_streamed) reads the suite's peak child RSS.
BIG = 300000
SIG_BIG = BIG


def _cleanup(*procs):
    for p in procs:
        shutil.rmtree(p.cwd, ignore_errors=True)


def _loss_lines(r, key):
    return [l for l in r.sp_lines if key in l and "lost" in l]


# ---- the first exit wins -----------------------------------------------------------------------

def test_exit_from_thread_while_main_works_first_exit_wins():
    argv = [prog("rel_exitrace"), "exit-thread", str(BIG), "300"]
    bare = rel.run(argv, preload=False)
    r = rel.run(argv, env=WHOLE_RUN, timeout=120)
    try:
        assert bare.returncode == 5 and "main done" not in bare.stdout, (bare.returncode, bare.stdout)
        assert r.returncode == bare.returncode, (rel.status(r.returncode), r.stdout, r.stderr[-2000:])
        assert r.stdout == bare.stdout, r.stdout
        assert not r.temporaries(), r.files()
        (path,) = r.traces()
        t = load(path)
        n = len(rel.launches(t, "race_kernel"))
        # main's launches until the other thread's exit held it: BIG, plus at most the 300 after.
        assert BIG <= n <= BIG + 300 and t["stepprof_dropped_events"] == 0, n
        rel.record("exit(5) from a thread while main has 300 ms of work left (whole-run recording of "
                   f"{BIG} launches written at exit)",
                   "status 5 and stdout as bare (main held while the trace is written, never prints "
                   "'main done' nor returns 0); trace complete, no temporary",
                   (f">= {BIG}", n), (1, len(r.traces())), (rel.status(bare.returncode), rel.status(r.returncode)),
                   f"{r.seconds:.1f} s")
    finally:
        _cleanup(bare, r)


def test_threads_held_inside_malloc_do_not_deadlock_the_exit():
    """The exit holds the program's other threads while the trace is written. A thread stopped
    inside malloc keeps its arena's lock, and the exporter's next malloc or free on that arena
    (128 allocating threads share the 16 arenas of a 2-core machine) waited for it forever: the
    process never ended, SIGTERM only shortened a wait that was stuck on a mutex. Now, when
    stepprof's threads use no CPU time for a second while others are held, the held threads are let
    go and the export finishes."""
    argv = [prog("rel_exitrace"), "malloc-threads", str(BIG), "128"]
    bare = rel.run(argv, preload=False)
    r = rel.run(argv, env=WHOLE_RUN, timeout=60)
    try:
        assert bare.returncode == r.returncode == 9, (rel.status(r.returncode), r.stderr[-2000:])
        assert r.stdout == bare.stdout, r.stdout
        assert not r.temporaries(), r.files()
        (path,) = r.traces()
        n = len(rel.launches(load(path), "race_kernel"))
        assert n == BIG, n
        rel.record(f"exit(9) while 128 threads allocate without pause (whole-run recording of {BIG} launches)",
                   "the export stalls on an arena a held thread has; the held threads are let go after "
                   "1 s without progress: no deadlock; trace complete, no temporary; status 9", (BIG, n), (1, len(r.traces())),
                   (rel.status(bare.returncode), rel.status(r.returncode)), f"{r.seconds:.1f} s")
    finally:
        _cleanup(bare, r)


def test_thread_that_blocks_signals_does_not_hold_up_a_written_exit():
    """The exit holds the program's other threads while it waits for the files, giving each up to
    200 ms to take the hold. A thread that keeps every signal blocked (a library's worker) never
    does: the exit once waited the whole 200 ms for it although the files were long written (every
    process with CUPTI's worker: 0.23 s for a 10k-launch window, 0.06 s now). The hold ends as soon
    as nothing is left to write: the debug line says so; the traces and status are the program's."""
    r = rel.run([prog("rel_ends"), "blocked-thread", "2", "50"],
                env={"PROF_MARKER": "cudaProfilerApi", "PROF_REPEAT": 0, "PROF_LOG": "debug"})
    try:
        assert r.returncode == 0, (rel.status(r.returncode), r.stderr[-2000:])
        assert len(r.traces()) == 3 and not r.temporaries(), r.files()
        said = [l for l in r.stderr.splitlines() if l.startswith("stepprof: exit:") and "other threads held" in l]
        assert len(said) == 1 and said[0].endswith("other threads held: the files were written first"), said
    finally:
        _cleanup(r)


# ---- a finished recording is never lost at a normal exit --------------------------------------

def test_long_whole_run_written_at_exit_whatever_finalize_timeout():
    # finalize_timeout_s bounds signals and _exit only: 0 here would lose everything if exit used it.
    r = rel.run([prog("rel_exitrace"), "return", str(BIG)], env=dict(WHOLE_RUN, PROF_FINALIZE_TIMEOUT_S=0),
                timeout=150)
    try:
        assert r.returncode == 0, (rel.status(r.returncode), r.stderr[-2000:])
        assert not r.temporaries(), r.files()
        assert not [l for l in r.sp_lines if "lost" in l], r.sp_lines
        (path,) = r.traces()
        t = load(path)
        n = len(rel.launches(t, "race_kernel"))
        assert n == BIG and t["stepprof_dropped_events"] == 0 and t["stepprof_truncated"] is False, n
        rel.record(f"return from main after a whole-run recording of {BIG} launches, "
                   "`finalize_timeout_s: 0`", "the exit waits for the whole trace (exit_timeout_s, default "
                   "600 s), whatever finalize_timeout_s says; no temporary",
                   (BIG, n), (1, len(r.traces())), ("exit 0", rel.status(r.returncode)),
                   f"{r.seconds:.1f} s, {os.path.getsize(path) >> 20} MiB")
    finally:
        _cleanup(r)


def test_quick_exit_writes_the_recording():
    """quick_exit runs the at_quick_exit handlers, then calls _exit inside libc, where the _exit
    interposer never sees it: the whole-run recording was lost without a word (and a trace being
    written at that moment left its temporary). It ends like an interposed _exit now."""
    argv = [prog("rel_exitrace"), "quick-exit", "20000"]
    bare = rel.run(argv, preload=False)
    r = rel.run(argv, env=WHOLE_RUN)
    try:
        assert bare.returncode == r.returncode == 8, (rel.status(r.returncode), r.stderr[-2000:])
        assert r.stdout == bare.stdout, r.stdout
        assert not r.temporaries(), r.files()
        (path,) = r.traces()
        assert_valid(path)
        n = len(rel.launches(load(path), "race_kernel"))
        assert n == 20000, n
        rel.record("quick_exit(8) after a whole-run recording of 20000 launches",
                   "written as for _exit (quick_exit's own _exit is inside libc: at_quick_exit handler); "
                   "no temporary; status 8", (20000, n), (1, len(r.traces())),
                   (rel.status(bare.returncode), rel.status(r.returncode)))
    finally:
        _cleanup(bare, r)


def test_pthread_exit_from_main_ends_with_the_last_thread():
    """Bare, a process whose main thread calls pthread_exit ends with exit(0) when its last thread
    ends. stepprof's own threads (exporter, finisher) never end, so the process lived on forever,
    main a zombie, with every live thread blocking every signal: not even SIGTERM ended it."""
    argv = [prog("rel_exitrace"), "pthread-exit", "1000", "2000"]
    bare = rel.run(argv, preload=False)
    r = rel.run(argv, env=WHOLE_RUN, timeout=60)
    try:
        assert bare.returncode == r.returncode == 0, (rel.status(r.returncode), r.stderr[-2000:])
        assert r.stdout == bare.stdout == "launched 1000\nthread done\n", r.stdout
        assert not r.temporaries(), r.files()
        (path,) = r.traces()
        assert_valid(path)
        n = len(rel.launches(load(path), "race_kernel"))
        assert n == 3000, n
        rel.record("main calls pthread_exit, its other thread makes 2000 launches and returns "
                   "(whole-run recording)", "the process ends with status 0 when that thread ends, as bare "
                   "(stepprof's threads do not keep it alive); trace complete, no temporary",
                   (3000, n), (1, len(r.traces())), (rel.status(bare.returncode), rel.status(r.returncode)))
    finally:
        _cleanup(bare, r)


def test_exit_timeout_reached_removes_temporary_and_says_what_is_lost():
    r = rel.run([prog("rel_exitrace"), "exit-status", str(BIG)], env=dict(WHOLE_RUN, PROF_EXIT_TIMEOUT_S=0),
                timeout=120)
    try:
        assert r.returncode == 7, (rel.status(r.returncode), r.stderr[-2000:])
        assert r.stdout == f"launched {BIG}\n", r.stdout
        assert not r.temporaries() and not r.traces(), r.files()
        lost = _loss_lines(r, "exit_timeout_s")
        assert len(lost) == 1, r.sp_lines
        m = re.search(r"\((\d+) events\)", lost[0])
        assert m and int(m.group(1)) >= BIG, lost[0]
        assert "a larger exit_timeout_s would have kept them" in lost[0], lost[0]
        rel.record(f"exit(7) with `exit_timeout_s: 0` and {BIG} launches to write",
                   "the bound is reached: temporary removed, one line with the events lost and the key; "
                   "status 7", (f"{BIG} lost, said", f"{m.group(1)} lost, said"), (0, len(r.traces())),
                   ("exit 7", rel.status(r.returncode)), lost[0][:100] + "...")
    finally:
        _cleanup(r)


def _signal_during_exit_export(sig, env, launches=SIG_BIG):
    p = rel.start([prog("rel_exitrace"), "return", str(launches)], env=env)
    rel.read_until(p, f"launched {launches}", timeout=120)
    # The trace's temporary exists: the exit is waiting for it.
    seen = rel.wait_for(lambda: os.path.isdir(p.sp_outdir) and any(".tmp." in f for f in os.listdir(p.sp_outdir)),
                        timeout=60)
    assert seen, "no temporary appeared"
    p.send_signal(sig)
    return rel.finish(p, timeout=120)


def test_signal_during_exit_export_keeps_exit_status_and_trace():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        r = _signal_during_exit_export(sig, WHOLE_RUN)
        try:
            # finalize_timeout_s (10 s) from the signal on is enough for the rest of the trace.
            assert r.returncode == 0, (sig.name, rel.status(r.returncode), r.stderr[-2000:])
            assert not r.temporaries(), r.files()
            (path,) = r.traces()
            n = len(rel.launches(load(path), "race_kernel"))
            assert n == SIG_BIG, n
        finally:
            _cleanup(r)
    rel.record("SIGTERM, SIGINT, SIGHUP, SIGQUIT each while the exit (return 0) writes a "
               f"{SIG_BIG}-launch trace", "the exit status stays 0 (not death by the signal); the signal "
               "shortens the wait to finalize_timeout_s; trace complete, no temporary",
               (f"{SIG_BIG} x 4", f"{SIG_BIG} x 4"), (4, 4), ("exit 0", rel.status(r.returncode)))


def test_signal_during_exit_export_with_zero_finalize_timeout_reports_loss():
    # The signal must come while the trace is being written; a fast export can finish between the
    # temporary's appearance and the signal's handling (then the trace is whole, and nothing is
    # said): the run is repeated with twice the launches until the signal cuts an export short.
    for launches in (SIG_BIG, 2 * SIG_BIG, 4 * SIG_BIG, 8 * SIG_BIG):
        r = _signal_during_exit_export(signal.SIGTERM, dict(WHOLE_RUN, PROF_FINALIZE_TIMEOUT_S=0), launches)
        try:
            assert r.returncode == 0, (rel.status(r.returncode), r.stderr[-2000:])
            assert not r.temporaries(), r.files()
            said = _loss_lines(r, "finalize_timeout_s")
            lost = [l for l in said if "the trace being written" in l]
            if not lost:   # the trace finished first: whole, and at most its reports said lost
                assert all("the last trace is whole" in l for l in said), said
                (path,) = r.traces()
                assert len(rel.launches(load(path), "race_kernel")) == launches
                continue
            assert not r.traces(), r.files()
            assert len(lost) == 1 and re.search(r"\(\d+ events\)", lost[0]), r.sp_lines
            rel.record("SIGTERM while the exit writes the trace, `finalize_timeout_s: 0`",
                       "the wait ends: temporary removed, one line says what was lost; exit status 0",
                       ("lost, said", "lost, said"), (0, len(r.traces())), ("exit 0", rel.status(r.returncode)),
                       lost[0][:100] + "...")
            return
        finally:
            _cleanup(r)
    raise AssertionError(f"every export up to {8 * SIG_BIG} launches finished before SIGTERM was handled")


# ---- signals with CUPTI on, at several moments -------------------------------------------------

CYCLE_ENV = {"PROF_MARKER": "cudaProfilerApi", "PROF_REPEAT": 0, "PROF_TABLE_PRINT": "none"}
CYCLE_LAUNCHES = 1000


def test_signals_at_several_moments_with_cupti_write_the_cycle_in_progress():
    """Cycles of 2 x 1000 launches with a 5 ms sleep between the halves, CUPTI stand-in loaded; each
    terminating signal at 3 moments (so it lands in launches, in the window close under the schedule
    lock, in sleeps). Every cycle started is on disk: the completed ones whole, the one in progress
    marked truncated; no temporary, no loss line; death by the signal."""
    found = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        for delay in (0.03, 0.08, 0.15, 0.25, 0.4):
            p = rel.start([prog("rel_exitrace"), "cycles", str(CYCLE_LAUNCHES), "5"], env=CYCLE_ENV, cupti=True,
                          preexec=lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_CORE,
                                                                            (0, 0)))
            head = rel.read_until(p, "in cycle 0")   # activated, first cycle under way
            time.sleep(delay)
            sent = time.time()
            p.send_signal(sig)
            r = rel.finish(p, timeout=60)
            try:
                took = time.time() - sent
                started = r.stdout.count("in cycle") + sum("in cycle" in l for l in head)
                traces = r.traces()
                what = (sig.name, delay, started, len(traces), r.files()[-3:], r.sp_lines[-3:])
                assert r.returncode == -sig, (what, rel.status(r.returncode))
                assert not r.temporaries(), what
                assert not [l for l in r.sp_lines if "lost" in l], what
                assert took < 10, (what, took)
                # The cycle whose "in cycle" line was not printed yet may have started.
                assert started <= len(traces) <= started + 1 and traces, what
                last = load(traces[-1])
                assert_valid(traces[-1])
                if len(traces) > 1:
                    prev = load(traces[-2])
                    assert len(rel.launches(prev, "race_kernel")) == 2 * CYCLE_LAUNCHES, what
                    assert prev["stepprof_truncated"] is False, what
                n_last = len(rel.launches(last, "race_kernel"))
                # In progress: written, truncated. Or the signal came between two cycles: the last is whole.
                assert (last["stepprof_truncated"] is True and n_last <= 2 * CYCLE_LAUNCHES) or \
                    (n_last == 2 * CYCLE_LAUNCHES and len(traces) == started), (what, n_last)
                found.append((len(traces), last["stepprof_truncated"]))
            finally:
                _cleanup(r)
    truncated = sum(1 for _, t in found if t)
    rel.record("SIGTERM, SIGINT, SIGHUP, SIGQUIT 30, 80, 150, 250, 400 ms after the first of back-to-back cycles (CUPTI stand-in; "
               "the signal lands in launches, window closes or sleeps)",
               "every cycle started is on disk: the completed ones whole, the one in progress truncated; "
               "no temporary, no loss; death by the signal within finalize_timeout_s",
               ("20 runs, cycle in progress written", f"{len(found)} runs, {truncated} with a truncated last cycle, "
                f"{len(found) - truncated} ended between cycles"),
               ("all cycles", f"{sum(n for n, _ in found)} traces"), ("the signal", "the signal"))


# ---- exec --------------------------------------------------------------------------------------

def test_exec_itself_three_deep_every_image_traced():
    """execv, execvp, execl, then return: 4 images under one pid, each with its own 1000 launches."""
    argv = [prog("rel_exitrace"), "exec", "1000", "3"]
    bare = rel.run(argv, preload=False)
    r = rel.run(argv, env=WHOLE_RUN)
    try:
        same = lambda out: re.sub(r"pid \d+", "pid P", out)  # noqa: E731
        assert r.returncode == bare.returncode == 0 and same(r.stdout) == same(bare.stdout), (r.stdout, r.stderr)
        pids = {int(l.split()[-1]) for l in r.stdout.splitlines() if l.startswith("image ")}
        assert len(pids) == 1, pids
        counts = []
        for path in r.traces():
            assert_valid(path)
            t = load(path)
            counts.append(len(rel.launches(t, "race_kernel")))
            assert t["stepprof_truncated"] is False and {e["pid"] for e in rel.runtime_calls(t)} == pids
        assert counts == [1000] * 4, counts
        assert not r.temporaries() and not [l for l in r.sp_lines if "lost" in l], (r.files(), r.sp_lines)
        rel.record("a program that execs itself 3 deep (execv, execvp, execl), whole-run recording",
                   "every image's recording is written before its exec: 4 traces under one pid",
                   ("1000 x 4", " x ".join(map(str, counts)) if len(set(counts)) > 1 else f"{counts[0]} x "
                    f"{len(counts)}"), (4, len(r.traces())), ("exit 0", rel.status(r.returncode)))
    finally:
        _cleanup(bare, r)


def test_exit_from_a_signal_handler_that_interrupted_the_schedule_does_not_hang():
    """A program's SIGPROF handler (a timer) calls exit(3) while main is at a step boundary (an NVTX
    push), holding the schedule lock (only the terminating signals are blocked there). The exit's handler
    took that lock again on the same thread and waited forever. Now the finisher thread does the
    work, as for _exit, within finalize_timeout_s: the cycle in progress is said lost, no
    temporary, status 3. The timer fires at a random point: the run is repeated until it lands
    inside the schedule (most runs)."""
    env = {"PROF_MARKER": "nvtx:step", "PROF_ACTIVE": 1, "PROF_WARMUP": 0, "PROF_REPEAT": 0,
           "PROF_TABLE_PRINT": "none", "PROF_FINALIZE_TIMEOUT_S": 1}
    for attempt in range(12):
        r = rel.run([prog("rel_exitrace"), "timer-exit", "1000", str(30 + 7 * attempt)], env=env, timeout=60)
        try:
            assert r.returncode == 3, (rel.status(r.returncode), r.stderr[-2000:])
            assert r.stdout == "launched 1000\n", r.stdout
            assert not r.temporaries(), r.files()
            for path in r.traces():
                assert_valid(path)
            if [l for l in r.sp_lines if "the cycle in progress is lost" in l]:
                rel.record("exit(3) from a SIGPROF handler that interrupted a step boundary (schedule lock held)",
                           "no hang: the finisher does the work within finalize_timeout_s; the cycle in "
                           "progress said lost; no temporary; status 3", ("lost, said", "lost, said"),
                           ("-", len(r.traces())), ("exit 3", rel.status(r.returncode)), f"{r.seconds:.1f} s")
                return
        finally:
            _cleanup(r)
    raise AssertionError("the timer never fired inside the schedule in 12 runs")


def test_program_handler_that_reraises_its_signal_keeps_the_recording():
    """A program with its own SIGTERM handler (installed before the first CUDA call, so stepprof
    installs none) that cleans up, restores SIG_DFL and sends the signal again, the usual idiom
    (glog's and absl's handlers; Python after an uncaught KeyboardInterrupt kill()s itself the same
    way): no atexit runs, and the whole-run recording was lost. The raise, kill and pthread_kill
    interposers (inject/selfsignal.c) have it written first; the process still ends by SIGTERM."""
    for how, by in ((0, "raise"), (1, "kill(getpid())"), (2, "pthread_kill(pthread_self())")):
        argv = [prog("rel_exitrace"), "reraise", "20000", str(how)]
        bare = rel.run(argv, preload=False)
        r = rel.run(argv, env=WHOLE_RUN)
        try:
            assert bare.returncode == r.returncode == -signal.SIGTERM, (by, rel.status(r.returncode),
                                                                        r.stderr[-2000:])
            assert r.stdout == bare.stdout == "launched 20000\ncleaned up\n", (by, r.stdout)
            assert not r.temporaries(), (by, r.files())
            (path,) = r.traces()
            trace = load(path)
            assert_valid(path)
            n = len(rel.launches(trace, "race_kernel"))
            assert n == 20000, (by, n)
            if how == 0:
                rel.record("the program's own SIGTERM handler restores SIG_DFL and re-raises (raise, kill "
                           "of its pid, pthread_kill of itself), whole-run recording of 20000 launches",
                           "written before the signal is sent again (inject/selfsignal.c); status SIGTERM; "
                           "no temporary", (20000, n), (1, len(r.traces())),
                           (rel.status(bare.returncode), rel.status(r.returncode)))
        finally:
            _cleanup(bare, r)


def test_sigpipe_during_export_leaves_no_temporary():
    """A program whose reader went away (`./train | head`) dies by SIGPIPE at its next write.
    SIGPIPE was not among the signals stepprof watches: the trace being written lost, and its
    `.tmp.<pid>` file left behind. Now it ends like SIGTERM: the trace is finished within
    finalize_timeout_s, then the process dies by SIGPIPE. Repeated with twice the launches when
    the export was done before the write."""
    for launches in (BIG, 2 * BIG, 4 * BIG):
        argv = [prog("rel_exitrace"), "sigpipe", str(launches)]
        r = rel.run(argv, env=CYCLE_ENV, timeout=120)
        try:
            assert r.returncode == -signal.SIGPIPE, (rel.status(r.returncode), r.stdout, r.stderr[-2000:])
            assert not r.temporaries(), r.files()
            (path,) = r.traces()
            n = len(rel.launches(load(path), "race_kernel"))
            assert n == launches, n
            if "trace already written" not in r.stdout:
                rel.record("SIGPIPE (write to a pipe whose reader is gone) while a finished cycle is exported",
                           "the trace is finished within finalize_timeout_s, no temporary; death by SIGPIPE",
                           (launches, n), (1, len(r.traces())), ("SIGPIPE", rel.status(r.returncode)))
                return
        finally:
            _cleanup(r)
    raise AssertionError(f"every export up to {4 * BIG} launches finished before the write")


# ---- fork -------------------------------------------------------------------------------------

def test_fork_child_abandoning_its_trace_leaves_the_parents_alone():
    """A fork child inherits the parent's table of temporaries being written. A child that uses
    CUDA and gives up its own export (SIGTERM, `finalize_timeout_s: 0`) removed every listed
    temporary, the parent's trace included, which its exporter was still writing: the parent's
    finished recording was lost ('cannot write ...: No such file or directory'). The child gives
    up while the parent's temporary is there; when the parent's export was done first the run is
    repeated with twice the launches."""
    env = dict(CYCLE_ENV, PROF_FINALIZE_TIMEOUT_S=0)
    for launches in (BIG, 2 * BIG, 4 * BIG):
        r = rel.run([prog("rel_exitrace"), "fork-abandon", str(launches)], env=env, timeout=120)
        try:
            assert r.returncode == 0 and "child signal 15" in r.stdout, (rel.status(r.returncode), r.stdout,
                                                                         r.stderr[-2000:])
            assert not r.temporaries(), r.files()
            assert not [l for l in r.sp_lines if "cannot write" in l], r.sp_lines
            # The parent's trace has all its launches; the child's, if its export won the race, 1000.
            counts = sorted(len(rel.launches(load(t), "race_kernel")) for t in r.traces())
            assert counts in ([launches], [1000, launches]), (counts, r.files(), r.sp_lines)
            if "parent's trace already written" not in r.stdout:
                return
        finally:
            _cleanup(r)
    raise AssertionError(f"every parent's export up to {4 * BIG} launches finished before the child gave up")


def test_signal_during_exec_wait_ends_the_process_by_the_signal():
    """Before an exec, the image's recording is written with the wait of a normal exit. A SIGTERM
    that came during that wait only shortened it, as it does for an exit, and then the exec went
    on: the new image ran and the process ended with status 0, where bare it dies by SIGTERM.
    Now the signal ends the process once the wait is over; the trace is whole, no temporary."""
    p = rel.start([prog("rel_exitrace"), "exec", str(BIG), "1"], env=WHOLE_RUN)
    rel.read_until(p, f"launched {BIG}", timeout=120)
    seen = rel.wait_for(lambda: os.path.isdir(p.sp_outdir) and any(".tmp." in f for f in os.listdir(p.sp_outdir)),
                        timeout=60)
    assert seen, "no temporary appeared"
    p.send_signal(signal.SIGTERM)
    r = rel.finish(p, timeout=120)
    try:
        assert r.returncode == -signal.SIGTERM, (rel.status(r.returncode), r.stdout, r.stderr[-2000:])
        assert not r.temporaries(), r.files()
        traces = r.traces()
        assert traces and len(rel.launches(load(traces[0]), "race_kernel")) == BIG, r.files()
        rel.record("SIGTERM while an exec waits for the image's trace",
                   "the wait is shortened to finalize_timeout_s, then the process dies by the signal "
                   "(the new image does not run); the image's trace whole, no temporary",
                   (BIG, len(rel.launches(load(traces[0]), "race_kernel"))), (1, len(traces)),
                   ("SIGTERM", rel.status(r.returncode)))
    finally:
        _cleanup(r)


# ---- output problems: one line per problem for the run, a full disk stops writing, a rate bound --

def test_full_disk_one_line_for_the_run_and_no_file_after():
    """A 1 MiB tmpfs; cycles alternate small (fits) and large (does not): the first refusal is one
    line, and no file is written after it (before: one line per failure, each small cycle in
    between saying 'works again')."""
    d = tempfile.mkdtemp(prefix="sp-rel-tmpfs-")
    out, listing = os.path.join(d, "mnt"), os.path.join(d, "listing")
    os.makedirs(out)
    wrap = ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {out} && \"$@\"; rc=$?; "
            f"ls -l --time-style=+%s.%N {out} > {listing}; exit $rc", "sh"]
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {out}"],
                           capture_output=True)
    assert probe.returncode == 0, probe.stderr   # root and unshare -m: installed and required
    env = dict(CYCLE_ENV, PROF_OUTPUT_DIR=out, REL_CYCLES=12, REL_ALTERNATE=200)
    argv = [prog("rel_exitrace"), "cycles", "50", "0"]
    r = rel.run(argv, env=env, wrap=wrap, cwd=d)
    try:
        assert r.returncode == 0, (rel.status(r.returncode), r.stderr[-2000:])
        errors = [l for l in r.sp_lines if "No space left" in l]
        assert len(errors) == 1 and "no more files" in errors[0], r.sp_lines
        assert not [l for l in r.sp_lines if "works again" in l], r.sp_lines
        names = [l.split()[-1] for l in open(listing).read().splitlines() if ".pt.trace.json" in l]
        assert not [n for n in names if ".tmp." in n], names
        # Cycle 0 (small) fits, cycle 1 (large) is refused: nothing after it.
        assert len(names) == 1, names
        rel.record("output on a 1 MiB tmpfs, 12 cycles alternating small (fits) and 200x larger (does not)",
                   "the first refusal is one line for the whole run; no file is written after it; no temporary",
                   ("cycle 0 written, then none", f"{len(names)} trace(s)"), (1, len(names)),
                   ("exit 0", rel.status(r.returncode)), f"{len(errors)} line: {errors[0][:80]}...")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_unwritable_output_dir_said_at_start_once():
    d = tempfile.mkdtemp(prefix="sp-rel-")
    blocker = os.path.join(d, "blocked")
    open(blocker, "w").close()
    out = os.path.join(blocker, "traces")   # under a regular file: ENOTDIR even for root
    p = rel.start([prog("rel_exitrace"), "cycles", "50", "0"], env=dict(CYCLE_ENV, PROF_OUTPUT_DIR=out, REL_CYCLES=0),
                  cwd=d)
    r = rel.finish(p)
    try:
        # No cycle at all: the line can only come from the check at activation.
        assert r.returncode == 0, r.stderr
        errors = [l for l in r.sp_lines if "cannot create output directory" in l]
        assert len(errors) == 1 and "checked at start" in errors[0], r.sp_lines
        r2 = rel.run([prog("rel_exitrace"), "cycles", "50", "0"],
                     env=dict(CYCLE_ENV, PROF_OUTPUT_DIR=out, REL_CYCLES=20), cwd=d)
        errors2 = [l for l in r2.sp_lines if "cannot create output directory" in l]
        assert r2.returncode == 0 and len(errors2) == 1, r2.sp_lines
        rel.record("output directory under a regular file (ENOTDIR), then 20 cycles",
                   "said at activation, before any cycle; one line for the whole run",
                   ("-", "-"), (0, 0), ("exit 0", rel.status(r2.returncode)), f"{len(errors2)} line for 20 cycles")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_repeat_zero_fast_cycles_bounded_with_one_line():
    env = dict(CYCLE_ENV, REL_CYCLES=400)
    r = rel.run([prog("rel_exitrace"), "cycles", "10", "0"], env=env)
    try:
        assert r.returncode == 0, r.stderr[-2000:]
        n = len(r.traces())
        lines = [l for l in r.sp_lines if "per second" in l]
        # 100 at once, then 10 per second of the run.
        assert len(lines) == 1 and 100 <= n <= 100 + 10 * r.seconds + 1, (n, r.seconds, r.sp_lines)
        assert not r.temporaries()
        rel.record("`repeat: 0` with 400 cycles of 20 launches in a row",
                   "at most 100 traces, then 10 per second; one line says so",
                   ("<= 100 + 10/s", n), ("-", "-"), ("exit 0", rel.status(r.returncode)),
                   f"{r.seconds:.1f} s, {lines[0][:70]}...")
    finally:
        _cleanup(r)
