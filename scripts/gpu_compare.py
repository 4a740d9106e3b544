#!/usr/bin/env python3
"""scripts/gpu_compare.py — compares two Kineto-format traces of the same
steps (stepprof's and torch.profiler's): kernels per step, GPU kernel time per
step, the top 10 kernels side by side, kernels missing from either, and per
aten operator (cpu_op, when both traces have them) the calls, the kernels it
launched and their CUDA time (a kernel belongs to the cpu_op whose External
id it carries). A kernel
belongs to the ProfilerStep whose span contains its launching runtime call
(joined by args.correlation). Usage: gpu_compare.py STEPPROF_TRACE TORCH_TRACE
[--tolerance 0.02] (per operator at least 0.1, or 0.5 us per kernel); prints markdown, exits 1 when per-step kernel counts differ
or kernel time differs by more than the tolerance."""
import collections
import gzip
import json
import sys


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def per_step(trace):
    ev = trace["traceEvents"]
    steps = sorted(((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
                    if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
                    and e.get("cat") in ("user_annotation", "cpu_op")))
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in ev
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out = {s: {"count": 0, "us": 0.0, "names": collections.Counter()} for _, _, s in steps}
    for e in ev:
        if e.get("cat") != "kernel":
            continue
        ts = launch_ts.get(e["args"].get("correlation"))
        for a, b, s in steps:
            if ts is not None and a <= ts <= b:
                out[s]["count"] += 1
                out[s]["us"] += e["dur"]
                out[s]["names"][e["name"]] += 1
                break
    return out


def per_op(trace):
    ev = trace["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in ev
           if e.get("cat") == "cpu_op" and e.get("ph") == "X" and "External id" in e.get("args", {})}
    out = collections.defaultdict(lambda: {"calls": 0, "kernels": 0, "us": 0.0})
    for name in ops.values():
        out[name]["calls"] += 1
    for e in ev:
        name = ops.get(e.get("args", {}).get("External id")) if e.get("cat") == "kernel" else None
        if name:
            out[name]["kernels"] += 1
            out[name]["us"] += e["dur"]
    return out


def compare_ops(sp, th, tol):
    print("\n| operator | calls stepprof | calls torch | kernels stepprof | kernels torch | CUDA us stepprof "
          "| CUDA us torch |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    names = sorted((n for n in set(sp) | set(th) if n.startswith("aten::")),
                   key=lambda n: -th.get(n, sp.get(n))["us"])
    for n in names:
        a = sp.get(n, {"calls": 0, "kernels": 0, "us": 0.0})
        b = th.get(n, {"calls": 0, "kernels": 0, "us": 0.0})
        # Two processes' runs of a short kernel differ by a few tenths of a microsecond: the time
        # tolerance is the relative one or 0.5 us per kernel, whichever is larger.
        same = a["calls"] == b["calls"] and a["kernels"] == b["kernels"] and \
            abs(a["us"] - b["us"]) <= max(tol * b["us"], 0.5 * max(b["kernels"], 1))
        ok &= same
        if not same or names.index(n) < 15:
            print(f"| {n} | {a['calls']} | {b['calls']} | {a['kernels']} | {b['kernels']} | {a['us']:.1f} | "
                  f"{b['us']:.1f} |{'' if same else ' differs'}")
    return ok


def main():
    sp_path, torch_path = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[sys.argv.index("--tolerance") + 1]) if "--tolerance" in sys.argv else 0.02
    sp, th = per_step(load(sp_path)), per_step(load(torch_path))
    ok = True
    print("| step | kernels stepprof | kernels torch | GPU kernel us stepprof | GPU kernel us torch | diff |")
    print("|---|---|---|---|---|---|")
    for s in sorted(set(sp) | set(th)):
        a, b = sp.get(s), th.get(s)
        if not a or not b:
            print(f"| {s} | {a and a['count']} | {b and b['count']} | | | step missing |")
            ok = False
            continue
        diff = (a["us"] - b["us"]) / b["us"] if b["us"] else 0.0
        ok &= a["count"] == b["count"] and abs(diff) <= tol
        print(f"| {s} | {a['count']} | {b['count']} | {a['us']:.1f} | {b['us']:.1f} | {diff * 100:+.2f}% |")
    tot = lambda d: sum((v["names"] for v in d.values()), collections.Counter())
    ta, tb = tot(sp), tot(th)
    print("\nTop 10 kernels (calls in recorded steps): stepprof | torch.profiler")
    for (na, ca), (nb, cb) in zip(ta.most_common(10), tb.most_common(10)):
        print(f"- {na[:70]} x{ca} | {nb[:70]} x{cb}")
    missing = (tb - ta) + (ta - tb)
    print(f"\nkernels missing from stepprof: {sum((tb - ta).values())}; missing from torch: {sum((ta - tb).values())}")
    for n, c in list(missing.items())[:10]:
        print(f"- {n[:90]} x{c}")
    spo, tho = per_op(load(sp_path)), per_op(load(torch_path))
    if spo or tho:
        ok &= compare_ops(spo, tho, max(tol, 0.1))
    print("\nRESULT:", "agree" if ok and not missing else "DISAGREE")
    return 0 if ok and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
