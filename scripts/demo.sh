#!/bin/sh
# scripts/demo.sh — the main job of `make demo`: profiles the sample training
# program on the CPU stand-in for CUDA and says where the trace went and how to
# open it. Uses the nvcc-built train when available, else the plain-C one.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B="${SP_BUILD:-$ROOT/build}"
PROG="$B/programs/train"
[ -x "$PROG" ] || PROG="$B/programs/train_c"
OUT="$ROOT/profiler_traces"
echo "== running $PROG (20 steps) under LD_PRELOAD=$B/libstepprof.so on the CPU stand-in (build/fakecuda)"
LD_PRELOAD="$B/libstepprof.so" LD_LIBRARY_PATH="$B/fakecuda" PROF_OUTPUT_DIR="$OUT" \
    PROF_MARKER="${PROF_MARKER:-nvtx:train_step}" PROF_WAIT="${PROF_WAIT:-2}" PROF_WARMUP="${PROF_WARMUP:-1}" \
    PROF_ACTIVE="${PROF_ACTIVE:-3}" PROF_REPEAT="${PROF_REPEAT:-2}" STEPS=20 "$PROG" | tail -3
echo
echo "== files written to $OUT:"
ls -1t "$OUT" | head -20
echo
echo "Open a trace: drag a .pt.trace.json file into https://ui.perfetto.dev or chrome://tracing,"
echo "or: tensorboard --logdir $OUT  (PyTorch Profiler plugin)."
