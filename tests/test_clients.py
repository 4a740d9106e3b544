"""tests/test_clients.py — issue 12: the real clients, as released (Holistic Trace Analysis 0.5.0 and
TensorBoard's profiler plugin 0.4.3, pinned in scripts/pydeps.sh), read stepprof's traces of
tests/programs/train.cu on the CUDA + CUPTI stand-ins, and every answer they give is checked against
the trace itself: HTA's compute time is the union of the kernels' time, its kernel breakdown lists
exactly the kernels and copies, launch stats have one row per launch, queue length and idle time
cover every stream, the critical path, memory bandwidth, counters, kernel sequences and user
annotations build; TensorBoard shows exactly the recorded steps with their time, and the kernels.
Runs: one rank; two ranks in one directory (RANK / WORLD_SIZE); profile_memory + record_shapes +
with_stack + gzip; repeat 2. The clients run in a child process (tests/lib/clients.py).

Client facts the checks rely on (docs/formats.md has the rest):
- HTA 0.5.0 rounds each event's start up and end down to whole microseconds unless
  HTA_DISABLE_NS_ROUNDING=1; any event shorter than 1 us then lasts a negative time and its kernel
  sequence / user annotation analyses fail. Kineto's traces have the same ns resolution, so the
  checks run HTA with rounding off, plus one run with the default to show the breakdown holds there.
- HTA 0.5.0 stores correlation ids in the narrowest integer type: a trace whose ids are all <= 127
  fails to load (int8 overflow). Windows here have more, as any real training window does.
- HTA queue length counts work issued by cudaLaunchKernel(ExC) / cudaMemcpyAsync / cudaMemsetAsync."""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import ROOT, assert_valid, load, prog, run

CLIENTS = os.path.join(ROOT, "tests", "lib", "clients.py")
HTA_PY = os.path.join(ROOT, "build", "pydeps", "hta")  # scripts/pydeps.sh, whatever SP_BUILD is
SCHED = {"PROF_MARKER": "nvtx:train_step", "PROF_WAIT": 1, "PROF_WARMUP": 1, "PROF_ACTIVE": 6, "STEPS": 9}
RANGES = {"train_step", "forward", "backward", "optimizer"}
ASYNC_LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def clients(what, arg, rounding=False):
    env = dict(os.environ)
    if what == "hta":
        if not os.path.isdir(HTA_PY):
            raise AssertionError(f"{HTA_PY} missing: scripts/pydeps.sh installs HTA's pandas there")
        env["PYTHONPATH"] = HTA_PY + os.pathsep + env.get("PYTHONPATH", "")
        if not rounding:
            env["HTA_DISABLE_NS_ROUNDING"] = "1"
    p = subprocess.run([sys.executable, CLIENTS, what, arg], capture_output=True, text=True, timeout=300, env=env)
    out = p.stdout.split("\nCLIENTS-JSON ", 1)
    assert p.returncode == 0 and len(out) == 2, f"{what} on {arg} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return json.loads(out[1])


def ok(result, key):
    v = result[key]
    assert not (isinstance(v, dict) and "error" in v), f"HTA {key}: {v.get('error')}\n{v.get('where')}"
    return v


def xs(t, *cats):
    return [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats]


def union_us(events):
    total, end = 0.0, None
    for a, b in sorted((e["ts"], e["ts"] + e["dur"]) for e in events):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def launches_by_corr(t):
    return {e["args"]["correlation"]: e for e in xs(t, "cuda_runtime")}


def record(env=None, ranks=(None,), steps=None):
    """Runs train once per rank into one directory; returns {rank: [trace paths in cycle order]}."""
    out = tempfile.mkdtemp(prefix="sp-clients-")
    found = {}
    for rank in ranks:
        e = {**SCHED, "PROF_OUTPUT_DIR": out, **(env or {})}
        if steps:
            e["STEPS"] = steps
        if rank is not None:
            e.update({"RANK": rank, "WORLD_SIZE": len(ranks)})
        before = set(os.listdir(out))
        r = run([prog("train")], env=e)
        assert r.returncode == 0, r.stderr
        found[rank or 0] = sorted(os.path.join(out, f) for f in set(os.listdir(out)) - before if ".pt.trace.json" in f)
    names = os.listdir(out)
    assert not [n for n in names if n.endswith(".json") and ".pt.trace." not in n], \
        f"files HTA would read as traces: {names}"
    return out, found


def check_hta(directory, traces):
    """traces: {rank: loaded trace}; HTA reads directory, which holds exactly these."""
    h = clients("hta", directory)
    assert h["ranks"] == sorted(traces), (h["ranks"], sorted(traces))
    temporal = {row[0]: row[1:] for row in ok(h, "temporal")}
    breakdown = collections.defaultdict(dict)
    for rank, ktype, name, total in ok(h, "kernel_breakdown"):
        breakdown[rank][name] = (ktype, total)
    launch_rows = ok(h, "launch_stats")
    qsum = collections.defaultdict(set)
    for rank, stream in ok(h, "queue_length_summary"):
        qsum[rank].add(stream)
    qseries = ok(h, "queue_length_series")
    idle = collections.defaultdict(set)
    for rank, stream, _, _ in ok(h, "idle"):
        idle[rank].add(stream)
    for rank, t in traces.items():
        kernels = xs(t, "kernel")
        work = xs(t, *GPU_WORK)
        assert kernels, f"rank {rank}: no kernels"
        idle_t, compute, non_compute, kernel_time = temporal[rank]
        assert abs(compute - union_us(kernels)) < 0.01, (rank, compute, union_us(kernels))
        assert abs(idle_t + compute + non_compute - kernel_time) < 0.01, temporal[rank]
        # kernel breakdown: exactly the kernels (COMPUTATION) and the copies / sets (MEMORY), each its time
        want = collections.defaultdict(float)
        for e in work:
            want[e["name"]] += e["dur"]
        assert set(breakdown[rank]) == set(want), (rank, sorted(breakdown[rank]), sorted(want))
        for name, (ktype, total) in breakdown[rank].items():
            assert ktype == ("COMPUTATION" if any(k["name"] == name for k in kernels) else "MEMORY"), (name, ktype)
            assert abs(total - want[name]) < 0.01, (name, total, want[name])
        # launch stats: one row per launch, and only launches
        calls = launches_by_corr(t)
        issued = [e for e in work if calls.get(e["args"]["correlation"], {}).get("name") in ASYNC_LAUNCHES]
        rows = launch_rows[str(rank)]
        assert sorted(r[0] for r in rows) == sorted(e["args"]["correlation"] for e in issued), (rank, len(rows))
        assert len(rows) >= len(kernels)
        streams = {e["tid"] for e in issued}
        assert qsum[rank] == streams and set(qseries[str(rank)]) == streams, (rank, qsum[rank], streams)
        assert idle[rank] == {e["tid"] for e in work}, (rank, idle[rank])
    cp = ok(h, "critical_path")
    assert cp["ok"] and cp["nodes"] > 0, cp
    copies = {e["name"].split(" (")[0] for t in traces.values() for e in xs(t, "gpu_memcpy", "gpu_memset")}
    copies = {"Memset" if c.startswith("Memset") else c for c in copies}
    assert {name for _, name in ok(h, "memory_bw")} == copies, ok(h, "memory_bw")
    ours = {e["name"] for t in traces.values() for e in t["traceEvents"] if e.get("ph") == "C"}
    for file, names in ok(h, "counters").items():  # HTA's tracks added to the trace's own
        assert set(names) == copies | {"Queue Length"} | ours, (file, names)
    assert len(ok(h, "counters")) == len(traces)
    ok(h, "kernel_sequences")
    # kernels with user annotations: each kernel under its launching call's innermost NVTX range
    t0 = traces[min(traces)]
    ranges = {e["args"]["External id"]: e["name"] for e in xs(t0, "user_annotation")}
    calls = launches_by_corr(t0)
    want = collections.Counter((k["name"], ranges[calls[k["args"]["correlation"]]["args"]["External id"]])
                               for k in xs(t0, "kernel"))
    kernel_names = {k["name"] for k in xs(t0, "kernel")}
    got = collections.Counter((n, a) for n, a in ok(h, "user_annotations") if n in kernel_names)
    assert got == want, (got, want)
    return h


def check_tb(path, t):
    tb = clients("tb", path)
    steps = sorted((e for e in xs(t, "user_annotation") if e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    assert tb["steps"] == [e["name"].split("#")[1] for e in steps], (tb["steps"], [e["name"] for e in steps])
    assert len(tb["step_total_us"]) == len(steps)
    for got, e in zip(tb["step_total_us"], steps):
        assert abs(got - e["dur"]) < 0.01, (e["name"], got, e["dur"])
    assert tb["has_kernel"], tb
    want = collections.Counter(e["name"] for e in xs(t, "kernel"))
    assert {name: n for name, n in tb["kernels"]} == dict(want), (tb["kernels"], want)
    names = {d["title"]: d["value"] for d in tb["gpu_summary"]}
    assert names.get("Name") == t["deviceProperties"][0]["name"], tb["gpu_summary"]
    assert {"Overview", "Operator", "Kernel", "Trace"} <= set(tb["views"]), tb["views"]
    assert not tb["errors"], tb["errors"]
    return tb


def loaded(paths):
    for p in paths:
        assert_valid(p)
    return [load(p) for p in paths]


def test_hta_and_tensorboard_single_rank():
    out, found = record()
    (path,) = found[0]
    (t,) = loaded([path])
    assert max(e["args"]["correlation"] for e in xs(t, "cuda_runtime")) > 127, "see HTA's int8 correlation"
    check_hta(out, {0: t})
    check_tb(path, t)


def test_hta_temporal_breakdown_with_default_rounding():
    """HTA as users run it: every start rounded up, every end down to whole us. Nothing on the GPU
    lasts 0 ns, so the breakdown holds (it asserted non_compute_time >= 0 on a 0 ns copy)."""
    out, found = record()
    (t,) = loaded(found[0])
    h = clients("hta", out, rounding=True)
    import math
    kernels = [{"ts": math.ceil(e["ts"]), "dur": math.floor(e["ts"] + e["dur"]) - math.ceil(e["ts"])}
               for e in xs(t, "kernel")]
    (row,) = ok(h, "temporal")
    assert row[0] == 0 and row[2] == union_us(kernels), (row, union_us(kernels))


def test_hta_and_tensorboard_two_ranks_in_one_directory():
    out, found = record(ranks=(0, 1))
    traces = {r: loaded(ps)[0] for r, ps in found.items()}
    for r, t in traces.items():
        assert t["distributedInfo"]["rank"] == r and t["distributedInfo"]["world_size"] == 2
    check_hta(out, traces)
    for r, (p,) in found.items():
        check_tb(p, traces[r])


def test_hta_and_tensorboard_memory_shapes_stacks_gzip():
    out, found = record({"PROF_PROFILE_MEMORY": 1, "PROF_RECORD_SHAPES": 1, "PROF_WITH_STACK": 1,
                         "PROF_USE_GZIP": 1})
    (path,) = found[0]
    assert path.endswith(".pt.trace.json.gz"), path
    (t,) = loaded([path])
    assert any(e.get("ph") == "C" for e in t["traceEvents"]), "memory counters"
    check_hta(out, {0: t})
    tb = check_tb(path, t)
    # train.cu allocates before its loop: no allocation inside the window, so no Memory view
    assert not [e for e in t["traceEvents"] if e.get("name") == "[memory]"] and not tb["memory"], tb["views"]


def test_tensorboard_memory_view_peaks():
    """tests/programs/mem_pattern.c allocates and frees inside its steps: TensorBoard's Memory view
    exists and its peak per device is the largest "Total Allocated" of the trace's [memory] events."""
    r = run([prog("mem_pattern")], env={"PROF_PROFILE_MEMORY": 1, "PROF_MARKER": "nvtx:step", "PROF_WARMUP": 1,
                                        "PROF_ACTIVE": 3, "STEPS": 5})
    assert r.returncode == 0, r.stderr
    path = r.trace()
    (t,) = loaded([path])
    tb = clients("tb", path)
    assert tb["memory"] and "Memory" in tb["views"], tb["views"]
    peaks = collections.defaultdict(int)
    for e in t["traceEvents"]:
        if e.get("name") == "[memory]":
            a = e["args"]
            key = (a["Device Type"], a["Device Id"])
            peaks[key] = max(peaks[key], a["Total Allocated"])
    assert peaks and {(d, i): p for d, i, p in tb["memory_peaks"]} == dict(peaks), (tb["memory_peaks"], peaks)
    assert not tb["errors"], tb["errors"]


def test_hta_and_tensorboard_each_cycle_of_repeat_2():
    """Two cycles of one rank share the rank: HTA keeps one file per rank, so each cycle is read
    from a directory of its own (README: how to open a run), TensorBoard reads both as spans."""
    out, found = record({"PROF_REPEAT": 2}, steps=16)
    paths = found[0]
    assert len(paths) == 2, paths
    for p, t in zip(paths, loaded(paths)):
        alone = tempfile.mkdtemp(prefix="sp-clients-cycle-")
        shutil.copy(p, alone)
        check_hta(alone, {0: t})
        check_tb(p, t)
    assert not glob.glob(os.path.join(out, "*.summary.json")), "the summary never ends in .json"
