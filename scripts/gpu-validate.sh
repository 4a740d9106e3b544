#!/bin/sh
# scripts/gpu-validate.sh — real-GPU evidence for stepprof, printed as markdown
# for docs/gpu-validation.md. On a machine with an NVIDIA GPU, CUDA 13 and
# PyTorch it runs: (1) train.cu built with -cudart shared and with the default
# static cudart under LD_PRELOAD; (2) an unmodified PyTorch CNN loop (30
# steps, no NVTX, no profiler code: the torch marker counts optimizer steps)
# under stepprof and (3) the same loop under torch.profiler with the same
# schedule, then compares kernels per step, GPU kernel time per step, top
# kernels, step times, missing kernels, and per aten operator the calls,
# kernels launched and CUDA time. Without a GPU it runs what a CPU
# can check (build present, train on the stand-in, the comparison script on two
# stepprof traces) and says what it skipped.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="${SP_BUILD:-$ROOT/build}"
OUT=${1:-$(mktemp -d /tmp/stepprof-gpu.XXXXXX)}
PY=${PYTHON:-python3}
LIB="$B/libstepprof.so"
SCHED="PROF_MARKER=nvtx:train_step PROF_WAIT=5 PROF_WARMUP=2 PROF_ACTIVE=5 PROF_REPEAT=1"
SCHED_TORCH="PROF_WAIT=5 PROF_WARMUP=2 PROF_ACTIVE=5 PROF_REPEAT=1 PROF_RECORD_SHAPES=1"
mkdir -p "$OUT"
echo "# stepprof GPU validation"
echo
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(hostname); output: $OUT"
GPU=$(nvidia-smi -L 2>/dev/null | head -1)
echo "device: ${GPU:-none (no nvidia-smi / no GPU)}"
[ -f "$LIB" ] || { echo "missing $LIB: run make first (or carry build/)"; exit 1; }

trace_summary() { # dir -> one line per trace: kernels, runtime calls, steps, GPU source
    for t in "$1"/*.pt.trace.json*; do
        [ -f "$t" ] || { echo "  no trace written in $1"; return 1; }
        $PY - "$t" <<'PYEOF'
import gzip, json, sys
p = sys.argv[1]
t = json.load(gzip.open(p, "rt") if p.endswith(".gz") else open(p))
ev = t["traceEvents"]
cat = lambda c: sum(1 for e in ev if e.get("cat") == c)
steps = sorted(int(e["name"].split("#")[1]) for e in ev if e.get("name", "").startswith("ProfilerStep#"))
print(f"  {p.rsplit('/', 1)[-1]}: kernels {cat('kernel')}, memcpy {cat('gpu_memcpy')}, runtime calls {cat('cuda_runtime')}, "
      f"flows {sum(1 for e in ev if e.get('ph') == 's')}, steps {steps[0] if steps else '-'}..{steps[-1] if steps else '-'}, gpu source {t.get('stepprof_gpu_source')}, "
      f"devices {[d.get('name') for d in t.get('deviceProperties', [])]}, dropped {t.get('stepprof_dropped_events')}/{t.get('stepprof_cupti_dropped_records')}")
PYEOF
    done
}

echo
echo "## 1. train.cu (CUDA 13 <<<>>> launches)"
for v in train train_static; do
    [ -x "$B/programs/$v" ] || { echo "- $v: not built (needs nvcc)"; continue; }
    D="$OUT/$v"; rm -rf "$D"
    if [ -n "$GPU" ]; then
        env LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D" $SCHED STEPS=20 "$B/programs/$v" >"$OUT/$v.out" 2>"$OUT/$v.err"
    else
        env LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$B/fakecuda" PROF_OUTPUT_DIR="$D" $SCHED STEPS=20 "$B/programs/$v" \
            >"$OUT/$v.out" 2>"$OUT/$v.err"
    fi
    echo "- $v: exit $?; stepprof said:"; sed 's/^/    /' "$OUT/$v.err" | grep stepprof | head -5
    trace_summary "$D"
done

echo
echo "## 1b. CUPTI: what to confirm first (docs/gpu-validation.md)"
$PY "$ROOT/scripts/gpu_checklist.py" "$OUT/checklist" ${GPU:+--gpu}

echo
echo "## 2-3. PyTorch loop: stepprof vs torch.profiler"
if [ -z "$GPU" ] || ! $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "skipped: no GPU or no PyTorch with CUDA here. CPU check of the comparison script on two stepprof traces:"
    T=$(ls "$OUT"/train/*.pt.trace.json 2>/dev/null | head -1)
    [ -n "$T" ] && $PY "$ROOT/scripts/gpu_compare.py" "$T" "$T" | tail -3
    exit 0
fi
LOOP="$ROOT/scripts/gpu_torch_loop.py"
$PY "$LOOP" plain "$OUT/plain.json" || echo "plain run failed"
env LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$OUT/sp" $SCHED_TORCH $PY "$LOOP" plain "$OUT/stepprof.json" 2>"$OUT/sp.err" \
    || echo "stepprof run failed"
grep stepprof "$OUT/sp.err" | head -5 | sed 's/^/    /'
TORCH_TRACE_DIR="$OUT/torch" $PY "$LOOP" torch "$OUT/torch.json" || echo "torch.profiler run failed"
trace_summary "$OUT/sp"
echo
SPT=$(ls "$OUT"/sp/*.pt.trace.json* | head -1)
THT=$(ls "$OUT"/torch/*.pt.trace.json* | head -1)
$PY "$ROOT/scripts/gpu_compare.py" "$SPT" "$THT"
echo
$PY - "$OUT" <<'PYEOF'
import json, statistics, sys
d = sys.argv[1]
m = {k: statistics.median(json.load(open(f"{d}/{k}.json"))["step_ms"][8:]) for k in ("plain", "stepprof", "torch")}
print(f"median step time (steps 8+, ms): none {m['plain']:.3f}, stepprof {m['stepprof']:.3f} "
      f"(x{m['stepprof'] / m['plain']:.3f}), torch.profiler {m['torch']:.3f} (x{m['torch'] / m['plain']:.3f})")
PYEOF
