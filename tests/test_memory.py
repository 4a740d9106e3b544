"""tests/test_memory.py — issue 6: profile_memory on real processes on the CUDA stand-in. Programs with
a known allocation pattern (tests/programs/mem_*.c) must give exactly the expected trace events,
counter values, per-step figures, leak list and out-of-memory report, and the HTML page must render in
headless Chromium with the expected points, step markers and peak."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import zlib

from harness import BUILD, PROGS, Skip, call_result, load, run
from check_trace import check

KB, MB = 1 << 10, 1 << 20
W, PINNED, A, B, C, X, STEP_PINNED, HIDDEN = MB, 64 * KB, 256 * KB, 512 * KB, 128 * KB, 4096, 8 * KB, 64 * KB
LEAKS = [100000, 200000, 350000]
SCHEDULE = {"PROF_PROFILE_MEMORY": 1, "PROF_MARKER": "nvtx:step", "PROF_WARMUP": 1, "PROF_ACTIVE": 3, "STEPS": 5}


def mem_prog(name):
    path = os.path.join(PROGS, name)
    if not os.path.exists(path):
        raise Skip(f"{name} was not built (the Makefile must include tests/programs/memory.mk)")
    return path


def fmt_bytes(v):
    """formats.md section 4's memory format, as the report prints it."""
    for i, unit in enumerate(("GB", "MB", "KB")):
        scale = 1 << (10 * (3 - i))
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v} B"


def device_ops(hidden):
    """(Bytes, Total Allocated) of GPU 0's [memory] events in steps 1-3 of mem_pattern."""
    ops, level = [], W

    def op(delta):
        nonlocal level
        level += delta
        ops.append((delta, level))

    for step in (1, 2, 3):
        op(A), op(B), op(C), op(-B)
        if step == 1 and hidden:
            op(HIDDEN), op(-HIDDEN)
        if step == 2:
            for n in LEAKS:
                op(n)
        op(-C), op(-A)
        if step == 3:
            op(X), op(-X)
    return ops


def memory_events(trace, name="[memory]"):
    return [e for e in trace["traceEvents"] if e.get("ph") == "i" and e.get("name") == name]


def counters(trace, name):
    return [e["args"]["bytes"] for e in trace["traceEvents"] if e.get("ph") == "C" and e.get("name") == name]


def assert_valid_trace(path):
    problems = check(path)
    assert not problems, "\n  ".join(problems[:20])


def stem_file(r, suffix):
    found = [f for f in r.files() if f.endswith(suffix)]
    assert len(found) == 1, (suffix, r.files(), r.stderr)
    return os.path.join(r.outdir, found[0])


def section(text, title):
    """The lines of the report section whose header starts with `== title`."""
    m = re.search(r"^== " + re.escape(title) + r".*?$(.*?)(?=^== |\Z)", text, re.S | re.M)
    assert m, f"no section {title!r} in:\n{text}"
    return m.group(0)


def row(text, *first_cells):
    """The whitespace-split cells of the one line whose leading cells are first_cells."""
    hits = [l.split() for l in text.splitlines() if l.split()[:len(first_cells)] == list(first_cells)]
    assert len(hits) == 1, (first_cells, hits, text)
    return hits[0]


def test_known_pattern_trace_counters_steps_and_leaks():
    r = run([mem_prog("mem_pattern")], env=SCHEDULE)
    assert r.returncode == 0, r.stderr
    assert "free of an unknown pointer returned 1" in r.stdout and "double free returned 1" in r.stdout
    assert "cudaFree(NULL) returned 0" in r.stdout and r.stdout.rstrip().endswith("done")
    path = r.trace()
    assert_valid_trace(path)
    t = load(path)
    assert t.get("profile_memory") == 1
    # No runtime interposer sees the dlsym'd cudaMalloc; the runtime reaches the driver through
    # cuGetProcAddress (as NVIDIA's does), where stepprof's cuMemAlloc_v2 records it.
    hidden = t.get("stepprof_gpu_source") == "cupti"

    gpu = [e for e in memory_events(t) if e["args"]["Device Type"] == 1]
    got = [(e["args"]["Bytes"], e["args"]["Total Allocated"]) for e in gpu]
    assert got == device_ops(hidden), got
    for e in gpu:
        a = e["args"]
        assert list(a) == ["Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved"]
        assert a["Device Id"] == 0 and a["Total Reserved"] == a["Total Allocated"] and a["Addr"] > 0
    frees = {e["args"]["Addr"] for e in gpu if e["args"]["Bytes"] < 0}
    assert 0x1234 not in frees, "a free of an unknown pointer moves no bytes"
    host = [(e["args"]["Device Id"], e["args"]["Bytes"], e["args"]["Total Allocated"])
            for e in memory_events(t) if e["args"]["Device Type"] == 0]
    assert host == [(-1, STEP_PINNED, PINNED + STEP_PINNED), (-1, -STEP_PINNED, PINNED)], host
    assert not memory_events(t, "[OutOfMemory]")

    levels = [total for _, total in device_ops(hidden)]
    assert counters(t, "GPU 0 memory allocated") == [W] + levels + [levels[-1]]
    assert counters(t, "pinned host memory allocated") == [PINNED, PINNED + STEP_PINNED, PINNED, PINNED]

    text = open(stem_file(r, ".memory.txt")).read()
    peak = W + sum(LEAKS) + A + B + C
    cells = row(section(text, "Peak per device"), "GPU", "0")
    assert cells[2:6] == fmt_bytes(W).split() + fmt_bytes(peak).split(), cells
    assert cells[8] == "3" and cells[9:11] == fmt_bytes(W + sum(LEAKS)).split(), cells
    assert " ".join(cells[-3:]) == "step > alloc_phase", cells
    steps = section(text, "Per step")
    expect = {1: (W, W + A + B + C, W), 2: (W, W + A + C + sum(LEAKS), W + sum(LEAKS)),
              3: (W + sum(LEAKS), peak, W + sum(LEAKS))}
    for s, (start, top, end) in expect.items():
        cells = row(steps, str(s), "GPU", "0")
        want = [fmt_bytes(v) for v in (start, top, end, end - start)]
        assert " ".join(cells[3:11]) == " ".join(want), (s, cells, want)
        allocs = {1: 4 if hidden else 3, 2: 6, 3: 4}[s]
        assert cells[11:13] == [str(allocs), str(allocs if s != 2 else 3)], cells

    leaks = section(text, "Leaks")
    assert f"3 blocks, {fmt_bytes(sum(LEAKS))}" in leaks.splitlines()[0], leaks
    groups = [l.split() for l in leaks.splitlines()[2:] if l.strip() and not l.startswith("      ")]
    assert [(g[0] + " " + g[1], g[2], g[3].split("+")[0]) for g in groups] == [
        (fmt_bytes(350000), "1", "leak_b"), (fmt_bytes(300000), "2", "leak_a")], groups
    assert sum(" step 2 " in l for l in leaks.splitlines()) == 3
    bad = section(text, "Frees of blocks")
    assert re.search(r"unknown +cudaFree\(0x1234\) .* step 3, returned 1", bad), bad
    assert re.search(r"double free +cudaFree\(0x[0-9a-f]+\) .* step 3, returned 1", bad), bad
    assert "not known: the process went on" in section(text, "Alive at exit")
    if hidden:
        # ... so CUPTI's records of the hidden calls match stepprof's driver events: none is added.
        assert re.search(r"CUPTI: \d+ records matched intercepted calls, 0 added", text), text.splitlines()[:4]
        drv = [(e["name"], e["args"].get("bytes")) for e in t["traceEvents"]
               if e.get("cat") == "cuda_driver" and e.get("ph") == "X" and e["args"].get("stepprof_source") != "cupti"]
        assert drv == [("cuMemAlloc_v2", HIDDEN), ("cuMemFree_v2", HIDDEN)], drv


def test_two_cycles_after_warmup_steps_count_each_call_once():
    # The warmup steps' CUPTI records reach stepprof only when the next window closes: they must be
    # neither counted nor matched to that window's calls.
    r = run([mem_prog("mem_pattern")], env={**SCHEDULE, "PROF_WAIT": 1, "PROF_REPEAT": 2, "PROF_ACTIVE": 2,
                                            "STEPS": 10})
    assert r.returncode == 0, r.stderr
    traces = r.traces()
    assert len(traces) == 2, traces
    L = sum(LEAKS)
    want = [{2: (W, W + A + C + L, W + L), 3: (W + L, W + L + A + B + C, W + L)},
            {6: (W + L, W + L + A + B + C, W + L), 7: (W + L, W + L + A + B + C, W + L)}]
    reports = sorted(f for f in r.files() if f.endswith(".memory.txt"))
    for path, report, expect in zip(traces, reports, want):
        t = load(path)
        gpu = [e["args"] for e in memory_events(t) if e["args"]["Device Type"] == 1]
        start = counters(t, "GPU 0 memory allocated")[0]
        for a in gpu:
            assert a["Total Allocated"] == start + a["Bytes"], (path, a, start)
            start = a["Total Allocated"]
        text = open(os.path.join(r.outdir, report)).read()
        for s, (lo, top, end) in expect.items():
            cells = row(section(text, "Per step"), str(s), "GPU", "0")
            assert " ".join(cells[3:9]) == " ".join(fmt_bytes(v) for v in (lo, top, end)), (s, cells)
        if t.get("stepprof_gpu_source") == "cupti":
            assert re.search(r"CUPTI: \d+ records matched intercepted calls, 0 added", text), text[:300]


def test_whole_run_lists_leaks_and_blocks_alive_at_exit():
    r = run([mem_prog("mem_pattern")], env={"PROF_PROFILE_MEMORY": 1, "STEPS": 4})
    assert r.returncode == 0, r.stderr
    text = open(stem_file(r, ".memory.txt")).read()
    assert "no steps" in section(text, "Per step")
    total = fmt_bytes(sum(LEAKS))
    assert f"3 blocks, {total}" in section(text, "Leaks").splitlines()[0]
    alive = section(text, "Alive at exit")
    assert f"3 blocks, {total}" in alive.splitlines()[0], alive
    sizes = [" ".join(l.split()[1:3]) for l in alive.splitlines()[1:] if l.strip()]
    assert sizes == [fmt_bytes(n) for n in sorted(LEAKS, reverse=True)], sizes


def test_memory_outputs_only_with_profile_memory():
    r = run([mem_prog("mem_pattern")], env={k: v for k, v in SCHEDULE.items() if k != "PROF_PROFILE_MEMORY"})
    assert r.returncode == 0, r.stderr
    t = load(r.trace())
    assert "profile_memory" not in t
    assert not memory_events(t) and not [e for e in t["traceEvents"] if e.get("ph") == "C"]
    assert not [f for f in r.files() if ".memory." in f], r.files()
    frees = [e for e in t["traceEvents"] if e.get("name") == "cudaFree" and e.get("ph") == "X"]
    assert frees and all(call_result(e) in (0, 1) for e in frees)


def test_real_runtime_without_driver_every_call_fails_program_finishes():
    r = run([mem_prog("mem_pattern")], fake=False, env={"PROF_PROFILE_MEMORY": 1, "STEPS": 3})
    assert r.returncode == 0 and r.stdout.rstrip().endswith("done"), r.stderr
    t = load(r.trace())
    assert not memory_events(t) and not memory_events(t, "[OutOfMemory]")
    assert "0 blocks, 0 B" in section(open(stem_file(r, ".memory.txt")).read(), "Leaks")


def test_out_of_memory_report_and_program_recovers():
    r = run([mem_prog("mem_oom")], env={"PROF_PROFILE_MEMORY": 1, "FAKECUDA_MEM_LIMIT": 8 * MB})
    assert r.returncode == 0, r.stderr
    assert "out of memory: cudaMalloc of 4194304 bytes returned 2" in r.stdout
    assert "recovered with 524288 bytes" in r.stdout and r.stdout.rstrip().endswith("done"), r.stdout
    assert any("out of memory: cudaMalloc of 4194304 bytes on GPU 0 failed with 7340032 bytes live in 4 blocks"
               in l for l in r.sp_lines), r.sp_lines
    path = r.trace()
    assert_valid_trace(path)
    t = load(path)
    oom = memory_events(t, "[OutOfMemory]")
    assert [e["args"] for e in oom] == [{"Device Type": 1, "Device Id": 0, "Bytes": 4 * MB,
                                          "Total Allocated": 7 * MB, "Total Reserved": 7 * MB}], oom
    assert counters(t, "GPU 0 memory allocated") == [0, 3 * MB, 5 * MB, 6 * MB, 7 * MB, 4 * MB, 4 * MB + MB // 2,
                                                     4 * MB, 2 * MB, MB, 0, 0]
    text = open(stem_file(r, ".memory.txt")).read()
    report = section(text, "Out of memory")
    assert "cudaMalloc of 4.00 MB on GPU 0 failed (returned 2)" in report, report
    assert "live at that moment: 7.00 MB in 4 blocks, largest first:" in report, report
    listed = [" ".join(l.split()[1:3]) for l in report.splitlines() if l.startswith("      0x")]
    assert listed == ["3.00 MB", "2.00 MB", "1.00 MB", "1.00 MB"], listed
    assert row(section(text, "Peak per device"), "GPU", "0")[-2] == "1"   # the failed column


def test_driver_api_allocations_and_virtual_memory():
    r = run([mem_prog("mem_driver")], env={"PROF_PROFILE_MEMORY": 1})
    assert r.returncode == 0, r.stderr
    assert "cuMemAlloc_v2(&d3, 100 * MIB) 2" in r.stdout and "cuMemFree_v2(d1) 1" in r.stdout
    t = load(r.trace())
    got = [(e["args"]["Bytes"], e["args"]["Total Allocated"]) for e in memory_events(t)]
    assert got == [(MB, MB), (2 * MB, 3 * MB), (4 * MB, 7 * MB), (-4 * MB, 3 * MB), (-2 * MB, MB), (-MB, 0)], got
    oom = memory_events(t, "[OutOfMemory]")
    assert [(e["args"]["Bytes"], e["args"]["Total Allocated"]) for e in oom] == [(100 * MB, 7 * MB)]
    assert counters(t, "GPU 0 memory allocated") == [0, MB, 3 * MB, 7 * MB, 3 * MB, MB, 0, 0]
    text = open(stem_file(r, ".memory.txt")).read()
    assert re.search(r"double free +cuMemFree_v2\(0x200000000\)", section(text, "Frees of blocks"))
    listed = [l.split() for l in section(text, "Out of memory").splitlines() if l.startswith("      0x")]
    assert [(l[1] + " " + l[2], l[5]) for l in listed] == [
        ("4.00 MB", "cuMemCreate"), ("2.00 MB", "cuMemAllocAsync"), ("1.00 MB", "cuMemAlloc_v2")], listed


def test_devices_follow_each_threads_cudaSetDevice():
    r = run([mem_prog("mem_devices")], env={"PROF_PROFILE_MEMORY": 1, "FAKECUDA_DEVICES": 2})
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    t = load(r.trace())
    got = [(e["args"]["Device Id"], e["args"]["Bytes"], e["args"]["Total Allocated"]) for e in memory_events(t)]
    assert got == [(0, MB, MB), (1, 2 * MB, 2 * MB), (1, 4 * MB, 6 * MB), (1, -4 * MB, 2 * MB), (1, 3 * MB, 5 * MB),
                   (1, -3 * MB, 2 * MB), (1, -2 * MB, 0), (0, -MB, 0)], got
    main_tid = {e["tid"] for e in memory_events(t) if e["args"]["Bytes"] in (MB, 2 * MB, 3 * MB)}
    other_tid = {e["tid"] for e in memory_events(t) if abs(e["args"]["Bytes"]) == 4 * MB}
    assert len(main_tid) == 1 and len(other_tid) == 1 and main_tid != other_tid
    assert counters(t, "GPU 0 memory allocated") == [0, MB, 0, 0]
    assert counters(t, "GPU 1 memory allocated") == [0, 2 * MB, 6 * MB, 2 * MB, 5 * MB, 2 * MB, 0, 0]
    peaks = section(open(stem_file(r, ".memory.txt")).read(), "Peak per device")
    assert row(peaks, "GPU", "1")[4:6] == ["6.00", "MB"]


# ---- the HTML page in headless Chromium ----

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise Skip("chromium is not installed (Debian package: chromium)")


def chromium_run(args, url):
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={tempfile.mkdtemp(prefix='sp-chromium-')}"]
    return subprocess.run(base + args + [url], capture_output=True, text=True, timeout=120)


def png_pixels(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = body
        elif kind == b"IDAT":
            idat += body
    w, h, depth, ctype, interlace = (int.from_bytes(head[0:4], "big"), int.from_bytes(head[4:8], "big"),
                                     head[8], head[9], head[12])
    assert depth == 8 and ctype in (2, 6) and not interlace, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def near(px, rgb, tol=40):
    return all(abs(p - q) <= tol for p, q in zip(px, rgb))


def test_html_page_renders_points_step_markers_and_peak():
    browser = chromium()
    r = run([mem_prog("mem_pattern")], env=SCHEDULE)
    assert r.returncode == 0, r.stderr
    page = stem_file(r, ".memory.html")
    html = open(page).read()
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html
    t = load(r.trace())
    n_gpu = sum(1 for e in memory_events(t) if e["args"]["Device Type"] == 1)
    dom = chromium_run(["--dump-dom"], "file://" + page)
    assert dom.returncode == 0, (browser, dom.stderr[-2000:])
    plots = re.findall(r'<svg class="memplot" data-slot="(\d+)".*?</svg>', dom.stdout, re.S)
    assert plots == ["0", "16"], plots   # GPU 0, then pinned host
    gpu_svg = re.search(r'<svg class="memplot" data-slot="0".*?</svg>', dom.stdout, re.S).group(0)
    points = re.search(r'<polyline class="mem" points="([^"]*)"', gpu_svg).group(1).split()
    assert len(points) == 2 + 2 * n_gpu, (len(points), n_gpu)
    assert re.findall(r'<line class="step" data-step="(\d+)"', gpu_svg) == ["1", "2", "3"]
    assert re.search(r'<circle class="peak" data-bytes="(\d+)"', gpu_svg).group(1) == str(W + sum(LEAKS) + A + B + C)

    shot = os.path.join(tempfile.mkdtemp(prefix="sp-shot-"), "memory.png")   # kept out of the repo
    sr = chromium_run([f"--screenshot={shot}", "--window-size=1000,800"], "file://" + page)
    assert sr.returncode == 0 and os.path.exists(shot), sr.stderr[-2000:]
    w, h, rows = png_pixels(shot)
    blue = sum(near(px, (0x1f, 0x77, 0xb4)) for line in rows for px in line)
    red = sum(near(px, (0xd6, 0x27, 0x28)) for line in rows for px in line)
    # A step marker is a tall dashed grey column (#999, lighter where antialiased); text never fills
    # 60 pixels of one column, and the axes (#444) and frame (#ddd) are outside the band. The first
    # step starts with the window, under the y axis, so only the later ones can show.
    def greyish(px):
        return max(px) - min(px) <= 10 and 120 <= px[0] <= 210
    tall = [x for x in range(w) if sum(greyish(rows[y][x]) for y in range(h)) >= 60]
    assert blue > 500, f"the curve is not drawn ({blue} blue pixels in {w}x{h})"
    assert red > 20, f"the peak dot is not drawn ({red} red pixels)"
    assert len(tall) >= 2, f"the step markers are not drawn (tall grey columns: {tall})"


def _table_column(table, column):
    """Values of one column of a key-average table, in row order, as bytes."""
    lines = table.splitlines()
    seps = [i for i, l in enumerate(lines) if l.startswith("---")]
    header = re.split(r"\s{2,}", lines[seps[0] + 1].strip())
    idx = header.index(column)
    units = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}
    out = []
    for line in lines[seps[1] + 1:seps[2]]:
        cell = re.split(r"\s{2,}", line.strip())[idx]
        num, unit = cell.split()
        out.append(float(num) * units[unit])
    return out


def test_table_memory_sort_keys():
    r = run([mem_prog("mem_pattern")], env={"PROF_PROFILE_MEMORY": 1, "STEPS": 4})
    tool = os.path.join(BUILD, "stepprof-report")
    for key, column in (("self_cuda_memory_usage", "Self CUDA Mem"), ("cuda_memory_usage", "CUDA Mem")):
        p = subprocess.run([tool, r.trace(), "--sort-by", key, "--row-limit", "-1"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        values = _table_column(p.stdout, column)
        assert values == sorted(values, reverse=True) and values[0] > 0, (key, values)


def test_blocks_alive_at_exit_after_the_last_cycle():
    """The last cycle ended before the process did: a separate exit report
    lists what is still allocated (the 3 deliberate leaks of mem_pattern)."""
    r = run([mem_prog("mem_pattern")], env=SCHEDULE)
    assert r.returncode == 0, r.stderr
    exits = [f for f in r.files() if f.endswith(".memory_exit.txt")]
    assert len(exits) == 1, r.files()
    text = open(os.path.join(r.outdir, exits[0])).read()
    assert text.startswith("== Alive at exit: 3 blocks, 634.77 KB (largest first) =="), text
    assert [l.split()[1:3] for l in text.splitlines()[1:]] == [["341.80", "KB"], ["195.31", "KB"], ["97.66", "KB"]]
    assert len(r.traces()) == 1, "no extra trace for the exit report"


def test_leaks_grouped_by_stack_with_with_stack():
    r = run([mem_prog("mem_pattern")], env={**SCHEDULE, "PROF_WITH_STACK": 1})
    assert r.returncode == 0, r.stderr
    text = open(stem_file(r, ".memory.txt")).read()
    leaks = section(text, "Leaks")
    groups = [l for l in leaks.splitlines() if " <- " in l]
    # leak_b once, leak_a twice from two call sites in main: three distinct stacks
    assert len(groups) == 3, leaks
    assert groups[0].split()[:3] == ["341.80", "KB", "1"] and "leak_b+0x" in groups[0] and "<- main+0x" in groups[0]
    assert sum("leak_a+0x" in g for g in groups) == 2


def test_every_allocator_counted_with_its_size_and_side():
    """calls_all makes one call of each allocator: device-side ones count on
    the GPU (managed too; pitched as pitch x height), pinned host ones on the
    CPU, with the sizes the program itself recorded."""
    d = tempfile.mkdtemp(prefix="sp-test-")
    r = run([os.path.join(PROGS, "calls_all"), os.path.join(d, "exp.json")], env={"PROF_PROFILE_MEMORY": 1})
    assert r.returncode == 0, r.stderr
    calls = {c["name"]: c for c in json.load(open(os.path.join(d, "exp.json")))}
    allocs = [(e["args"]["Bytes"], e["args"]["Device Type"]) for e in memory_events(load(r.trace()))
              if e["args"]["Bytes"] > 0]
    pitch = calls["cudaMallocPitch"]
    assert allocs == [(calls["cudaMalloc"]["bytes"], 1), (calls["cudaMallocAsync"]["bytes"], 1),
                      (calls["cudaMallocHost"]["bytes"], 0), (calls["cudaHostAlloc"]["bytes"], 0),
                      (calls["cudaMallocManaged"]["bytes"], 1), (pitch["pitch"] * pitch["height"], 1)], allocs
