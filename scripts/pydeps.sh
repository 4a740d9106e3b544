#!/bin/sh
# scripts/pydeps.sh — installs, pinned, the Python packages the tests run as
# real clients of stepprof's output when they are missing: PyTorch (the PyPI
# CUDA build; it runs CPU programs without a GPU and its NVTX calls need no
# driver), Holistic Trace Analysis, the TensorBoard profiler plugin, and HF
# accelerate and DeepSpeed (their launchers must stay inert). Run by
# `make test` / `make demo` through scripts/deps.sh.
set -u
PYTHON=${PYTHON:-python3}
PINS="torch==2.15.0 holistictraceanalysis==0.5.0 torch-tb-profiler==0.4.3 psutil==7.2.2 pandas==3.1.1 numpy==2.4.6
      accelerate==1.15.0 huggingface_hub==2.4.0 safetensors==0.8.0"
# HTA 0.5.0's critical path needs pandas < 3 (pandas 3 refuses drop(axis=..., columns=...)).
# tests/test_clients.py runs HTA with this private copy first on PYTHONPATH; the pins above
# stay what every other Python user here gets.
HTA_PY=${HTA_PY:-$(dirname "$0")/../build/pydeps/hta}
if ! PYTHONPATH="$HTA_PY" "$PYTHON" -c 'import pandas, sys; sys.exit(pandas.__version__ != "2.3.3")' 2>/dev/null; then
    echo "stepprof deps: pip installing pandas==2.3.3 for HTA into $HTA_PY"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
        --target "$HTA_PY" pandas==2.3.3 pytz==2025.2 || {
        echo "stepprof deps: pip install pandas==2.3.3 (for HTA) failed" >&2; exit 1; }
fi
if ! "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {"torch": "2.15.0", "holistictraceanalysis": "0.5.0", "torch-tb-profiler": "0.4.3", "psutil": "7.2.2",
        "accelerate": "1.15.0"}
sys.exit(any(not m.version(n).startswith(v) for n, v in want.items()))
PY
then
    echo "stepprof deps: pip installing $PINS"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore $PINS || {
        echo "stepprof deps: pip install $PINS failed" >&2; exit 1; }
fi
# DeepSpeed's launcher (tests/test_multirank.py: it must stay inert), in a private copy the tests put
# on PYTHONPATH: built from its sdist against the torch above (no build isolation: its setup.py
# imports torch; no ops are compiled), with the packages its import needs.
DS_PY=${DS_PY:-$(dirname "$0")/../build/pydeps/deepspeed}
DS_PINS="deepspeed==0.19.8 hjson==3.1.0 py-cpuinfo==9.0.0 ninja==1.13.2 msgpack==1.2.4 einops==0.8.2 nvidia-ml-py==13.615.71"
if ! PYTHONPATH="$DS_PY" "$PYTHON" -c 'import importlib.metadata as m, sys; sys.exit(m.version("deepspeed") != "0.19.8")' \
        2>/dev/null; then
    echo "stepprof deps: pip installing $DS_PINS into $DS_PY"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-build-isolation \
        --target "$DS_PY" $DS_PINS || { echo "stepprof deps: pip install $DS_PINS failed" >&2; exit 1; }
fi
exit 0
