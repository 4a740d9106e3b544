#!/bin/sh
# scripts/gpu-validate.sh — real-GPU evidence for stepprof, printed as markdown
# for docs/gpu-validation.md. On a machine with an NVIDIA GPU, CUDA 13 and
# PyTorch it runs: (1) train.cu built with -cudart shared and with the default
# static cudart under LD_PRELOAD, and the CUPTI checklist (gpu_checklist.py);
# (2-3) unmodified PyTorch loops (a CNN and a small transformer, 40 steps, no
# NVTX, no profiler code: the torch marker counts optimizer steps) under
# stepprof and under torch.profiler with the same schedule, compared by
# gpu_compare.py (kernels and GPU time per step, missing kernels, per aten
# operator the calls, kernels and CUDA time), plus with_stack, the hand-over
# to the program's own torch.profiler, back-to-back windows (gpu_extra.py) and
# step-time overhead; (4) a CuPy RawKernel (driver-API launch); (5) the driver
# records the runtime makes; (5b) the driver-API test programs (plain and
# per-thread builds) bare and preloaded. GV_STEPS / GV_WAIT / GV_WARMUP / GV_ACTIVE change
# the loops' schedule; DEVICE=cpu runs the loops on the CPU (a dry run of the
# script); (6) the launch hot path on the host CPU with the stand-in (issue
# 10); (7) DDP ranks started by torch.multiprocessing.spawn; (8) every launch
# timed by one clock read ended by CUPTI's record, in every trace. Without a GPU it
# runs what a CPU can check and says what it skipped.
# The traces it leaves in OUTDIR feed gpu_clients.py (HTA, TensorBoard) on the
# CPU machine.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${SP_BUILD:-$ROOT/build}" && pwd) || exit 1   # absolute: gpu_checklist.py runs programs from their output folders
OUT=${1:-$(mktemp -d /tmp/stepprof-gpu.XXXXXX)}
PY=${PYTHON:-python3}
LIB="$B/libstepprof.so"
# train.cu's checklist reads every CUPTI record (driver records inside runtime calls are mostly
# cuKernelGetName / cuDeviceGetAttribute, queries the default cupti_api_filter leaves out); the
# PyTorch loops keep the default, as compared with torch.profiler's traces.
SCHED="PROF_MARKER=nvtx:train_step PROF_WAIT=5 PROF_WARMUP=2 PROF_ACTIVE=5 PROF_REPEAT=1 PROF_CUPTI_API_FILTER=none"
W=${GV_WAIT:-5} U=${GV_WARMUP:-2} A=${GV_ACTIVE:-10} N=${GV_STEPS:-40}  # the PyTorch loops' schedule
SCHED_TORCH="PROF_WAIT=$W PROF_WARMUP=$U PROF_ACTIVE=$A PROF_REPEAT=1 PROF_RECORD_SHAPES=1"
STEPS_ENV="STEPS=$N WAIT=$W WARMUP=$U ACTIVE=$A"; FIRST=$((W + U)); LAST=$((W + U + A - 1))
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
if [ -z "${DEVICE:-}" ] && { [ -z "$GPU" ] || ! $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; }; then
    echo "sections 2-8 skipped: no GPU or no PyTorch with CUDA here. CPU check of the comparison script on two stepprof traces:"
    T=$(ls "$OUT"/train/*.pt.trace.json 2>/dev/null | head -1)
    [ -n "$T" ] && $PY "$ROOT/scripts/gpu_compare.py" "$T" "$T" | tail -3
    exit 0
fi
LOOP="$ROOT/scripts/gpu_torch_loop.py"
X="$PY $ROOT/scripts/gpu_extra.py"
T=timeout; LIM=150
for M in cnn transformer; do
    D="$OUT/$M"; mkdir -p "$D"
    echo; echo "### $M (steps $FIRST..$LAST recorded by both)"
    env MODEL=$M $STEPS_ENV $T $LIM $PY "$LOOP" plain "$D/plain.json" || echo "plain run failed"
    env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/sp" $SCHED_TORCH $T $LIM $PY "$LOOP" plain \
        "$D/stepprof.json" 2>"$D/sp.err" || echo "stepprof run failed"
    grep stepprof "$D/sp.err" | head -5 | sed 's/^/    /'
    env MODEL=$M $STEPS_ENV TORCH_TRACE_DIR="$D/torch" $T $LIM $PY "$LOOP" torch "$D/torch.json" 2>"$D/torch.err" \
        || echo "torch.profiler run failed"
    trace_summary "$D/sp"
    echo
    $PY "$ROOT/scripts/gpu_compare.py" $(ls "$D"/sp/*.pt.trace.json* | head -1) $(ls "$D"/torch/*.pt.trace.json* | head -1)
    echo
    if [ $M = cnn ]; then
        echo "#### with_stack (items 9, 11)"
        env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/sp_stack" PROF_WITH_STACK=1 $SCHED_TORCH \
            $T $LIM $PY "$LOOP" plain "$D/stepprof_stack.json" 2>"$D/sp_stack.err" || echo "stepprof with_stack run failed"
        env MODEL=$M $STEPS_ENV WITH_STACK=1 TORCH_TRACE_DIR="$D/torch_stack" $T $LIM $PY "$LOOP" torch \
            "$D/torch_stack.json" 2>"$D/torch_stack.err" || echo "torch.profiler with_stack run failed"
        $X stack $(ls "$D"/sp_stack/*.pt.trace.json* | head -1) $(ls "$D"/torch_stack/*.pt.trace.json* | head -1)
        echo "#### hand-over to the program's torch.profiler (item 8)"
        env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/ho_sp" TORCH_TRACE_DIR="$D/ho_torch" \
            $T $LIM $PY "$LOOP" torch "$D/handover.json" 2>"$D/ho.err" || echo "hand-over run failed"
        $X handover "$D/ho.err" "$D/ho_torch" "$D/torch"
        echo "#### back-to-back windows, no per-step sync (item 7)"
        env MODEL=$M STEPS=12 NOSYNC=1 LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/b2b" PROF_WAIT=0 PROF_WARMUP=1 \
            PROF_ACTIVE=1 PROF_REPEAT=0 $T $LIM $PY "$LOOP" plain "$D/b2b.json" 2>"$D/b2b.err" || echo "b2b run failed"
        $X windows "$D/b2b"
    fi
    if [ $M = cnn ]; then  # where the overhead goes: never recording (torch hooks, interposers), CUPTI off
        env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/idle" PROF_WAIT=1000 PROF_ACTIVE=1 \
            $T $LIM $PY "$LOOP" plain "$D/stepprof_idle.json" 2>/dev/null || echo "idle run failed"
        env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/nocupti" PROF_CUPTI=false $SCHED_TORCH \
            $T $LIM $PY "$LOOP" plain "$D/stepprof_nocupti.json" 2>/dev/null || echo "CUPTI-off run failed"
        env MODEL=$M $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/noshapes" PROF_WAIT=$W PROF_WARMUP=$U \
            PROF_ACTIVE=$A PROF_REPEAT=1 $T $LIM $PY "$LOOP" plain "$D/stepprof_noshapes.json" 2>/dev/null \
            || echo "no-shapes run failed"
    fi
    echo "#### step time (medians; one process each)"
    $X steptimes "$D" $FIRST $LAST
done
echo
echo "### Step-time overhead: CNN launch-bound (batch 64) and GPU-bound (batch 1024), two interleaved rounds"
for BS in 64 1024; do for RND in 1 2; do
    D="$OUT/overhead_b${BS}_r$RND"; mkdir -p "$D"
    env MODEL=cnn BATCH=$BS $STEPS_ENV $T $LIM $PY "$LOOP" plain "$D/plain.json" || echo "plain run failed"
    env MODEL=cnn BATCH=$BS $STEPS_ENV LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/sp" $SCHED_TORCH $T $LIM $PY "$LOOP" \
        plain "$D/stepprof.json" 2>/dev/null || echo "stepprof run failed"
    env MODEL=cnn BATCH=$BS $STEPS_ENV TORCH_TRACE_DIR="$D/torch" $T $LIM $PY "$LOOP" torch "$D/torch.json" \
        2>/dev/null || echo "torch.profiler run failed"
    echo "batch $BS, round $RND:"; $X steptimes "$D" $FIRST $LAST
    rm -rf "$D/sp" "$D/torch"
done; done
echo
echo "## 4. driver-API launch (CuPy RawKernel)"
env LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$OUT/cupy" $T $LIM $PY "$ROOT/scripts/gpu_cupy_launch.py" 20 \
    >"$OUT/cupy.out" 2>"$OUT/cupy.err"; echo "- exit $?: $(cat "$OUT/cupy.out")"
grep stepprof "$OUT/cupy.err" | head -3 | sed 's/^/    /'
C=$(ls "$OUT"/cupy/*.pt.trace.json* 2>/dev/null | head -1)
[ -n "$C" ] && $X driver "$C" sp_scale 20
echo
echo "## 5. driver records made by the runtime (item 6), train.cu"
for t in "$OUT"/train/*.pt.trace.json* "$OUT"/checklist/train/*.pt.trace.json*; do [ -f "$t" ] && $X nested "$t"; done
echo
echo "## 5b. driver-API programs on the real driver (drv_work.c, drv_copies.c, drv_versions.c; per-thread builds)"
echo "Bare and preloaded (whole run recorded): same output and status, kernels = launches, the calls drawn."
mkdir -p "$OUT/drv"; nm -D --defined-only "$LIB" | awk '$3 ~ /^cu/ {print $3}' >"$OUT/drv/exports.txt"
for P in "drv_linked direct more" "drv_linked proc more" "drv_linked dlopen more" "drv_static dlopen more" \
         "drv_linked_pt direct more" "drv_static_pt dlopen more" "plugin_host drv" "drv_copies direct" \
         "drv_copies proc" "drv_copies dlsym" "drv_copies_pt direct" "drv_copies_pt proc" "drv_copies_pt dlsym" \
         "drv_versions"; do
    set -- $P; E="$B/programs/$1"; D="$OUT/drv/$(echo "$P" | tr ' ' _)"; rm -rf "$D"; mkdir -p "$D"
    [ -x "$E" ] || { echo "- $P: not built"; continue; }
    shift; LLP=""; [ -z "$GPU" ] && LLP="$B/fakecuda"   # no GPU (DEVICE=cpu): the stand-in
    env ${LLP:+LD_LIBRARY_PATH=$LLP} $T 60 "$E" "$@" >"$D/bare.out" 2>"$D/bare.err"; echo $? >"$D/bare.rc"
    env ${LLP:+LD_LIBRARY_PATH=$LLP} LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/sp" $T 60 "$E" "$@" >"$D/sp.out" \
        2>"$D/sp.err"; echo $? >"$D/sp.rc"
    $X drvprog "$P" "$D" "$OUT/drv/exports.txt"
done
echo
echo "## 6. hot path on this host's CPU (issue 10: the stand-in, no-op runtime, CUPTI off)"
echo "The CPU VM cannot resolve the launch path's targets (one rdtsc costs ~15 ns there); this host can."
if [ -x "$B/programs/launch_bench" ] && [ -f "$B/fakecuda/libcudart.so.13" ]; then
    BENCH_HOTPATH_ONLY=1 BENCH_ROUNDS=${GV_BENCH_ROUNDS:-30} BENCH_CALLS=${GV_BENCH_CALLS:-3000000} SP_BUILD="$B" \
        sh "$ROOT/scripts/bench.sh" 2>&1 | sed 's/^/    /'
else
    echo "skipped: $B/programs/launch_bench or the stand-in was not built"
fi
echo
echo "## 7. DDP ranks started by torch.multiprocessing.spawn (gloo, both on GPU 0)"
echo "Each rank is dormant until its first optimizer step, activated before it by its CUDA calls."
D="$OUT/spawn"; rm -rf "$D"; mkdir -p "$D"
ON_GPU=0; [ -n "$GPU" ] && [ "${DEVICE:-cuda}" != cpu ] && ON_GPU=1
env LD_PRELOAD="$LIB" PROF_OUTPUT_DIR="$D/sp" $SCHED_TORCH $T $LIM $PY "$ROOT/tests/programs/torch_spawn.py" $N \
    spawn "$D" $([ $ON_GPU = 1 ] && echo cuda) >"$D/out" 2>"$D/err"; echo "- exit $?: $(tr '\n' ' ' <"$D/out")"
grep stepprof "$D/err" | head -4 | sed 's/^/    /'
$X spawned "$D/sp" $FIRST $LAST $ON_GPU
echo
echo "## 8. launch durations from CUPTI's records (launch_durations: auto), every trace above"
$X ends "$OUT"
