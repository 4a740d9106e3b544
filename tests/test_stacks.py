"""tests/test_stacks.py — with_stack's native call stacks (split from test_reports.py): the
collector's capture and dedup, stacks in the trace, the key-average table's Source Location and
the collapsed files, the same frames from libunwind and from glibc's backtrace() (the `unwinder`
key, and the fallback when libunwind.so.8 cannot be loaded), an nvcc program's own functions."""
import glob
import json
import os
import re
import subprocess
import tempfile

from harness import FAKE_DIR, ROOT, load, prog, run
from test_reports import outputs, parse_table, tool


CHAIN = ["main", "train_step", "forward", "launch"]


def frames_in_order(stack, names):
    funcs = [f.split("+")[0] for f in stack.split(";")]
    pos = [funcs.index(n) for n in names]
    return pos == sorted(pos) and pos[-1] == len(funcs) - 1


def collector_check(unwinder):
    out = subprocess.run([prog("report_stack_bench"), "check", unwinder], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return dict(l.split(" ", 1) for l in out.stdout.splitlines())


def test_stack_collector_captures_and_dedups():
    lines = collector_check("auto")
    assert frames_in_order(lines["stack"], ["main", "chain_outer", "chain_middle", "chain_inner"]), lines
    assert "libreport_stacks" not in lines["stack"] and "sp_stack" not in lines["stack"]
    assert lines["again"] == "1", "the same stack twice has one id"
    # glibc's backtrace() (unwinder: glibc) walks the same frames, return addresses alike.
    assert collector_check("glibc") == lines


def test_stack_capture_cost_is_reported():
    for unwinder in ("libunwind", "glibc"):
        out = subprocess.run([prog("report_stack_bench"), "bench", "20000", unwinder], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        vals = dict(l.split(" ", 1) for l in out.stdout.splitlines())
        assert int(vals["frames"]) >= 5 and float(vals["ns_per_capture"]) > 0, (unwinder, vals)


def call_stacks(trace):
    """The distinct (event name, "Call stack") pairs of a trace: what two runs of one program share
    whatever their timing (the collapsed stacks leave out stacks that sum to under 1 us)."""
    return sorted({(e["name"], e["args"]["Call stack"]) for e in load(trace)["traceEvents"]
                   if "Call stack" in e.get("args", {})})


def stacks_run(env):
    """report_stacks with with_stack (env added): its stacks checked in the trace, the table and the
    collapsed files; returns (the run, its call_stacks)."""
    e = {"PROF_WITH_STACK": 1, "PROF_TABLE_GROUP_BY_STACK_N": 4, "PROF_MARKER": "nvtx:train_step",
         "PROF_WARMUP": 1, "PROF_ACTIVE": 2}
    e.update(env)
    r = run([prog("report_stacks")], env=e)
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    launches = [e for e in t["traceEvents"] if e.get("name") == "cudaLaunchKernel" and e.get("ph") == "X"]
    assert all("Call stack" in e["args"] for e in launches)
    assert len(launches) == 2 * 2 * 100   # 2 recorded steps x 2 launch() calls x LAUNCHES_PER_CALL
    for e in launches:
        assert frames_in_order(e["args"]["Call stack"], CHAIN), e["args"]["Call stack"]
        assert "libstepprof" not in e["args"]["Call stack"] and "sp_" not in e["args"]["Call stack"]
    syncs = [e for e in t["traceEvents"] if e.get("name") == "cudaStreamSynchronize" and e.get("ph") == "X"]
    assert all(frames_in_order(e["args"]["Call stack"], ["main", "train_step", "wait_for_gpu"]) for e in syncs)
    table = outputs(r, ".key_averages.txt")
    headers, rows = parse_table(table)
    assert headers[-1] == "Source Location"
    assert any(r_["Name"] == "cudaLaunchKernel" and r_["Source Location"].startswith("launch+") for r_ in rows)
    lines = table.split("\n")
    at = next(i for i, l in enumerate(lines) if "launch+" in l)
    assert [lines[at + k].split()[-2].split("+")[0] for k in range(4)] == ["launch", "forward", "train_step", "main"]
    collapsed = outputs(r, ".stacks.txt").splitlines()
    assert collapsed and all(re.fullmatch(r"\S+ \d+", l) for l in collapsed), collapsed
    leaf = [l for l in collapsed if l.split(" ")[0].endswith(";cudaLaunchKernel")]
    assert leaf and all(frames_in_order(l.split(" ")[0].rsplit(";", 1)[0], CHAIN) for l in leaf)
    assert not any("libstepprof" in l for l in collapsed)
    assert tool(r.trace(), "--group-by-stack-n", "4").stdout == table
    assert tool(r.trace(), "--stacks", "self_cpu_time_total").stdout == outputs(r, ".stacks.txt")
    cuda_files = glob.glob(os.path.join(r.outdir, "*.stacks_cuda.txt"))
    assert len(cuda_files) == 1, "the CUPTI stand-in gives the launches GPU time"
    with open(cuda_files[0]) as f:
        assert tool(r.trace(), "--stacks", "self_cuda_time_total").stdout == f.read()
    return r, call_stacks(r.trace())


def test_stacks_in_trace_table_and_collapsed_files():
    stacks_run({})


def test_stacks_by_glibc_backtrace_name_the_same_frames():
    """unwinder: glibc (glibc's backtrace(), the fallback where libunwind.so.8 is missing): the same
    checks, and the same stacks, frame for frame, as with libunwind."""
    _, want = stacks_run({"PROF_UNWINDER": "libunwind"})
    r, got = stacks_run({"PROF_UNWINDER": "glibc"})
    assert got == want
    assert not [l for l in r.sp_lines if "with_stack" in l], r.sp_lines


def test_without_libunwind_stacks_come_from_glibc():
    """A libunwind.so.8 that cannot be loaded (an empty file found first on LD_LIBRARY_PATH) stands for
    a machine without libunwind8: with_stack stays on, one info line says where native frames come from
    (a warning when unwinder: libunwind asked for it), and the stacks are libunwind's."""
    _, want = stacks_run({})
    d = tempfile.mkdtemp(prefix="sp-test-")
    open(os.path.join(d, "libunwind.so.8"), "w").close()
    line = ("stepprof: with_stack: cannot load unw_backtrace from libunwind.so.8 (" + d + "/libunwind.so.8: file "
            "too short); native frames come from glibc's backtrace() instead (slower: apt-get install libunwind8 "
            "for libunwind's)")
    # auto: an info line (log: quiet hides it); libunwind named: a warning (log: quiet shows it).
    for unwinder, log, said in (("auto", "info", [line]), ("auto", "quiet", []), ("libunwind", "quiet", [line])):
        r, got = stacks_run({"PROF_UNWINDER": unwinder, "PROF_LOG": log, "LD_LIBRARY_PATH": FAKE_DIR + ":" + d})
        assert got == want, unwinder
        assert [l for l in r.sp_lines if "with_stack" in l] == said, (unwinder, log, r.sp_lines)


def test_stacks_of_an_nvcc_program_name_its_own_functions():
    """nvcc programs export none of their functions; the executable's symbol
    table still names them (C++ demangled) in the collapsed stacks; glibc's backtrace() (unwinder:
    glibc) gives the same stacks as libunwind."""
    seen = {}
    for unwinder in ("libunwind", "glibc"):
        r = run([prog("train")], env={"STEPS": 2, "PROF_WITH_STACK": 1, "PROF_UNWINDER": unwinder})
        assert r.returncode == 0, r.stderr
        stacks = [f for f in r.files() if f.endswith(".stacks.txt")]
        assert len(stacks) == 1, r.files()
        lines = open(os.path.join(r.outdir, stacks[0])).read().splitlines()
        launches = [l for l in lines if l.rsplit(" ", 1)[0].endswith(";cudaLaunchKernel")]
        assert launches and all(";main+0x" in l for l in launches), launches[:3]
        assert any("model::forward_kernel" in l or "forward_kernel" in l for l in launches), launches[:3]
        assert not any(";train+0x" in l for l in lines), [l for l in lines if ";train+0x" in l][:3]
        seen[unwinder] = call_stacks(r.trace())
    assert seen["glibc"] == seen["libunwind"]


def test_collapsed_stacks_sum_identical_stacks_before_rounding():
    """Two 0.6 us calls with one stack are 1 us together: summing before the
    integer-microsecond rounding keeps short calls from vanishing."""
    src = json.load(open(os.path.join(ROOT, "tests", "golden", "small.pt.trace.json")))
    launches = [e for e in src["traceEvents"] if e.get("cat") == "cuda_runtime" and "Call stack" in e["args"]]
    stack = launches[0]["args"]["Call stack"]
    for e in launches:
        e["dur"] = 0.6
        e["args"]["Call stack"] = stack
    d = tempfile.mkdtemp(prefix="sp-test-")
    path = os.path.join(d, "short.pt.trace.json")
    with open(path, "w") as f:
        json.dump(src, f)
    lines = tool(path, "--stacks", "self_cpu_time_total").stdout.splitlines()
    by_name = {}
    for l in lines:
        by_name.setdefault(l.rsplit(";", 1)[1].split(" ")[0], []).append(int(l.rsplit(" ", 1)[1]))
    n = {name: sum(1 for e in launches if e["name"] == name) for name in {e["name"] for e in launches}}
    # each API name's calls share one stack now: one line each, floor(0.6 us x calls)
    assert {k: v for k, v in by_name.items() if k in n} == {k: [int(0.6 * c + 1e-9)] for k, c in n.items()}, lines
