"""tests/test_torch.py — issue 11: unmodified PyTorch programs (tests/programs/torch_*.py, CPU
loops with no profiler code) under stepprof get torch.profiler's operator view. Each loop also
runs under real torch.profiler with the same schedule (tests/programs/torch_profiled.py, the
recipe's prof.step() after optimizer.step()), and the two traces are compared: the same
ProfilerStep#N numbers, the same aten op names and counts per step, the same Input Dims, and
the key-average # of Calls of the top ops. Also: the program's output and exit code, the
torch marker's plan line, DataLoader workers left inert, a program that runs torch.profiler
itself keeps it, Python processes that never import torch stay inert."""
import collections
import glob
import json
import os
import re
import sys

from harness import ROOT, load, run

PROGRAMS = os.path.join(ROOT, "tests", "programs")
SCHED = {"PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 3}
ITERS = 7  # steps 0..6: wait 0, warmup 1, record 2-4, then two steps outside the window


def program(name):
    return os.path.join(PROGRAMS, name)


def under_stepprof(name, env=None, args=(str(ITERS),)):
    e = dict(SCHED, PROF_RECORD_SHAPES=1, PROF_TABLE_ROW_LIMIT=-1)
    e.update(env or {})
    return run([sys.executable, program(name), *args], fake=False, env=e, timeout=300)


def under_torch_profiler(name, out):
    r = run([sys.executable, program("torch_profiled.py"), program(name), str(ITERS), out,
             str(SCHED["PROF_WAIT"]), str(SCHED["PROF_WARMUP"]), str(SCHED["PROF_ACTIVE"])],
            preload=False, fake=False, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "key_averages.json")) as f:
        ka = json.load(f)
    return r, load(os.path.join(out, "torch.pt.trace.json")), ka


def steps(trace):
    """{N: (ts, end)} of the ProfilerStep#N annotations on the host."""
    out = {}
    for e in trace["traceEvents"]:
        m = re.fullmatch(r"ProfilerStep#(\d+)", e.get("name", ""))
        if m and e.get("cat") == "user_annotation" and e.get("ph") == "X":
            out[int(m.group(1))] = (e["ts"], e["ts"] + e["dur"])
    return out


def ops_per_step(trace):
    """{N: Counter((name, Input Dims))} of aten cpu_op events inside ProfilerStep#N."""
    st = steps(trace)
    per = {n: collections.Counter() for n in st}
    for e in trace["traceEvents"]:
        if e.get("cat") != "cpu_op" or not e["name"].startswith("aten::"):
            continue
        for n, (a, b) in st.items():
            if a <= e["ts"] and e["ts"] + e["dur"] <= b:
                per[n][(e["name"], json.dumps(e["args"].get("Input Dims")))] += 1
    return per


def table_calls(path):
    """{Name: # of Calls} from a key-average table file."""
    with open(path) as f:
        lines = f.read().splitlines()
    header = next(l for l in lines if l.strip().startswith("Name"))
    cols = re.split(r"\s{2,}", header.strip())
    calls = {}
    for l in lines:
        if l.startswith("-") or l is header or not l.strip() or l.startswith(("Self ", "stepprof")):
            continue
        cells = re.split(r"\s{2,}", l.strip())
        if len(cells) == len(cols) and cells[0] != "Name":
            calls[cells[0]] = int(cells[cols.index("# of Calls")])
    return calls


def compare(name):
    mine = under_stepprof(name)
    assert mine.returncode == 0, mine.stderr
    assert mine.other_stderr == "", mine.other_stderr
    assert any("marker torch; recording steps 2-4" in l for l in mine.sp_lines), mine.sp_lines
    ref_run, ref, ref_ka = under_torch_profiler(name, os.path.join(mine.cwd, "ref"))
    assert mine.stdout == ref_run.stdout, "the program's output changed under stepprof"
    trace = load(mine.trace())
    assert sorted(steps(trace)) == sorted(steps(ref)) == [2, 3, 4]
    a, b = ops_per_step(trace), ops_per_step(ref)
    for n in (2, 3, 4):
        assert sum(b[n].values()) > 20, f"reference step {n} has too few aten ops: {b[n]}"
        assert a[n] == b[n], f"step {n}: only stepprof {a[n] - b[n]}, only torch.profiler {b[n] - a[n]}"
    table = glob.glob(os.path.join(mine.outdir, "*.key_averages.txt"))
    assert len(table) == 1, mine.files()
    calls = table_calls(table[0])
    top = sorted((k for k in ref_ka["calls"] if k.startswith("aten::")), key=lambda k: -ref_ka["calls"][k])[:10]
    assert top
    for k in top:
        assert calls.get(k) == ref_ka["calls"][k], f"{k}: stepprof {calls.get(k)}, torch.profiler {ref_ka['calls'][k]}"
    return mine, trace


def test_mlp_adam_matches_torch_profiler():
    mine, trace = compare("torch_mlp.py")
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert addmm and all(e["args"]["Input Dims"] == [[64], [16, 32], [32, 64], [], []] or
                         e["args"]["Input Dims"] == [[10], [16, 64], [64, 10], [], []] for e in addmm)
    assert all("Sequence number" in e["args"] for e in ops if e["name"] == "aten::linear")
    assert "Optimizer.step#Adam.step" in {e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"}


def test_conv_net_matches_torch_profiler():
    compare("torch_conv.py")


def test_two_optimizers_match_torch_profiler():
    compare("torch_two_opt.py")
