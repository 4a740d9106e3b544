"""tests/test_reports.py — issue 5: the key-average table, step summary, collapsed stacks and
build/stepprof-report. Goldens come from hand-written traces in tests/golden/ run through the
offline tool (times there are fixed, so layout, sort orders, grouping, name cutting and unit
switching are checked byte for byte; SP_UPDATE_GOLDEN=1 rewrites them); a Python reference
recomputes the golden numbers independently. Live runs on the CPU stand-in check structure,
exact counts, that the tool reproduces the in-process files byte for byte, the findings each
small program is built to trigger. Call stacks: tests/test_stacks.py."""
import glob
import gzip
import json
import os
import re
import resource
import subprocess
import tempfile

from harness import BUILD, FAKE_DIR, ROOT, Skip, load, prog, run, skip_under_sanitizer

GOLDEN = os.path.join(ROOT, "tests", "golden")
TOOL = os.path.join(BUILD, "stepprof-report")
SMALL = os.path.join(GOLDEN, "small.pt.trace.json")
HOST_ONLY = os.path.join(GOLDEN, "host_only.pt.trace.json")


def tool(*args, check=True):
    if not os.path.exists(TOOL):
        raise Skip("build/stepprof-report was not built")
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, f"stepprof-report {args} exited {p.returncode}: {p.stderr}"
    return p


def golden(name, text):
    path = os.path.join(GOLDEN, name)
    if os.environ.get("SP_UPDATE_GOLDEN"):
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        want = f.read()
    assert text == want, f"{name} differs from the golden file:\n{text}"


# --------------------------------------------------------------------------------------------
# Table parsing

UNITS = {"us": 1e3, "ms": 1e6, "s": 1e9}


def ns(text):
    m = re.fullmatch(r"(-?[0-9.]+)(us|ms|s)", text)
    assert m, text
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_table(text):
    """(headers, rows) of a key-average table; each row a dict by header."""
    lines = text.split("\n")
    assert lines[0].startswith("-") and lines[2].startswith("-"), text
    headers = re.split(r"\s{2,}", lines[1].strip())
    rows = []
    for line in lines[3:]:
        if line.startswith("-"):
            break
        if not line.strip() or line.startswith(" " * 60):
            continue   # blank separator or continuation line of Source Location
        rows.append(dict(zip(headers, re.split(r"\s{2,}", line.strip()))))
    return headers, rows


def check_layout(text):
    """formats.md section 4: separators, two trailing spaces, footers."""
    lines = text.split("\n")
    assert lines[-1] == "", "the table ends with a newline"
    body = lines[:-1]
    sep = body[0]
    widths = [len(w) for w in sep.split("  ")[:-1]]
    assert sep == "".join("-" * w + "  " for w in widths), repr(sep)
    assert all(w == 12 for w in widths[1:len(widths) - ("Input Shapes" in body[1]) - ("Source Location" in body[1])])
    assert body[2] == sep
    footer_at = max(i for i, l in enumerate(body) if l == sep)
    for i, l in enumerate(body[:footer_at + 1]):
        # a header longer than its column (torch's "Self CUDA Mem" in 12) widens only the header line
        assert l.endswith("  ") and (len(l) == len(sep) or i == 1 and len(l) > len(sep)), repr(l)
    assert body[footer_at + 1].startswith("Self CPU time total: ")
    assert all(l.startswith("Self ") for l in body[footer_at + 1:])
    return widths


# --------------------------------------------------------------------------------------------
# Goldens: the offline tool on hand-written traces

GOLDEN_CASES = [
    ("small.table.txt", [SMALL]),
    ("small.all.txt", [SMALL, "--row-limit", "-1"]),
    ("small.cpu_total.txt", [SMALL, "--sort-by", "cpu_time_total", "--row-limit", "5"]),
    ("small.count.txt", [SMALL, "--sort-by", "count", "--row-limit", "-1"]),
    ("small.cuda_avg.txt", [SMALL, "--sort-by", "cuda_time", "--row-limit", "4"]),
    ("small.rows0.txt", [SMALL, "--row-limit", "0"]),
    ("small.shapes.txt", [SMALL, "--group-by-input-shape", "--row-limit", "-1"]),
    ("small.stack2.txt", [SMALL, "--group-by-stack-n", "2", "--row-limit", "-1"]),
    ("small.summary.txt", [SMALL, "--summary"]),
    ("small.summary.json", [SMALL, "--summary-json"]),
    ("small.stacks_cpu.txt", [SMALL, "--stacks", "self_cpu_time_total"]),
    ("small.stacks_cuda.txt", [SMALL, "--stacks", "self_cuda_time_total"]),
    ("host_only.table.txt", [HOST_ONLY]),
    ("host_only.summary.txt", [HOST_ONLY, "--summary"]),
]


def test_golden_outputs_byte_for_byte():
    for name, args in GOLDEN_CASES:
        golden(name, tool(*args).stdout)


def test_golden_tables_have_the_torch_layout():
    for name, args in GOLDEN_CASES:
        if name.endswith(".txt") and "summary" not in name and "stacks" not in name and "rows0" not in name:
            check_layout(tool(*args).stdout)
    text = tool(SMALL, "--row-limit", "0").stdout
    assert text.count("\n") == 6, "row_limit 0: separators, header and footers only"


def reference_rows(trace):
    """Key averages recomputed from the trace without the C code: nesting per thread by torch's
    rule, GPU time charged by correlation to the API call and everything enclosing it."""
    def q(v):
        return round(v * 1000)
    evs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    host = [e for e in evs if e["cat"] in ("cuda_runtime", "cuda_driver", "user_annotation")]
    gpu = [e for e in evs if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    parent, self_cpu, cuda = {}, {id(e): q(e["dur"]) for e in host}, {id(e): 0 for e in host}
    lanes = {}
    for e in host:
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    for lane in lanes.values():
        lane.sort(key=lambda e: (q(e["ts"]), -q(e["dur"])))
        stack = []
        for e in lane:
            start, end = q(e["ts"]), q(e["ts"]) + q(e["dur"])
            while stack and (start >= stack[-1][1] or end > stack[-1][1]):
                stack.pop()
            parent[id(e)] = stack[-1][0] if stack else None
            if stack:
                self_cpu[id(stack[-1][0])] -= q(e["dur"])
            stack.append((e, end))
    by_corr = {e["args"]["correlation"]: e for e in host if e["cat"] == "cuda_runtime"}
    for g in gpu:
        h = by_corr.get(g["args"].get("correlation"))
        while h is not None:
            cuda[id(h)] += q(g["dur"])
            h = parent[id(h)]
    rows = {}
    for e in host:
        name = "ProfilerStep*" if e["name"].startswith("ProfilerStep#") else e["name"]
        r = rows.setdefault(name, [0, 0, 0, 0, 0])
        r[0] += 1
        r[1] += self_cpu[id(e)]
        r[2] += q(e["dur"])
        r[4] += cuda[id(e)]
    for g in evs:
        if g["cat"] in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"):
            r = rows.setdefault(g["name"], [0, 0, 0, 0, 0])
            r[0] += 1
            r[3] += q(g["dur"]) if g["cat"] != "cuda_sync" else 0
            r[4] += q(g["dur"])
    return rows


def test_golden_numbers_match_an_independent_reference():
    ref = reference_rows(load(SMALL))
    _, rows = parse_table(tool(SMALL, "--row-limit", "-1").stdout)
    assert len(rows) == len(ref), (len(rows), sorted(ref))
    for r in rows:
        name = r["Name"]
        key = next(k for k in ref if k == name or (name.endswith("...") and k.startswith(name[:-3])))
        count, self_cpu, cpu_total, self_cuda, cuda_total = ref[key]
        assert int(r["# of Calls"]) == count, name
        for col, want in (("Self CPU", self_cpu), ("CPU total", cpu_total), ("Self CUDA", self_cuda),
                          ("CUDA total", cuda_total)):
            got = ns(r[col])
            assert abs(got - want) <= 0.0005 * UNITS[re.sub(r"[0-9.\-]", "", r[col])] + 1e-6, (name, col, got, want)


def synthetic_trace(path, names_durs, gpu=()):
    ev = [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": d}
          for i, (n, d) in enumerate(names_durs)]
    ev += [{"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": d,
            "args": {"correlation": 0}} for i, (n, d) in enumerate(gpu)]
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": ev}, f)
    return path


def test_name_cutting_and_unit_switching():
    d = tempfile.mkdtemp(prefix="sp-test-")
    n51, n52, n53 = "a" * 51, "b" * 52, "c" * 53
    path = synthetic_trace(os.path.join(d, "t.json"), [
        ("half", 0.5), ("below_ms", 999.999), ("one_ms", 1000), ("below_s", 999999.999), ("one_s", 1000000),
        (n51, 1), (n52, 1), (n53, 1)])
    text = tool(path, "--row-limit", "-1", "--sort-by", "count").stdout
    widths = check_layout(text)
    assert widths[0] == 55
    _, rows = parse_table(text)
    by = {r["Name"]: r for r in rows}
    assert by["half"]["CPU total"] == "0.500us"
    assert by["below_ms"]["CPU total"] == "999.999us"
    assert by["one_ms"]["CPU total"] == "1.000ms"
    assert by["below_s"]["CPU total"] == "1000.000ms"   # torch: < 1e6 us stays in ms
    assert by["one_s"]["CPU total"] == "1.000s"
    assert n51 in by, "51 characters fit"
    assert "b" * 52 + "..." in by and "c" * 52 + "..." in by, "52 or more are cut to 52 + '...' (torch)"
    short = tool(synthetic_trace(os.path.join(d, "s.json"), [("ab", 1), ("abcdef", 2)])).stdout
    assert check_layout(short)[0] == 10, "name column = longest + 4"


CAT_ORDER = ["cuda_runtime", "cuda_driver", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"]


def first_occurrence(trace):
    """Row name -> position of its first event in the canonical order (start, longer first, kind...)."""
    first = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in CAT_ORDER:
            continue
        name = "ProfilerStep*" if e["name"].startswith("ProfilerStep#") else e["name"]
        key = (round(e["ts"] * 1000), -round(e["dur"] * 1000), CAT_ORDER.index(e["cat"]), e["pid"], e["tid"], e["name"])
        first[name] = min(first.get(name, key), key)
    return first


def test_sort_orders_are_descending_and_stable():
    cols = {"cpu_time": "CPU time avg", "cuda_time": "CUDA time avg", "cpu_time_total": "CPU total",
            "cuda_time_total": "CUDA total", "self_cpu_time_total": "Self CPU",
            "self_cuda_time_total": "Self CUDA", "count": "# of Calls"}
    first = first_occurrence(load(SMALL))
    for key, col in cols.items():
        _, rows = parse_table(tool(SMALL, "--row-limit", "-1", "--sort-by", key).stdout)
        vals = [float(r[col]) if col == "# of Calls" else ns(r[col]) for r in rows]
        assert vals == sorted(vals, reverse=True), (key, vals)
        for a, b in zip(rows, rows[1:]):   # equal values keep first-occurrence order
            if a[col] == b[col] and not a["Name"].endswith("...") and not b["Name"].endswith("..."):
                assert first[a["Name"]] < first[b["Name"]], (key, a["Name"], b["Name"])


def test_default_sort_is_self_cuda_with_gpu_time_else_self_cpu():
    assert tool(SMALL).stdout == tool(SMALL, "--sort-by", "self_cuda_time_total").stdout
    assert tool(HOST_ONLY).stdout == tool(HOST_ONLY, "--sort-by", "self_cpu_time_total").stdout
    h, _ = parse_table(tool(HOST_ONLY).stdout)
    assert "Self CUDA" not in h and "Self CUDA time total" not in tool(HOST_ONLY).stdout


def test_gz_and_plain_trace_give_the_same_output():
    d = tempfile.mkdtemp(prefix="sp-test-")
    gz = os.path.join(d, "small.pt.trace.json.gz")
    with open(SMALL, "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    assert tool(gz, "--row-limit", "-1").stdout == tool(SMALL, "--row-limit", "-1").stdout


def test_bad_inputs_give_a_clear_error_and_nonzero_exit():
    d = tempfile.mkdtemp(prefix="sp-test-")
    with open(SMALL) as f:
        text = f.read()
    cases = {
        "missing.json": (None, "cannot open"),
        "empty.json": ("", "empty file"),
        "truncated.json": (text[: len(text) // 2], "truncated"),
        "object.json": ('{"foo": 1}', "not a Chrome trace"),
        "array.json": ("[1, 2]", "not a Chrome trace"),
        "garbage.json": ('{"traceEvents": [{"ph": "X",, }]}', "invalid JSON"),
        "events_not_array.json": ('{"traceEvents": 5}', "not an array"),
    }
    for name, (content, msg) in cases.items():
        path = os.path.join(d, name)
        if content is not None:
            with open(path, "w") as f:
                f.write(content)
        p = tool(path, check=False)
        assert p.returncode == 1 and p.stdout == "", (name, p.returncode, p.stdout)
        assert p.stderr.startswith(f"stepprof-report: {path}: ") and msg in p.stderr, (name, p.stderr)
    gz = os.path.join(d, "cut.json.gz")
    with open(gz, "wb") as f:
        data = gzip.compress(text.encode())
        f.write(data[: len(data) // 2])
    p = tool(gz, check=False)
    assert p.returncode == 1 and "stepprof-report:" in p.stderr, p.stderr
    for args in (["--sort-by", "bogus", SMALL], ["--row-limit", "x", SMALL], [], [SMALL, SMALL],
                 ["--stacks", "cpu", SMALL], ["--frobnicate", SMALL]):
        p = tool(*args, check=False)
        assert p.returncode == 2 and "usage:" in p.stderr, (args, p.stderr)


def test_large_trace_is_streamed():
    """~100 MB of events: memory stays far below a DOM of the file."""
    skip_under_sanitizer("ASan's shadow memory and quarantine multiply resident memory")
    if not os.path.exists(TOOL):  # before writing 100 MB
        raise Skip("build/stepprof-report was not built")
    d = tempfile.mkdtemp(prefix="sp-test-")
    path = os.path.join(d, "big.pt.trace.json")
    line = ('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d.%03d, '
            '"dur": 1.500, "args": {"cbid": 211, "correlation": %d, "result": 0, "kernel": "k", '
            '"grid": [1, 1, 1], "block": [1, 1, 1], "shared memory": 0, "stream": 0}},\n')
    n = 420000
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        f.writelines(line % (2 * i, 0, i + 1) for i in range(n))
        f.write('{"ph": "X", "cat": "user_annotation", "name": "all", "pid": 1, "tid": 1, "ts": 0, "dur": %d}\n'
                ']}\n' % (2 * n))
    try:
        assert os.path.getsize(path) > 100e6
        # The tool runs under a 256 MiB address-space limit: it needs ~70 MiB (VmPeak); a DOM of the
        # file does not fit (Python's json module: MemoryError). Not its peak RSS from wait4: a child
        # started by vfork or fork keeps the test process's own high-water mark across exec (866 MiB
        # in a full run), whatever it uses itself.
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (256 << 20, 256 << 20))
        p = subprocess.run([TOOL, path], capture_output=True, text=True, timeout=300, preexec_fn=limit)
        assert p.returncode == 0, (p.returncode, p.stderr[-500:])
        _, rows = parse_table(p.stdout)
    finally:
        os.remove(path)
    assert {r["Name"]: int(r["# of Calls"]) for r in rows} == {"cudaLaunchKernel": n, "all": 1}


# --------------------------------------------------------------------------------------------
# Live runs on the stand-in

def outputs(r, suffix):
    found = glob.glob(os.path.join(r.outdir, "*" + suffix))
    assert len(found) == 1, (suffix, r.files(), r.stderr)
    with open(found[0]) as f:
        return f.read()


TRAIN_ENV = {"STEPS": 8, "PROF_MARKER": "nvtx:train_step", "PROF_WARMUP": 1, "PROF_ACTIVE": 3}


def test_live_table_counts_totals_and_offline_equality():
    r = run([prog("train_c")], env={**TRAIN_ENV, "PROF_TABLE_ROW_LIMIT": -1})
    assert r.returncode == 0, r.stderr
    text = outputs(r, ".key_averages.txt")
    check_layout(text)
    headers, rows = parse_table(text)
    calls = {r_["Name"]: int(r_["# of Calls"]) for r_ in rows}
    assert calls["ProfilerStep*"] == 3 and calls["train_step"] == 3 and calls["forward"] == 3
    assert calls["cudaLaunchKernel"] == 12 and calls["cudaMemcpyAsync"] == 6 and calls["cudaMemcpy"] == 3
    assert calls["cudaStreamSynchronize"] == 3 and calls["cudaMemset"] == 3
    total = sum(float(r_["Self CPU %"].rstrip("%")) for r_ in rows)
    assert abs(total - 100.0) <= 0.01 * len(rows), total
    if "Self CUDA %" in headers:
        gpu = [r_ for r_ in rows if r_["Self CUDA"] != "0.000us"]
        assert abs(sum(float(r_["Self CUDA %"].rstrip("%")) for r_ in gpu) - 100.0) <= 0.01 * len(gpu)
    assert tool(r.trace(), "--row-limit", "-1").stdout == text, "the tool reproduces the in-process table"
    assert tool(r.trace(), "--summary").stdout == outputs(r, ".summary.txt")
    assert tool(r.trace(), "--summary-json").stdout == outputs(r, ".summary.json.txt")


def test_live_table_options_from_the_environment():
    env = {**TRAIN_ENV, "PROF_TABLE_SORT_BY": "count", "PROF_TABLE_ROW_LIMIT": 3,
           "PROF_TABLE_GROUP_BY_INPUT_SHAPE": "true", "PROF_USE_GZIP": "1"}
    r = run([prog("train_c")], env=env)
    text = outputs(r, ".key_averages.txt")
    headers, rows = parse_table(text)
    assert headers[-1] == "Input Shapes" and len(rows) == 3
    counts = [int(r_["# of Calls"]) for r_ in rows]
    assert counts == sorted(counts, reverse=True) and counts[0] == 3, counts
    assert text == tool(r.trace(), "--sort-by", "count", "--row-limit", "3", "--group-by-input-shape").stdout


def test_live_memory_columns_match_the_trace():
    r = run([prog("train_c")], env={"STEPS": 3, "PROF_PROFILE_MEMORY": 1, "PROF_TABLE_ROW_LIMIT": -1})
    assert r.returncode == 0, r.stderr
    assert any(e.get("name") == "[memory]" for e in load(r.trace())["traceEvents"])
    text = outputs(r, ".key_averages.txt")
    headers, rows = parse_table(text)
    assert "Self CUDA Mem" in headers, headers
    malloc = next(r_ for r_ in rows if r_["Name"] == "cudaMalloc")
    assert malloc["Self CUDA Mem"] != "0 B", malloc
    assert tool(r.trace(), "--row-limit", "-1").stdout == text


def test_table_print_destinations():
    for where, in_file, on_stderr in (("stderr", False, True), ("both", True, True), ("none", False, False),
                                      ("file", True, False)):
        r = run([prog("train_c")], env={**TRAIN_ENV, "PROF_TABLE_PRINT": where})
        assert r.returncode == 0, r.stderr
        has_file = bool(glob.glob(os.path.join(r.outdir, "*.key_averages.txt")))
        assert has_file == in_file, (where, r.files())
        assert ("stepprof: key averages of cycle 0" in r.stderr) == on_stderr, (where, r.stderr)
        if on_stderr:
            assert "Self CPU time total:" in r.other_stderr
        assert glob.glob(os.path.join(r.outdir, "*.summary.json.txt")), "the summary is written regardless"


def test_live_summary_lists_the_recorded_steps():
    r = run([prog("train_c")], env=TRAIN_ENV)
    s = json.loads(outputs(r, ".summary.json.txt"))
    assert [st["step"] for st in s["steps"]] == [1, 2, 3]
    assert all(st["launches"] == 4 and st["host_sync_calls"] == 1 for st in s["steps"])
    ranges = {x["name"]: x["count"] for x in s["ranges"]}
    assert ranges == {"train_step": 3, "forward": 3, "backward": 3, "optimizer": 3}
    stem = os.path.basename(r.trace()).split(".pt.trace.json")[0]
    assert sorted(f for f in r.files() if not f.endswith(".pt.trace.json")) == sorted(
        stem + s_ for s_ in (".key_averages.txt", ".summary.json.txt", ".summary.txt"))


# Findings: each program fires exactly its rule. Host-visible rules run with CUPTI hidden (the
# GPU rules are then not evaluated); GPU rules run on the CUPTI stand-in.

def no_cupti_dir():
    d = tempfile.mkdtemp(prefix="sp-nocupti-")
    os.symlink(os.path.join(FAKE_DIR, "libcudart.so.13"), os.path.join(d, "libcudart.so.13"))
    return d


FINDINGS = [
    # mode, with CUPTI, extra env, expected findings
    ("good", False, {}, []),
    ("sync", False, {}, ["sync_per_step"]),
    ("d2h", False, {}, ["blocking_d2h"]),
    ("variance", False, {}, ["step_variance"]),
    ("flood", False, {"PROF_BUFFER_MB": 1}, ["dropped_events"]),
    ("good", True, {"FAKECUDA_KERNEL_NS": 2000000}, []),
    ("pageable", True, {"FAKECUDA_KERNEL_NS": 2000000}, ["pageable_copy"]),
    ("idle", True, {"FAKECUDA_KERNEL_NS": 100000}, ["gpu_idle"]),
    ("tiny", True, {"FAKECUDA_KERNEL_NS": 5000}, ["short_kernels"]),
]


def findings_of(mode, cupti, env):
    e = {"PROF_MARKER": "nvtx:step", "PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 5,
         "FAKECUDA_KERNEL_NS": 2000000, **env}
    if not cupti:
        e["LD_LIBRARY_PATH"] = no_cupti_dir()
    r = run([prog("report_findings"), mode, "8"], env=e)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    s = json.loads(outputs(r, ".summary.json.txt"))
    return s, [f["id"] for f in s["findings"]]


def test_findings_each_program_fires_exactly_its_rule():
    for mode, cupti, env, want in FINDINGS:
        for attempt in range(3):
            s, got = findings_of(mode, cupti, env)
            # A loaded test machine can stall one step; step_variance is then right, but not this test's point.
            if got == want or "step_variance" in want or sorted(set(got) - {"step_variance"}) != want:
                break
        assert got == want, (mode, cupti, got, s["findings"])
        assert s["gpu_data"] == cupti, (mode, s["gpu_data"])
        if not cupti:
            # flood: the buffer is full when the ProfilerStep records come, so the window has no steps
            skipped = ["gpu_idle", "short_kernels", "pageable_copy", "dominant_kernel"] + (
                ["sync_per_step", "blocking_d2h", "step_variance"] if mode == "flood" else [])
            assert s["rules_not_evaluated"] == skipped, (mode, s["rules_not_evaluated"])
            assert "cannot be known" in s["cannot_know"][0], mode
        for f in s["findings"]:
            assert f["evidence"] and f["recommendation"] and f["values"], (mode, f)


def test_gpu_only_findings_from_hand_written_traces():
    s = json.loads(tool(SMALL, "--summary-json").stdout)
    assert [f["id"] for f in s["findings"]] == ["gpu_idle", "pageable_copy", "sync_per_step", "blocking_d2h",
                                                "dominant_kernel"]
    dom = next(f for f in s["findings"] if f["id"] == "dominant_kernel")
    assert dom["values"]["calls"] == 4 and dom["values"]["share_pct"] > 99
    d = tempfile.mkdtemp(prefix="sp-test-")
    steps = []
    for k in range(4):   # 1 ms steps launching 60 kernels of 4 us: short kernels, and a mostly idle GPU
        steps.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1,
                      "ts": 1000.0 * k, "dur": 1000.0})
        for j in range(60):
            c = 1000 * k + j + 1
            steps.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                          "ts": 1000.0 * k + 1 + j, "dur": 0.5,
                          "args": {"correlation": c, "grid": [1, 1, 1], "block": [32, 1, 1]}})
            steps.append({"ph": "X", "cat": "kernel", "name": ["k_a", "k_b", "k_c"][j % 3], "pid": 0, "tid": 7,
                          "ts": 1000.0 * k + 2 + 16 * j, "dur": 4.0, "args": {"correlation": c}})
    path = os.path.join(d, "tiny.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": steps, "stepprof_dropped_events": 7}, f)
    s = json.loads(tool(path, "--summary-json").stdout)
    assert [f["id"] for f in s["findings"]] == ["gpu_idle", "short_kernels", "dropped_events"], s["findings"]
    assert s["dropped_events"] == 7


def test_thread_ids_past_32_bits_keep_their_own_lanes():
    """Events keep 32-bit pids and tids: an id past 32 bits (another OS's thread ids, a name such as
    "stream 7") is hashed away from the small ones, never cut to them. tid 2^32 + 1 cut to 32 bits
    would be tid 1, nesting `inner` under `outer` (outer's Self CPU 400 us instead of 500)."""
    d = tempfile.mkdtemp(prefix="sp-test-")
    ev = [{"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 10.0, "dur": 500.0},
          {"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 1, "tid": 2 ** 32 + 1, "ts": 20.0, "dur": 100.0},
          {"ph": "X", "cat": "user_annotation", "name": "named", "pid": 1, "tid": "thread 1", "ts": 30.0, "dur": 50.0}]
    path = os.path.join(d, "lanes.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": ev}, f)
    _, rows = parse_table(tool(path).stdout)
    self_cpu = {r["Name"]: ns(r["Self CPU"]) for r in rows}
    assert self_cpu == {"outer": 500e3, "inner": 100e3, "named": 50e3}, self_cpu


def test_gpu_busy_counts_a_negative_duration_as_written():
    """A hand-written trace may hold a negative duration; the busy union adds its length as it did
    when it sorted spans (-50 + 30 us), the summary computed per (step, device) in start order."""
    d = tempfile.mkdtemp(prefix="sp-test-")
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.0}]
    for c, (ts, dur) in enumerate([(100.0, -50.0), (200.0, 30.0)], 1):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts - 50,
                   "dur": 1.0, "args": {"correlation": c}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k%d" % c, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                   "args": {"correlation": c}})
    path = os.path.join(d, "neg.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": ev}, f)
    s = json.loads(tool(path, "--summary-json").stdout)
    assert s["steps"][0]["gpu_busy_us"] == -20.0, s["steps"][0]


# --------------------------------------------------------------------------------------------
# Call stacks
