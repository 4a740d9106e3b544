#!/usr/bin/env python3
"""scripts/gpu_checklist.py — the first things to confirm about CUPTI on a real
GPU (docs/gpu-validation.md, "What to confirm first"), checked from traces that
stepprof writes for build/programs/train (whole run), calls_all and
sync_devices. Each check prints one markdown line:
`- [ok|DIFFERS|n/a] what: evidence`. Without --gpu
the programs run on the CPU stand-ins (build/fakecuda), which must pass every
check: the stand-in's assumptions are exactly what a GPU run confirms or not.
SP_BUILD picks the build folder; SP_PRELOAD_FIRST goes before the library in
LD_PRELOAD (the sanitizer runtime under make test-asan).

Usage: gpu_checklist.py OUTDIR [--gpu]. Exit 0 however the checks went (the
output is evidence for a person); 1 when a program could not be run at all."""
import glob
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.abspath(os.environ.get("SP_BUILD", os.path.join(ROOT, "build")))   # programs run from their output folders


def run(out, name, args, gpu, env=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    preload = " ".join(filter(None, [os.environ.get("SP_PRELOAD_FIRST"), os.path.join(B, "libstepprof.so")]))
    # cupti_api_filter none: the checks read the driver query records nested in runtime calls.
    e = dict(os.environ, LD_PRELOAD=preload, PROF_OUTPUT_DIR=d, PROF_CUPTI_API_FILTER="none", **(env or {}))
    if not gpu:
        e["LD_LIBRARY_PATH"] = os.path.join(B, "fakecuda")
    p = subprocess.run([os.path.join(B, "programs", name), *args], env=e, cwd=d, capture_output=True, text=True,
                       timeout=300)
    paths = sorted(glob.glob(os.path.join(d, "*.pt.trace.json*")))
    if p.returncode != 0 or not paths:
        print(f"- [n/a] {name}: exit {p.returncode}, traces {len(paths)}; stderr: {p.stderr.strip()[-300:]}")
        return None
    with (gzip.open(paths[0], "rt") if paths[0].endswith(".gz") else open(paths[0])) as f:
        return json.load(f)


def line(ok, what, evidence):
    """ok None: nothing to check here."""
    print(f"- [{'n/a' if ok is None else 'ok' if ok else 'DIFFERS'}] {what}: {evidence}")


def api(t, cat):
    return [e for e in t["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


def check_train(t):
    rt = api(t, "cuda_runtime")
    host = [e for e in rt if e["args"].get("stepprof_source") != "cupti"]
    cupti_only = [e for e in rt if e["args"].get("stepprof_source") == "cupti"]
    host_tids = {e["tid"] for e in host}
    strange = {e["tid"] for e in cupti_only} - host_tids
    line(not strange, "CUPTI API records carry gettid() (CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)",
         f"host threads {sorted(host_tids)}, CUPTI-only call threads {sorted({e['tid'] for e in cupti_only})}")
    dup = {e["name"] for e in cupti_only} & {e["name"] for e in host}
    line(not dup, "every intercepted call paired with its own CUPTI record (no call drawn twice)",
         f"names drawn twice: {sorted(dup) or 'none'}")
    launches = {e["args"]["correlation"]: e for e in host if e["name"].endswith("LaunchKernel")}
    lags = [k["ts"] - launches[k["args"]["correlation"]]["ts"]
            for k in api(t, "kernel") if k["args"]["correlation"] in launches]
    line(bool(lags) and min(lags) >= 0, "clock offset: every kernel starts after its launch call (host clock)",
         f"{len(lags)} kernels, launch->start min {min(lags) if lags else '-'} us, max {max(lags) if lags else '-'} us")
    ends = t.get("stepprof_launch_ends", {})
    durs = sorted(e["dur"] for e in launches.values())
    line(ends.get("none") == 0 and ends.get("cupti") == len(launches) and durs and durs[0] > 0,
         "launch_durations auto: each launch timed by one clock read, its duration CUPTI's record's",
         f"stepprof_launch_ends {ends}, {len(launches)} launches, dur min {durs[0] if durs else '-'} us, "
         f"median {durs[len(durs) // 2] if durs else '-'} us")
    drv = api(t, "cuda_driver")
    by_id = {e["args"]["correlation"]: e for e in host}
    nested = [(by_id[e["args"]["stepprof_runtime_correlation"]], e) for e in drv
              if e["args"].get("stepprof_runtime_correlation") in by_id]
    outside = [e["name"] for o, e in nested if not (o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"])]
    line(not outside if nested else None, "a driver call CUPTI saw inside an intercepted call is drawn inside it",
         f"{len(nested)} nested driver records, outside their call: {outside[:3] or 'none'}")
    rt_ids = {e["args"]["correlation"] for e in rt}
    # A driver call drawn nested in its intercepted runtime call keeps its id as stepprof_runtime_correlation.
    shared = sum(1 for e in drv if e["args"].get("correlation", e["args"].get("stepprof_runtime_correlation")) in rt_ids)
    line(not drv or shared == len(drv) or shared == 0,
         "runtime vs driver correlation: a nested driver call shares its runtime call's id (stand-in: shared)",
         f"{len(drv)} driver records, {shared} share a runtime call's id")
    # CUDA 13.0 on an H200: cuLibraryLoadData just before the first launch, outside every intercepted
    # call (inside the <<<>>> stub's kernel lookup); the stand-in: cuModuleLoadDataEx in the first cudaMalloc.
    loads = [e for e in drv if e["name"].startswith(("cuModuleLoadData", "cuLibraryLoadData"))]
    launch = min((e for e in host if "LaunchKernel" in e["name"]), key=lambda e: e["ts"], default=None)
    before = [e for e in loads if launch and e["ts"] <= launch["ts"] + launch["dur"]]
    where = [next((h["name"] for h in host if h["tid"] == e["tid"] and h["ts"] <= e["ts"] <= h["ts"] + h["dur"]),
                  "no intercepted call") for e in before]
    line(bool(before), "lazy loading: a module or library load recorded by the end of the first launch",
         f"load records {[e['name'] for e in loads][:3]}, by the first launch: {len(before)}, inside: {where[:3]}")


def check_peer(t, calls_json, gpu):
    peers = [e for e in api(t, "gpu_memcpy") if "PtoP" in e["name"]]
    ok_calls = [c for c in json.load(open(calls_json)) if c["name"].startswith("cudaMemcpyPeer") and c["ret"] == 0]
    # calls_all copies device 0 -> 0: on a GPU that is a DtoD MEMCPY (H200, CUDA 13.0); the stand-in still
    # makes it MEMCPY2 PtoP (tests/fakecuda/README.md, remaining differences).
    if len(ok_calls) < 2 or (gpu and all(c.get("dstDevice") == c.get("srcDevice") for c in ok_calls)):
        print("- [n/a] peer copies as MEMCPY2: needs two devices (here cudaMemcpyPeer failed or copied within one)")
        return
    line(len(peers) == 2, "peer copies (cudaMemcpyPeer, cudaMemcpyPeerAsync) arrive as MEMCPY2 only",
         f"{len(peers)} PtoP gpu_memcpy events")


def check_syncs(t):
    """CUPTI's sync records carry a context id and no device: each is drawn on the device its
    context's work (kernels, sets: they carry both) showed, a stream sync on its stream's lane."""
    lanes = {}
    for e in api(t, "kernel") + api(t, "gpu_memset"):
        lanes.setdefault(e["args"]["context"], set()).add((e["pid"], e["tid"]))
    if len({pid for ls in lanes.values() for pid, _ in ls}) < 2:
        print("- [n/a] syncs on their context's device: needs two devices (sync_devices' work ran on one)")
        return
    syncs = api(t, "cuda_sync")
    wrong = [s for s in syncs if s["pid"] not in {p for p, _ in lanes.get(s["args"]["context"], ())} or
             (s["name"] == "Stream Sync" and (s["pid"], s["tid"]) not in lanes[s["args"]["context"]])]
    line(syncs and not wrong, "sync records (a context id, no device) drawn on their context's device, "
         "stream syncs on the stream's lane", f"{len(syncs)} syncs on pids {sorted({s['pid'] for s in syncs})}, "
         f"{len(wrong)} elsewhere: {[(s['name'], s['pid'], s['tid']) for s in wrong][:3]}")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 1
    out, gpu = sys.argv[1], "--gpu" in sys.argv[2:]
    print(f"checks on {'the GPU' if gpu else 'the CPU stand-ins (each must be ok)'}:")
    t = run(out, "train", [], gpu, {"STEPS": "3"})
    if t:
        check_train(t)
    c = run(out, "calls_all", [os.path.join(out, "calls.json")], gpu, None if gpu else {"FAKECUDA_DEVICES": "2"})
    if c:
        check_peer(c, os.path.join(out, "calls.json"), gpu)
    s = run(out, "sync_devices", [], gpu, None if gpu else {"FAKECUDA_DEVICES": "2"})
    if s:
        check_syncs(s)
    return 0 if t and c and s else 1


if __name__ == "__main__":
    sys.exit(main())
