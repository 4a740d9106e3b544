"""tests/test_torch_misc.py — issue 11, the PyTorch corners: a program that starts torch.profiler
while stepprof holds CUPTI gets CUPTI (and the operators), on the CUDA and CUPTI stand-ins
(tests/programs/torch_cupti_handback.py does what such a program and its Kineto do, since real
PyTorch binds NVIDIA's libraries and opens no CUPTI without a GPU; the real-PyTorch side of the
same hand-over is test_torch.py:test_program_running_torch_profiler_keeps_it). Forward passes on
two threads (per-thread sequence numbers): every forward-to-backward link stepprof draws is one
torch.profiler draws for the same loop, with the forward thread as Fwd thread id."""
import collections
import json
import os
import sys
import tempfile

from harness import ROOT, assert_valid, load, run
from test_torch import fwdbwd_links, ops_per_step, steps

PROGRAMS = os.path.join(ROOT, "tests", "programs")
BEFORE, AFTER = 5, 7   # memsets before the program starts torch.profiler, and under its Kineto
HANDED_OVER = "hands CUPTI and operators over to it"


def handback(env):
    """Runs torch_cupti_handback.py under stepprof with FAKECUPTI_LOG; returns (run, the CLOCK_MONOTONIC
    ns when the hand-over returned, CUPTI's control calls as [(ns, call)])."""
    log = os.path.join(tempfile.mkdtemp(prefix="sp-cupti-"), "cupti.log")   # under the runner's per-test TMPDIR
    r = run([sys.executable, os.path.join(PROGRAMS, "torch_cupti_handback.py"), str(BEFORE), str(AFTER)],
            env=dict(env, FAKECUPTI_LOG=log), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.other_stderr == "", r.other_stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("yield ") and len(out) == 2, r.stdout
    # Kineto's own client: it subscribed, got every record of its memsets and none of stepprof's buffers.
    assert out[1] == "kineto subscribe 0 memsets %d foreign_buffers 0" % AFTER, out[1]
    said = [l for l in r.sp_lines if HANDED_OVER in l]
    assert len(said) == 1 and "runs torch.profiler itself" in said[0], r.sp_lines
    with open(log) as f:
        calls = [(int(t), what) for t, what in (l.rstrip("\n").split(" ", 1) for l in f)]
    return r, int(out[0].split()[1]), calls


def check_cupti_calls(yield_ns, calls):
    before = [c for t, c in calls if t <= yield_ns]
    after = [c for t, c in calls if t > yield_ns]
    # Before the hand-over returned, stepprof turned off every kind it had on and flushed forced;
    # after it, every CUPTI call is Kineto's (no flush, no finalize of stepprof's, not even at exit).
    on = set()
    for c in before:
        kind = c.split()[1] if c.split()[0] in ("enable", "disable") else None
        if c.startswith("enable"):
            on.add(kind)
        elif c.startswith("disable"):
            on.discard(kind)
    assert not on, (on, before)
    assert before[-1] == "flush 1", before
    assert after == ["enable 2", "flush 1", "disable 2"], after


def assert_api_names(trace):
    """The trace is written after the hand-over, when stepprof may no longer ask CUPTI for a callback
    id's name: CUPTI's API records are named from what was looked up before it, none "cbid N"."""
    unnamed = [e for e in trace["traceEvents"] if e.get("name", "").startswith("cbid ")]
    assert not unnamed, unnamed[:3]


def by_cat(trace, cat, name=None):
    return [e for e in trace["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X" and
            (name is None or e["name"] == name)]


def test_cupti_handed_over_in_a_whole_run_window():
    r, yield_ns, calls = handback({})
    check_cupti_calls(yield_ns, calls)
    assert_valid(r.trace())
    t = load(r.trace())
    assert t["stepprof_gpu_source"] == "cupti"
    assert_api_names(t)
    # The memsets before the hand-over (BEFORE, then 2) are stepprof's, with their calls; those
    # after are Kineto's: stepprof keeps recording their calls, not their GPU work.
    assert len(by_cat(t, "gpu_memset")) == BEFORE + 2
    calls_seen = by_cat(t, "cuda_runtime", "cudaMemset")
    assert len(calls_seen) == BEFORE + 2 + AFTER + 3
    assert not [e for e in calls_seen if e["args"].get("stepprof_source") == "cupti"]


def test_cupti_handed_over_inside_a_cycle():
    """Cycles are the program's cudaProfilerStart..Stop ranges: the first ends before the hand-over,
    the second has it inside (its GPU records flushed at the hand-over go to it), the third comes
    after (host calls only; the trace says it has no GPU source)."""
    r, yield_ns, calls = handback({"PROF_MARKER": "cudaProfilerApi", "PROF_REPEAT": 0})
    check_cupti_calls(yield_ns, calls)
    traces = [load(p) for p in r.traces()]
    for p in r.traces():
        assert_valid(p)
    assert [t["stepprof_cycle"] for t in traces] == [0, 1, 2]
    assert [t["stepprof_gpu_source"] for t in traces] == ["cupti", "cupti", "none"]
    assert [len(by_cat(t, "gpu_memset")) for t in traces] == [BEFORE, 2, 0]
    assert [len(by_cat(t, "cuda_runtime", "cudaMemset")) for t in traces] == [BEFORE, 2 + AFTER, 3]
    for t in traces:
        assert_api_names(t)
        sources = collections.Counter(e["args"].get("stepprof_source") for e in by_cat(t, "cuda_runtime"))
        assert "cupti" not in sources, sources


def link_key(fwd, bwd):
    """A link as the two runs can compare it: each thread's model has its own sizes."""
    return (fwd["name"], json.dumps(fwd["args"].get("Input Dims")), bwd["name"],
            json.dumps(bwd["args"].get("Input Dims")))


def test_forward_on_two_threads_links_only_what_torch_profiler_links():
    prog = os.path.join(PROGRAMS, "torch_two_threads.py")
    sched = {"PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 3}
    r = run([sys.executable, prog, "7"], fake=False, timeout=300, env=dict(sched, PROF_RECORD_SHAPES=1))
    assert r.returncode == 0 and r.other_stderr == "", r.stderr
    ref_dir = os.path.join(r.cwd, "ref")
    ref_run = run([sys.executable, prog, "7", ref_dir, "1", "1", "3"], preload=False, fake=False, timeout=300)
    assert ref_run.returncode == 0, ref_run.stderr
    assert r.stdout == ref_run.stdout
    assert_valid(r.trace())
    mine, ref = load(r.trace()), load(os.path.join(ref_dir, "torch.pt.trace.json"))
    # Both threads' operators are recorded, step by step as torch.profiler records them.
    assert sorted(steps(mine)) == sorted(steps(ref)) == [2, 3, 4]
    a, b = ops_per_step(mine), ops_per_step(ref)
    for n in (2, 3, 4):
        assert a[n] == b[n] and sum(b[n].values()) > 40, (n, a[n] - b[n], b[n] - a[n])
    tids = {e["tid"] for e in mine["traceEvents"] if e.get("cat") == "cpu_op"}
    assert len(tids) == 2, tids
    # The threads share sequence numbers, so seq alone links a's forward ops to b's backward ops
    # (the old rule drew 10 such links here). Every link stepprof draws is one of torch.profiler's.
    links = fwdbwd_links(mine)
    ref_links = collections.Counter(link_key(f, g) for f, g in fwdbwd_links(ref))
    got = collections.Counter(link_key(f, g) for f, g in links)
    assert not got - ref_links, got - ref_links
    assert sum(got.values()) >= 9, got   # those whose number only one thread has in the cycle
    # Fwd thread id: the linked forward op's thread; none on backward work left unlinked.
    for f, g in links:
        assert f["args"]["Sequence number"] == g["args"]["Sequence number"]
        assert f["args"]["Fwd thread id"] == 0 and g["args"]["Fwd thread id"] == f["tid"], (f, g)
    linked = {id(g) for _, g in links}
    bwd = [e for e in mine["traceEvents"] if e.get("cat") == "cpu_op" and "Sequence number" in e["args"] and
           e["name"].endswith(tuple("0123456789")) and id(e) not in linked and "Backward" in e["name"]]
    assert bwd and all("Fwd thread id" not in e["args"] for e in bwd if not e["name"].startswith("autograd::"))
