"""tests/test_cupti_filter.py — cupti_api_filter: CUPTI's records of calls stepprof did not intercept
that only ask (cudaGetDevice, cudaSetDevice, cudaGetLastError; driver calls that neither launch,
copy, set, sync, allocate, free, load a module nor set the driver up) are left out by default, as
torch.profiler leaves them out, and counted in the trace header; `none` keeps them. Records that
pair with an intercepted call stay, and the key-average table and summary read the same events as
the trace (the offline tool, which reads only the trace, reproduces both)."""
import collections

import test_reports as reports
from harness import assert_valid, load, prog, run, runtime_events
from test_cupti import need_fake_cupti

QUERIES = {"cudaGetDevice": 2, "cudaSetDevice": 1, "cudaGetLastError": 2}   # per step (cupti_queries.c)
KEPT = {"cudaPeekAtLastError": 1, "cudaDeviceGetAttribute": 1}              # CUPTI-only, kept as Kineto does
STEPS = 4


def queries_run(mode=None):
    need_fake_cupti()
    env = {"STEPS": STEPS, "PROF_TABLE_ROW_LIMIT": -1}
    if mode:
        env["PROF_CUPTI_API_FILTER"] = mode
    r = run([prog("cupti_queries")], env=env)
    assert r.returncode == 0 and f"done steps={STEPS}" in r.stdout, r.stderr
    path = r.trace()
    assert_valid(path)
    return r, load(path)


def cupti_only(t):
    return collections.Counter(e["name"] for e in runtime_events(t, all_sources=True)
                               if e["args"].get("stepprof_source") == "cupti")


def table_calls(r):
    _, rows = reports.parse_table(reports.outputs(r, ".key_averages.txt"))
    return {row["Name"]: int(row["# of Calls"]) for row in rows}


def check_paired_launches(t):
    """The intercepted calls keep CUPTI's ids, and each kernel its launching call."""
    launches = runtime_events(t, "cudaLaunchKernel")
    syncs = runtime_events(t, "cudaDeviceSynchronize")
    assert len(launches) == STEPS and len(syncs) == STEPS, (len(launches), len(syncs))
    base = t["stepprof_host_correlation_base"]
    assert all(e["args"]["correlation"] < base for e in launches + syncs), "paired with CUPTI's records"
    kernels = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    assert sorted(k["args"]["correlation"] for k in kernels) == sorted(e["args"]["correlation"] for e in launches)


def check_reports_read_the_trace(r):
    text = reports.outputs(r, ".key_averages.txt")
    assert reports.tool(r.trace(), "--row-limit", "-1").stdout == text, "the table is the trace's"
    assert reports.tool(r.trace(), "--summary-json").stdout == reports.outputs(r, ".summary.json.txt")


def test_default_leaves_out_cupti_only_queries_and_counts_them():
    r, t = queries_run()
    extra = cupti_only(t)
    assert not [n for n in QUERIES if n in extra], extra
    assert {n: extra[n] for n in KEPT} == {n: STEPS * c for n, c in KEPT.items()}, extra
    assert t["stepprof_api_records_filtered"] == STEPS * sum(QUERIES.values()), t["stepprof_api_records_filtered"]
    check_paired_launches(t)
    calls = table_calls(r)
    assert not [n for n in QUERIES if n in calls], calls
    assert {n: calls[n] for n in KEPT} == {n: STEPS * c for n, c in KEPT.items()}, calls
    check_reports_read_the_trace(r)


def test_none_keeps_every_record():
    r, t = queries_run("none")
    extra = cupti_only(t)
    want = {**QUERIES, **KEPT}
    assert {n: extra[n] for n in want} == {n: STEPS * c for n, c in want.items()}, extra
    assert t["stepprof_api_records_filtered"] == 0
    check_paired_launches(t)
    calls = table_calls(r)
    assert {n: calls[n] for n in want} == {n: STEPS * c for n, c in want.items()}, calls
    check_reports_read_the_trace(r)
    # the default trace is this one less exactly what its header counts
    _, filtered = queries_run()
    n_all = len(runtime_events(t, all_sources=True))
    n_kept = len(runtime_events(filtered, all_sources=True))
    assert n_all - n_kept == filtered["stepprof_api_records_filtered"], (n_all, n_kept)


def test_queries_never_take_a_records_place_under_the_cycle_cap():
    """Left out as they are parsed, query records never count against max_events_per_cycle: a
    PyTorch step makes more queries than launches, and when they counted, kernels were dropped to
    keep them (50 steps, cap 450: 205 records dropped, 16 of 50 kernels lost before this). Each of
    back-to-back windows counts its own."""
    need_fake_cupti()
    r = run([prog("cupti_queries")], env={"STEPS": 50, "PROF_MAX_EVENTS_PER_CYCLE": 450})
    assert r.returncode == 0 and "done steps=50" in r.stdout, r.stderr
    t = load(r.trace())
    assert t["stepprof_cupti_dropped_records"] == 0 and t["stepprof_api_records_filtered"] == 50 * sum(QUERIES.values())
    assert sum(e.get("cat") == "kernel" for e in t["traceEvents"]) == 50
    assert len(runtime_events(t, "cudaLaunchKernel")) == 50
    r = run([prog("cupti_queries")], env={"STEPS": 9, "PROF_MARKER": "nvtx:step", "PROF_WAIT": 1, "PROF_WARMUP": 0,
                                         "PROF_ACTIVE": 2, "PROF_REPEAT": 3})
    assert r.returncode == 0 and "done steps=9" in r.stdout, r.stderr
    windows = [load(p) for p in r.traces()]
    assert len(windows) == 3
    for w in windows:
        assert w["stepprof_api_records_filtered"] == 2 * sum(QUERIES.values()), w["stepprof_api_records_filtered"]
        assert sum(e.get("cat") == "kernel" for e in w["traceEvents"]) == 2
        assert not [n for n in QUERIES if n in cupti_only(w)], cupti_only(w)


def driver_records(mode):
    need_fake_cupti()
    r = run([prog("drv_linked"), "direct"], env={"PROF_CUPTI_API_FILTER": mode})
    assert r.returncode == 0 and "launches=5" in r.stdout, r.stderr
    path = r.trace()
    assert_valid(path)
    t = load(path)
    drv = [e for e in t["traceEvents"] if e.get("cat") == "cuda_driver" and e.get("ph") == "X"]
    return t, collections.Counter(e["name"] for e in drv if e["args"].get("stepprof_source") == "cupti"), \
        collections.Counter(e["name"] for e in drv if e["args"].get("stepprof_source") != "cupti")


def test_driver_queries_left_out_loads_and_set_up_kept():
    """The driver stand-in records every driver call it gets (drv_work.c): device and context
    queries and lookups go; cuInit and the module load stay; intercepted driver calls stay paired."""
    t_all, only_all, host_all = driver_records("none")
    t, only, host = driver_records("queries")
    gone = {"cuDeviceGet", "cuCtxSetCurrent", "cuModuleGetFunction", "cuFuncGetName"}
    assert gone <= set(only_all) and not gone & set(only), (only_all, only)
    assert only["cuInit"] == only_all["cuInit"] == 1 and only["cuModuleLoadData"] == only_all["cuModuleLoadData"] == 1
    assert host == host_all and host["cuLaunchKernel"] == 5, (host, host_all)
    assert t_all["stepprof_api_records_filtered"] == 0
    assert t["stepprof_api_records_filtered"] == sum(only_all.values()) - sum(only.values()) == \
        sum(only_all[n] for n in gone), (only_all, only)


def test_bad_value_is_one_clear_line():
    need_fake_cupti()
    r = run([prog("cupti_queries")], env={"STEPS": 2, "PROF_CUPTI_API_FILTER": "all"})
    assert r.returncode == 0 and "done steps=2" in r.stdout, r.stderr
    assert r.sp_lines == ['stepprof: PROF_CUPTI_API_FILTER="all": expected one of queries, none; '
                          'profiling disabled for this run'], r.sp_lines
    assert not r.traces()
