#!/usr/bin/env python3
"""scripts/gpu_clients.py — HTA and the TensorBoard profiler plugin on the GPU
traces of gpu-validate.sh, stepprof's beside torch.profiler's of the same loop
(issue 17: run on the CPU machine on the traces copied back, since neither
package is on the GPU image). Uses tests/lib/clients.py (the released clients,
HTA's pandas from build/pydeps/hta). Prints markdown: per client and trace, the
analyses that failed, and the figures both should agree on (kernel time,
kernels per name, steps, views).
Usage: gpu_clients.py GV_OUTDIR [MODEL...] (default cnn transformer)."""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENTS = os.path.join(ROOT, "tests", "lib", "clients.py")


def client(what, arg):
    tmp = tempfile.mkdtemp(prefix="sp-gpu-clients-")   # the clients' own temporaries, removed after
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "pydeps", "hta") + os.pathsep +
               os.environ.get("PYTHONPATH", ""), HTA_DISABLE_NS_ROUNDING="1", TMPDIR=tmp)
    try:
        p = subprocess.run([sys.executable, CLIENTS, what, arg], capture_output=True, text=True, timeout=600,
                           env=env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = p.stdout.split("\nCLIENTS-JSON ", 1)
    if p.returncode != 0 or len(out) != 2:
        return {"error": (p.stdout + p.stderr)[-500:]}
    return json.loads(out[1])


def errors(res):
    return sorted(k for k, v in res.items() if isinstance(v, dict) and "error" in v)


def one_trace_dir(trace):
    d = tempfile.mkdtemp(prefix="sp-gpu-clients-")
    shutil.copy(trace, d)
    return d


def summary(label, trace):
    d = one_trace_dir(trace)
    try:
        h, t = client("hta", d), client("tb", trace)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    kb = h.get("kernel_breakdown")
    per = collections.Counter()
    if isinstance(kb, list):
        for _, _, name, us in kb:
            per[name] += us
    temporal = h.get("temporal")
    tr = temporal[0][1:] if isinstance(temporal, list) and temporal else None  # idle, compute, non-compute, span
    tb_k = sum(r[1] for r in t.get("kernels", [])) if isinstance(t.get("kernels"), list) else None
    print(f"- {label}: HTA failed analyses {errors(h) or 'none'}; temporal breakdown "
          f"(idle / compute / non-compute / span, us) {tr and [round(x, 1) for x in tr]}; kernel breakdown {sum(per.values()):.1f} us over {len(per)} kernel names. TensorBoard: "
          f"errors {t.get('errors') or errors(t) or 'none'}, steps {t.get('steps')}, has_kernel {t.get('has_kernel')}, "
          f"kernel table {tb_k} calls, views {t.get('views')}")
    return per


def main():
    out = sys.argv[1]
    for m in sys.argv[2:] or ["cnn", "transformer"]:
        sp = sorted(glob.glob(os.path.join(out, m, "sp", "*.pt.trace.json*")))
        th = sorted(glob.glob(os.path.join(out, m, "torch", "*.pt.trace.json*")))
        if not sp or not th:
            print(f"- {m}: traces missing")
            continue
        print(f"\n### {m}")
        a, b = summary("stepprof", sp[0]), summary("torch.profiler", th[0])
        worst = max(((abs(a[n] - b[n]) / max(b[n], 1.0), n) for n in set(a) | set(b)), default=(0.0, "-"))
        print(f"- HTA kernel breakdown, stepprof vs torch.profiler: names only in stepprof "
              f"{len(set(a) - set(b))}, only in torch {len(set(b) - set(a))}; largest per-name time difference "
              f"{worst[0] * 100:.1f}% ({worst[1][:60]})")


if __name__ == "__main__":
    main()
