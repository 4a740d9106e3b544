"""tests/test_scale.py — issue 10: real sizes. A window of a million events is recorded and exported
whole (every launch, range and allocation counted in the trace, the table and the summary; the trace
parses as JSON; nothing dropped, no .tmp left); a window of 25,000 distinct range names keeps every
name in the trace, and the summary ranks them (1000 in the JSON, 30 in the text, the rest counted); a long run of overlapping start/end ranges whose records are dropped gives their text back
(the deferred-text log stays small, every range stored or counted); and the unit tests of the structures behind it (interned strings, the JSON writer, the kernel
names looked up without a lock) run here.
Speed is measured by `make bench` (scripts/bench_export.py), never here.

The CUPTI stand-in is off in the million-event run: the GPU side of a window that size belongs to
`make bench`, and the host side is what has to come out whole here."""
import glob
import json
import os
import subprocess
from collections import Counter

from harness import BUILD, prog, run

SCHEDULE = {"PROF_MARKER": "nvtx:step", "PROF_WAIT": 0, "PROF_WARMUP": 1, "PROF_ACTIVE": 1, "PROF_REPEAT": 1,
            "PROF_FINALIZE_TIMEOUT_S": 600, "FAKECUDA_KERNEL_NS": 0}


def window(launches, distinct=None, **env):
    argv = [prog("export_bench"), str(launches)] + ([str(distinct)] if distinct else [])
    r = run(argv, env={**SCHEDULE, **env}, timeout=170)
    assert r.returncode == 0, r.stderr
    out = dict(line.split() for line in r.stdout.splitlines())
    assert int(out["launches"]) == launches
    files = r.files()
    assert not [f for f in files if ".tmp" in f], files
    with open(r.trace()) as f:
        trace = json.load(f)
    one = lambda suffix: glob.glob(os.path.join(r.outdir, "*" + suffix))[0]  # noqa: E731
    with open(one(".summary.json.txt")) as f:
        summary = json.load(f)
    with open(one(".key_averages.txt")) as f:
        table = f.read()
    with open(one(".summary.txt")) as f:
        window.summary_text = f.read()
    return int(out["ranges"]), trace, summary, table


def table_calls(table, name):
    rows = [l.split() for l in table.splitlines() if l.split()[:1] == [name]]
    assert len(rows) == 1, f"{name} rows: {rows}"
    return int(rows[0][-1])


def test_million_event_window_is_exported_whole():
    launches = 900000
    ranges, trace, summary, table = window(launches, PROF_CUPTI=0, PROF_BUFFER_MB=512)
    ev = trace["traceEvents"]
    calls = Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime")
    layers = Counter(e["name"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("layer_"))
    assert len(ev) > 1000000, len(ev)
    assert calls["cudaLaunchKernel"] == launches, calls
    assert calls["cudaMalloc"] == calls["cudaFree"] == launches // 1024, calls
    assert sum(layers.values()) == ranges == launches // 8 and len(layers) == 16, layers
    assert [e["name"] for e in ev if e["name"].startswith("ProfilerStep#")] == ["ProfilerStep#1"]
    assert trace["stepprof_dropped_events"] == 0 and trace["stepprof_truncated"] is False
    kernels = Counter(e["args"].get("kernel") for e in ev if e.get("name") == "cudaLaunchKernel")
    assert len(kernels) == 4096 and kernels["kernel_0000(float*, int)"] == -(-launches // 4096), kernels.most_common(2)
    assert table_calls(table, "cudaLaunchKernel") == launches
    assert summary["steps"][0]["launches"] == launches and summary["dropped_events"] == 0
    assert sum(r["count"] for r in summary["ranges"] if r["name"].startswith("layer_")) == ranges


def test_every_distinct_range_name_is_kept():
    launches, distinct = 200000, 25000
    ranges, trace, summary, table = window(launches, distinct, PROF_CUPTI=0)
    names = Counter(e["name"] for e in trace["traceEvents"]
                    if e.get("cat") == "user_annotation" and e["name"].startswith("range_"))
    assert len(names) == distinct and set(names.values()) == {1}, names.most_common(2)
    assert {"range_0", "range_%d" % (distinct - 1)} <= set(names)
    # The summary ranks ranges by CPU time: the JSON lists the first 1000 and counts the rest, the text
    # lists 30 and counts the rest; both add up to every range (the trace above holds each one).
    listed, rest = summary["ranges"], summary["ranges_not_listed"]
    totals = [r["total_us"] for r in listed]
    assert len(listed) == 1000 and totals == sorted(totals, reverse=True), totals[:5]
    names = {r["name"] for r in listed}
    assert len(names) == 1000 and len(listed) + rest["ranges"] == distinct + 1   # + the "step" range
    assert sum(r["count"] for r in listed) + rest["count"] == ranges + 1 == distinct + 1
    # The listed are the 1000 with the most CPU time, each with its trace total: per-name totals from
    # the trace's own ranges, ranked here (ties by value only: either of two equal totals may be listed).
    in_trace = Counter()
    for e in trace["traceEvents"]:
        if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#"):
            in_trace[e["name"]] += round(e["dur"] * 1000)
    assert len(in_trace) == distinct + 1
    assert all(round(r["total_us"] * 1000) == in_trace[r["name"]] for r in listed), listed[:3]
    ranked = sorted(in_trace.values(), reverse=True)
    assert [round(t * 1000) for t in totals] == ranked[:1000], (totals[:3], ranked[:3])
    assert round(rest["total_us"] * 1000) == sum(ranked[1000:]), (rest, sum(ranked[1000:]))
    text = window.summary_text
    section = text[text.index("NVTX ranges (CPU time"):].split("\n\n")[0].splitlines()
    rows, more = section[2:-1], section[-1]
    assert len(rows) == 30, section[:5]
    assert [row.split()[0] for row in rows] == [r["name"] for r in listed[:30]], rows[:3]
    assert more.startswith("  ... %d more ranges: count %d, total " % (
        distinct + 1 - 30, ranges + 1 - sum(r["count"] for r in listed[:30]))), more
    assert len(text) < 10000, len(text)


def test_dropped_overlapping_ranges_give_their_text_back():
    """A whole-run recording with a 1 MB pool: past its first ~12k records every NVTX range is
    dropped. 1.5M rounds of two overlapping start/end ranges with distinct 200-byte names: the text
    of a range ending while the other is open must come back to the log too (before, each round
    kept one name: the 256 MiB log filled and every later name was interned, 390 MB of RSS).
    Every range is stored or counted in stepprof_dropped_events, none twice."""
    r = run([prog("nvtx_overlap"), "1500000", "200"], env={"PROF_BUFFER_MB": 1, "PROF_CUPTI": 0,
                                                          "PROF_FINALIZE_TIMEOUT_S": 120}, timeout=170)
    assert r.returncode == 0, r.stderr
    out = dict(line.split() for line in r.stdout.splitlines() if " " in line)
    assert 0 < int(out["maxrss_kb"]) < 64 * 1024, out
    with open(r.trace()) as f:
        trace = json.load(f)
    stored = sum(1 for e in trace["traceEvents"] if e.get("cat") == "user_annotation" and e["name"][:1] in "ab")
    assert stored > 1000 and stored + trace["stepprof_dropped_events"] == int(out["ranges"]), \
        (stored, trace["stepprof_dropped_events"])


def test_unit_tests_of_the_export_structures():
    for name in ("test_strings", "test_jsonw", "test_kernels"):
        path = os.path.join(BUILD, "unit", name)
        assert os.path.exists(path), f"{path} not built (make unit)"
        p = subprocess.run([path], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and " 0 failed" in p.stdout, p.stdout + p.stderr
