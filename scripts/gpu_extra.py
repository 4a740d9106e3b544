#!/usr/bin/env python3
"""scripts/gpu_extra.py — the checks of gpu-validate.sh beyond the loop
comparison (docs/gpu-validation.md items 6-11), each printing markdown lines
from traces already written (so they can be rerun on the CPU machine on the
traces copied back):
  windows DIR                 back-to-back windows: per trace its steps, kernels, dropped counts (item 7)
  driver TRACE KERNEL N       a driver-API launch (CuPy RawKernel KERNEL launched N times): cuLaunchKernel
                              host events, kernels, flows (item 10)
  nested TRACE                driver records nested in runtime calls, tables' launch count (item 6)
  drvprog NAME DIR EXPORTS    a driver-API test program (drv_work.c, drv_copies.c) run bare and preloaded
                              on the real driver: DIR holds bare.out/.rc, sp.out/.rc, sp/ (its trace); same
                              output and status, kernels = launches, GPU copies and sets, and every printed
                              call stepprof has an interposer for (EXPORTS: its exported names) drawn
  handover SPERR TORCHDIR REFDIR   the program's own torch.profiler keeps CUPTI (item 8)
  stack SPTRACE TORCHTRACE    python_function events of the program's file, per trace, and every
                              event per recorded step against torch.profiler's (items 9, 11)
  steptimes DIR FIRST LAST    median step times of plain/stepprof/torch (and *_stack) runs over steps
                              FIRST..LAST (recording) and after LAST (after the window)
  spawned DIR FIRST LAST GPU  torch_spawn.py's 2 DDP ranks: a trace per rank, rank and backend, the window's
                              steps, and with GPU 1 launches in each step and kernels (section 7)
  ends DIR                    every trace under DIR: launches timed by their start all ended by CUPTI's
                              record (stepprof_launch_ends none 0), no launch of dur 0 (section 8)"""
import bisect
import collections
import glob
import gzip
import json
import os
import re
import statistics
import sys


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def traces(d):
    return sorted(glob.glob(os.path.join(d, "*.pt.trace.json*")))


def cat(t, c):
    return [e for e in t["traceEvents"] if e.get("cat") == c and e.get("ph") == "X"]


def steps(t):
    return sorted(int(e["name"].split("#")[1]) for e in t["traceEvents"]
                  if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))


def windows(d):
    counts = []
    for p in traces(d):
        t = load(p)
        k = len(cat(t, "kernel"))
        counts.append(k)
        print(f"- {os.path.basename(p)}: steps {steps(t)}, kernels {k}, dropped events "
              f"{t.get('stepprof_dropped_events')}, CUPTI dropped {t.get('stepprof_cupti_dropped_records')}")
    if counts:
        print(f"- {len(counts)} traces; kernels per trace min {min(counts)} max {max(counts)}")


def driver(path, kernel, n):
    t = load(path)
    drv = [e for e in cat(t, "cuda_driver") if e["name"].startswith("cuLaunchKernel")]
    ks = [e for e in cat(t, "kernel") if e["name"] == kernel]
    ids = {e["args"].get("correlation") for e in drv}
    linked = sum(1 for e in ks if e["args"].get("correlation") in ids)
    flows = sum(1 for e in t["traceEvents"] if e.get("ph") == "s" and e.get("cat") == "ac2g")
    src = collections.Counter(e["args"].get("stepprof_source", "intercepted") for e in drv)
    ok = len(ks) == n and linked == n
    print(f"- [{'ok' if ok else 'DIFFERS'}] driver-API launch: {n} launches of {kernel}; kernels {len(ks)}, "
          f"cuLaunchKernel host events {len(drv)} {dict(src)}, kernels linked to a cuLaunchKernel {linked}, "
          f"ac2g flows {flows}")


def nested(path):
    t = load(path)
    rt = cat(t, "cuda_runtime")
    drv = cat(t, "cuda_driver")
    by_tid = collections.defaultdict(list)
    for e in rt:
        by_tid[e["tid"]].append(e)
    inside = collections.Counter()
    for d in drv:
        if any(r["ts"] <= d["ts"] and d["ts"] + d["dur"] <= r["ts"] + r["dur"] for r in by_tid[d["tid"]]):
            inside[d["name"]] += 1
    launches = sum(1 for e in rt if "LaunchKernel" in e["name"])
    print(f"- driver records {len(drv)}, nested in a runtime call {sum(inside.values())}: "
          f"{dict(inside.most_common(8))}; runtime launches {launches}, kernels {len(cat(t, 'kernel'))}")


def drvprog(name, d, exports):
    read = lambda f: open(os.path.join(d, f)).read() if os.path.exists(os.path.join(d, f)) else ""
    bare, sp, rcs = read("bare.out"), read("sp.out"), (read("bare.rc").strip(), read("sp.rc").strip())
    ts = traces(os.path.join(d, "sp"))
    t = load(ts[0]) if ts else {"traceEvents": []}
    drawn = collections.Counter(e["name"] for e in cat(t, "cuda_driver") if e["args"].get("stepprof_source") != "cupti")
    ran = [ln.split("=", 1) for ln in sp.splitlines() if ln.startswith("cu") and "=" in ln]
    printed = {re.sub(r"_v2$", "", n.split("(")[0]) for n, _ in ran}  # drv_versions prints cuCtxSynchronize_v2(...)
    m = re.search(r"^launches=(\d+)$", sp, re.M)
    kernels, copies, sets = len(cat(t, "kernel")), len(cat(t, "gpu_memcpy")), len(cat(t, "gpu_memset"))
    # drv_work: `launches=N` plain launches, and with "more" one cuLaunchKernelEx and one cooperative launch
    launched = sum(1 for n, r in ran if n in ("cuLaunchKernelEx", "cuLaunchCooperativeKernel") and r == "0")
    want = int(m.group(1)) + launched if m else 0
    # A printed call stepprof exports an interposer for (the name or its _v2: cuMemAlloc prints, cuMemAlloc_v2
    # is drawn; twins are drawn under the plain name) must be drawn; the others (cuInit, ...) are not hooked.
    ours = set(open(exports).read().split()) - {"cuModuleGetFunction"}  # hooked for kernel names, not drawn
    base = {re.sub(r"_v2$", "", n) for n in drawn}
    missing = sorted(n for n in printed if (n in ours or n + "_v2" in ours) and n not in base)
    other = sorted(n for n in printed if n not in base and n not in missing)
    # drv_versions: each context sync drawn under the name of what it called, counted (a set would pass
    # with the 12080 calls drawn and every _v2 one missing): _v2 for the calls at 13000 and dlsym's _v2.
    if name.startswith("drv_versions"):
        syncs = [n for n, _ in ran if n.startswith("cuCtxSynchronize")]
        v2 = sum(1 for n in syncs if "13000" in n or n.startswith("cuCtxSynchronize_v2"))
        if (drawn["cuCtxSynchronize_v2"], drawn["cuCtxSynchronize"]) != (v2, len(syncs) - v2):
            missing.append(f"cuCtxSynchronize_v2 x{v2} and cuCtxSynchronize x{len(syncs) - v2}")
    gpu_ok = (copies > 0 or not any(n.startswith("cuMemcpy") and r == "0" for n, r in ran)) and \
        (sets > 0 or not any(n.startswith("cuMemset") and r == "0" for n, r in ran))
    ok = bool(ts) and bare == sp and rcs[0] == rcs[1] == "0" and kernels == want and not missing and gpu_ok
    print(f"- [{'ok' if ok else 'DIFFERS'}] {name}: exit bare {rcs[0]} / preloaded {rcs[1]}, output "
          f"{'same' if bare == sp else 'DIFFERENT'}, traces {len(ts)}; kernels {kernels} (launched {want}), "
          f"GPU copies {copies}, sets {sets}; drawn {dict(drawn)}; hooked but NOT DRAWN {missing}; "
          f"not hooked {other}")


def handover(sp_err, torch_dir, ref_dir):
    err = open(sp_err).read()
    lines = [ln for ln in err.splitlines() if "over to it" in ln]
    kineto = [ln for ln in err.splitlines() if "CUPTI" in ln and "stepprof" not in ln]
    got = [len(cat(load(p), "kernel")) for p in traces(torch_dir)]
    ref = [len(cat(load(p), "kernel")) for p in traces(ref_dir)]
    ok = len(lines) == 1 and not kineto and got and got == ref
    print(f"- [{'ok' if ok else 'DIFFERS'}] hand-over: stepprof lines {lines}; other CUPTI lines {kineto[:3]}; "
          f"torch.profiler kernels under stepprof {got}, without {ref}")


ADDR = re.compile(r" at 0x[0-9a-f]+>")


def py_per_step(t, call_from=True):
    """Per ProfilerStep#N: the multiset of (name, parent's name, CallFrom) of the python_function
    events in it, addresses masked; torch.profiler's own frames (its prof.step() and what that calls)
    left out, as the program calls them only under torch.profiler. call_from=False leaves CallFrom out
    (torch.profiler writes it from PyTorch 2.12 on; 2.11, the GPU image's, does not)."""
    py = cat(t, "python_function")
    by_id = {e["args"].get("Python id"): e for e in py}
    spans = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in t["traceEvents"]
             if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]
    t0 = min((a for _, a, _ in spans), default=0)

    def name(e):   # a frame open when the trace began is named by the line it was at then: masked
        n = ADDR.sub(" at 0x>", e["name"])
        return re.sub(r"\(\d+\): ", "(?): ", n) if e["ts"] < t0 else n

    owned = {}

    def own(e):   # memoized per Python id: each ancestor chain is walked once in all
        k = e["args"].get("Python id")
        if k not in owned:
            parent = by_id.get(e["args"].get("Python parent id"))
            owned[k] = ("torch/profiler/" in e["name"] or "torch/autograd/profiler" in e["name"] or
                        (parent is not None and parent is not e and own(parent)))
        return owned[k]
    spans.sort(key=lambda s: s[1])
    starts = [a for _, a, _ in spans]
    out = {n: collections.Counter() for n, _, _ in spans}
    for e in py:   # each event to the step whose span holds it: a search, not a scan per step
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < 0 or e["ts"] > spans[i][2] or own(e):
            continue
        parent = by_id.get(e["args"].get("Python parent id"))
        out[spans[i][0]][(name(e), name(parent) if parent else "", e["args"].get("CallFrom", "") if call_from else "")] += 1
    return out


def stack(sp_path, torch_path):
    for label, p in (("stepprof", sp_path), ("torch.profiler", torch_path)):
        t = load(p)
        py = [e for e in cat(t, "python_function") if "gpu_torch_loop.py" in e["name"]]
        names = collections.Counter(e["name"] for e in py)
        mods = collections.Counter(e["name"] for e in cat(t, "python_function") if e["name"].startswith("nn.Module: "))
        print(f"- {label}: python_function events {len(cat(t, 'python_function'))}, of the loop's file "
              f"{len(py)}: {dict(sorted(names.items()))}; nn.Module events: {dict(sorted(mods.items()))}")
    ts, tt = load(sp_path), load(torch_path)
    call_from = any("CallFrom" in e["args"] for e in cat(tt, "python_function"))
    sp, tp = py_per_step(ts, call_from), py_per_step(tt, call_from)
    both = sorted(set(sp) & set(tp))
    same = [n for n in both if sp[n] == tp[n]]
    print(f"- per recorded step, python_function events (name, parent{', CallFrom' if call_from else ''}; addresses masked; torch.profiler's "
          f"own frames left out): {len(same)} of {len(both)} steps equal; events per step stepprof "
          f"{[sum(sp[n].values()) for n in both]}, torch.profiler {[sum(tp[n].values()) for n in both]}")
    for n in [n for n in both if n not in same][:2]:
        only_sp, only_tp = sp[n] - tp[n], tp[n] - sp[n]
        print(f"  - step {n}: only stepprof {sum(only_sp.values())} {list(only_sp.items())[:5]}; only torch.profiler "
              f"{sum(only_tp.values())} {list(only_tp.items())[:5]}")


def steptimes(d, first, last):
    base, idle = None, None
    for name in ("plain", "stepprof", "torch", "stepprof_stack", "torch_stack", "stepprof_idle", "stepprof_nocupti",
                 "stepprof_noshapes"):
        p = os.path.join(d, name + ".json")
        if not os.path.exists(p):
            continue
        ms = json.load(open(p))["step_ms"]
        rec, after = statistics.median(ms[first:last + 1]), statistics.median(ms[last + 3:])
        base = base or (rec, after)
        # After a single cycle nothing of stepprof's may stay on (CUPTI's kinds did, 2026-11-27). Bare steps
        # move by up to 40% between processes, and stepprof loaded costs some: against the never-recording
        # run (idle), only a large ratio is flagged.
        if idle is None and os.path.exists(os.path.join(d, "stepprof_idle.json")):
            idle = statistics.median(json.load(open(os.path.join(d, "stepprof_idle.json")))["step_ms"][last + 3:])
        left = idle and name.startswith("stepprof") and name != "stepprof_idle" and after / idle > 1.3
        flag = f" [after the window x{after / idle:.2f} of never recording: a cost left on?]" if left else ""
        print(f"- {name}: median step {rec:.3f} ms while recording (steps {first}..{last}; x{rec / base[0]:.3f}), "
              f"{after:.3f} ms after the window (x{after / base[1]:.3f}){flag}")


def spawned(d, first, last, gpu):
    """torch_spawn.py's 2 DDP ranks (mp.spawn, gloo): one trace per rank, named and labelled by
    torch.distributed's rank, with the steps of the window and, on a GPU (gpu 1), launches and kernels."""
    got = sorted(traces(d))
    names = sorted(os.path.basename(p)[:6] for p in got)
    print("- traces: %s [%s]" % (names, "ok" if names == ["rank0_", "rank1_"] else "NOT OK"))
    for p in got:
        t = load(p)
        span = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in t["traceEvents"]
                if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}
        # a step's kernels: those its launches started (the flows' ids join them; by time is enough here)
        per = {n: sum(1 for e in cat(t, "cuda_runtime") if a <= e["ts"] < b and "Launch" in e["name"])
               for n, (a, b) in sorted(span.items())}
        ok = sorted(span) == list(range(first, last + 1)) and t.get("distributedInfo", {}).get("backend") == "gloo" \
            and (not gpu or (all(per.values()) and len(cat(t, "kernel")) > 0))
        print("- %s: distributedInfo %s, launches per step %s, kernels %d [%s]" % (
            os.path.basename(p)[:6], t.get("distributedInfo"), per, len(cat(t, "kernel")), "ok" if ok else "NOT OK"))


def ends(d):
    """launch_durations auto on the real runtime and driver: a launch that read the clock once takes
    CUPTI's record's duration; one without a record (none) would last 0. Per trace under d."""
    bad = seen = 0
    for p in sorted(glob.glob(os.path.join(d, "**", "*.pt.trace.json*"), recursive=True)):
        t = load(p)
        if "stepprof_gpu_source" not in t:
            continue   # torch.profiler's
        got = t.get("stepprof_launch_ends", {"cupti": 0, "none": 0})   # no header: every launch read twice
        la = [e for e in cat(t, "cuda_runtime") + cat(t, "cuda_driver") if "Launch" in e["name"]
              and e["args"].get("stepprof_source") != "cupti"]
        zero = collections.Counter(e["name"] for e in la if e.get("dur", 0) <= 0)
        ok = got["none"] == 0 and not zero
        bad += not ok
        seen += 1
        print(f"- {os.path.relpath(p, d)}: ends {got}, launches {len(la)}, "
              f"dur 0: {dict(zero) or 'none'} [{'ok' if ok else 'DIFFERS'}]")
    verdict = "no stepprof trace found: NOT CHECKED" if not seen else "ok" if not bad else f"{bad} of {seen} traces DIFFER"
    print(f"- launch ends: {verdict}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = {"windows": windows, "driver": driver, "nested": nested, "drvprog": drvprog, "handover": handover, "stack": stack,
          "steptimes": steptimes, "spawned": spawned, "ends": ends}[cmd]
    conv = {"driver": (str, str, int), "steptimes": (str, int, int), "spawned": (str, int, int, int)}.get(cmd)
    fn(*[c(a) for c, a in zip(conv, args)] if conv else args)


if __name__ == "__main__":
    main()
