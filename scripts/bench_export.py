#!/usr/bin/env python3
"""scripts/bench_export.py — the export part of `make bench`: records one window of each size with
tests/programs/export_bench on the CUDA stand-in (CUPTI on through the CUPTI stand-in, NVTX ranges,
4096 distinct kernel names) and prints, per size and variant: the trace's events, export events/s
(trace events / wall time from the window's close to the end of the process, which waits for the
export: trace + table + summary; and per CPU-second the process spent from the close on, which a
busy machine disturbs less), JSON bytes per trace event, export memory per trace event (peak
RSS minus RSS before the close) and the training thread's stall in the call that closed the window.

Environment: SP_BUILD (default build/), BENCH_EXPORT_SIZES (launches, default
"10000 100000 1000000 3000000"), BENCH_EXPORT_VARIANTS (default "plain distinct stack memory gzip";
the variants other than plain run at the second size only, distinct at the third: there one NVTX range
per launch, every range's name distinct: 1M distinct range names at 1M launches), BENCH_EXPORT_TIMEOUT_S
(default 120 per run: a run past it is reported as such, it means a super-linear export),
BENCH_EXPORT_CUPTI (default 1; 0 measures the host side alone).

Each row starts after a sync(): the rows before it wrote up to ~1 GB of traces within seconds, and
their writeback (the kernel's flusher threads, on a 2-core machine) would otherwise be charged to this
row's export: the CUPTI-off 3M row ran at 1.7-1.8M events/s after the rows before it and at 2.7-2.9M
after a sync. A program's windows are minutes apart, not seconds.
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.environ.get("SP_BUILD", os.path.join(ROOT, "build"))
SIZES = [int(s) for s in os.environ.get("BENCH_EXPORT_SIZES", "10000 100000 1000000 3000000").split()]
VARIANTS = os.environ.get("BENCH_EXPORT_VARIANTS", "plain distinct stack memory gzip").split()
TIMEOUT = float(os.environ.get("BENCH_EXPORT_TIMEOUT_S", "120"))
CUPTI = os.environ.get("BENCH_EXPORT_CUPTI", "1")

EXTRA = {
    "plain": {},
    "distinct": {},
    "stack": {"PROF_WITH_STACK": "1"},
    "memory": {"PROF_PROFILE_MEMORY": "1"},
    "gzip": {"PROF_USE_GZIP": "1"},
}


def count_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    n = size = 0
    with opener(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                break
            size += len(block)
            n += block.count(b'\n{"')
    return n, size


def measure(launches, variant):
    with tempfile.TemporaryDirectory() as out:
        r = run_wait4(launches, variant, out)
        if r is None:
            return None
        done, maxrss_kb, cpu_s, vals = r
        traces = [f for f in os.listdir(out) if ".pt.trace.json" in f]
        left = [f for f in os.listdir(out) if ".tmp" in f]
        if len(traces) != 1 or left:
            return "no trace" if not traces else "left .tmp"
        events, size = count_events(os.path.join(out, traces[0]))
        gz_bytes = os.path.getsize(os.path.join(out, traces[0]))
        opener = gzip.open if traces[0].endswith(".gz") else open
        with opener(os.path.join(out, traces[0]), "rt") as f:
            head = f.read(4096)
        m = re.search(r'"stepprof_cupti_dropped_records": (\d+)', head)
        secs = (done - int(vals["close_realtime_ns"])) / 1e9
        cpu = cpu_s - int(vals["cpu_before_close_ns"]) / 1e9
        return {"events": events, "rate": events / secs, "secs": secs, "cpu_rate": events / cpu, "bytes": size / events,
                "gz": gz_bytes / events if traces[0].endswith(".gz") else None,
                "mem": (maxrss_kb - int(vals["rss_before_close_kb"])) * 1024 / events,
                "stall_ms": int(vals["close_stall_ns"]) / 1e6, "cupti_dropped": int(m.group(1)) if m else 0}


def run_wait4(launches, variant, out):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(B, "fakecuda"), LD_PRELOAD=os.path.join(B, "libstepprof.so"),
               PROF_OUTPUT_DIR=out, PROF_LOG="quiet", PROF_MARKER="nvtx:step", PROF_WAIT="0", PROF_WARMUP="1",
               PROF_ACTIVE="1", PROF_REPEAT="1", PROF_FINALIZE_TIMEOUT_S="3600", FAKECUDA_KERNEL_NS="0", PROF_CUPTI=CUPTI,
               PROF_BUFFER_MB=str(max(256, launches * 3 * 128 // (1 << 20) + 64)),
               # CUPTI's own cap sized for a kernel and an API record per launch, so that the CUPTI-on rows
               # export GPU records instead of counting them as dropped (the default 64 MB holds ~250k).
               PROF_CUPTI_BUFFER_MB=str(min(4096, max(64, launches * 512 // (1 << 20) + 64))))
    env.update(EXTRA[variant])
    args = [os.path.join(B, "programs", "export_bench"), str(launches)]
    if variant == "distinct":   # issue 10's "1M distinct range names": a range per launch, each named apart
        args += [str(launches), "1"]
    outf = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(args, env=env, stdout=outf, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + TIMEOUT
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            return None
        time.sleep(0.005)
    done = time.time_ns()
    p.returncode = os.waitstatus_to_exitcode(status)
    outf.seek(0)
    vals = dict(line.split() for line in outf.read().splitlines() if line.count(" ") == 1)
    if p.returncode != 0 or "close_realtime_ns" not in vals:
        return None
    return done, ru.ru_maxrss, ru.ru_utime + ru.ru_stime, vals


def main():
    print("export benchmark: one recorded window per row on the stand-in (CUPTI stand-in %s, an NVTX range per "
          "8 launches, 4096 kernel names); export = trace + table + summary, until the process ends"
          % ("on" if CUPTI != "0" else "off"))
    print("  %-9s %9s %10s %8s %12s %12s %8s %8s %12s" % ("variant", "launches", "events", "secs", "events/s",
                                                          "ev/cpu-s", "B/event", "mem/ev", "close stall"))
    rows = []
    for i, n in enumerate(SIZES):
        for v in VARIANTS:
            if v != "plain" and not ((v == "distinct" and i == min(2, len(SIZES) - 1)) or
                                     (v != "distinct" and i == min(1, len(SIZES) - 1))):
                continue
            os.sync()   # the rows before wrote up to ~1 GB of traces: their writeback is not this row's
            r = measure(n, v)
            if not isinstance(r, dict):
                print("  %-9s %9d  %s" % (v, n, r or "export past %.0f s (or failed)" % TIMEOUT))
                continue
            rows.append((v, n, r))
            gz = " (gz %.0f B/ev)" % r["gz"] if r["gz"] else ""
            if r["cupti_dropped"]:
                gz += " (%d CUPTI records dropped)" % r["cupti_dropped"]
            print("  %-9s %9d %10d %8.2f %12.0f %12.0f %8.1f %8.1f %9.3f ms%s" % (
                v, n, r["events"], r["secs"], r["rate"], r["cpu_rate"], r["bytes"], r["mem"], r["stall_ms"], gz))
            sys.stdout.flush()
    plain = {n: r for v, n, r in rows if v == "plain"}
    if 100000 in plain and 3000000 in plain:
        print("  3M rate / 100k rate: %.0f%% (target >= 80%%)" % (100 * plain[3000000]["rate"] / plain[100000]["rate"]))
    gzr = [r for v, n, r in rows if v == "gzip"]
    if gzr and SIZES[min(1, len(SIZES) - 1)] in plain:
        p = plain[SIZES[min(1, len(SIZES) - 1)]]
        print("  gzip costs +%.0f%% of the plain export's CPU time, +%.0f%% of its wall time (target <= 50%%)" % (
            100 * (p["cpu_rate"] / gzr[0]["cpu_rate"] - 1), 100 * (gzr[0]["secs"] / p["secs"] - 1)))


if __name__ == "__main__":
    main()
