#!/bin/sh
# scripts/pydeps.sh — installs, pinned, the Python packages the tests run as
# real clients of stepprof's output when they are missing: PyTorch (the PyPI
# CUDA build; it runs CPU programs without a GPU and its NVTX calls need no
# driver), Holistic Trace Analysis and the TensorBoard profiler plugin. Run by
# `make test` / `make demo` through scripts/deps.sh.
set -u
PYTHON=${PYTHON:-python3}
PINS="torch==2.15.0 holistictraceanalysis==0.5.0 torch-tb-profiler==0.4.3 psutil==7.2.2 pandas==3.1.1 numpy==2.4.6"
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
if "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {"torch": "2.15.0", "holistictraceanalysis": "0.5.0", "torch-tb-profiler": "0.4.3", "psutil": "7.2.2"}
sys.exit(any(not m.version(n).startswith(v) for n, v in want.items()))
PY
then
    exit 0
fi
echo "stepprof deps: pip installing $PINS"
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore $PINS || {
    echo "stepprof deps: pip install $PINS failed" >&2; exit 1; }
exit 0
