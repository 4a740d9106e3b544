#!/bin/sh
# scripts/pydeps.sh — installs, pinned, the Python packages the tests run as
# real clients of stepprof's output when they are missing: PyTorch (the PyPI
# CUDA build; it runs CPU programs without a GPU and its NVTX calls need no
# driver), Holistic Trace Analysis, the TensorBoard profiler plugin, HF
# accelerate and DeepSpeed (their launchers must stay inert) and HF
# transformers (its Trainer's steps and optimizer ops). Run by
# `make test` / `make demo` through scripts/deps.sh.
set -u
PYTHON=${PYTHON:-python3}
PINS="torch==2.15.0 holistictraceanalysis==0.5.0 torch-tb-profiler==0.4.3 psutil==7.2.2 pandas==3.1.1 numpy==2.4.6 accelerate==1.15.0 huggingface_hub==2.4.0 safetensors==0.8.0 pydantic==2.13.4 setuptools==84.2.1 transformers==5.24.0 tokenizers==0.23.3"
# HTA 0.5.0's critical path needs pandas < 3 (pandas 3 refuses drop(axis=..., columns=...)).
# tests/test_clients.py runs HTA with this private copy first on PYTHONPATH; the pins above
# stay what every other Python user here gets.
HTA_PY=${HTA_PY:-$(dirname "$0")/../build/pydeps/hta}
DS_PY=${DS_PY:-$(dirname "$0")/../build/pydeps/deepspeed}   # DeepSpeed and its comm op: below
DS_EXT=$(dirname "$DS_PY")/torch_extensions
if ! PYTHONPATH="$HTA_PY" "$PYTHON" -c 'import pandas, sys; sys.exit(pandas.__version__ != "2.3.3")' 2>/dev/null; then
    echo "stepprof deps: pip installing pandas==2.3.3 for HTA into $HTA_PY"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps \
        --upgrade --target "$HTA_PY" pandas==2.3.3 pytz==2025.2 || {
        echo "stepprof deps: pip install pandas==2.3.3 (for HTA) failed" >&2; exit 1; }
fi
if ! "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {"torch": "2.15.0", "holistictraceanalysis": "0.5.0", "torch-tb-profiler": "0.4.3", "psutil": "7.2.2",
        "accelerate": "1.15.0", "huggingface_hub": "2.4.0", "safetensors": "0.8.0", "pydantic": "2.13.4",
        "setuptools": "84.2.1", "transformers": "5.24.0", "tokenizers": "0.23.3"}
sys.exit(any(not m.version(n).startswith(v) for n, v in want.items()))
PY
then
    echo "stepprof deps: pip installing $PINS"
    rm -rf "$DS_EXT"   # DeepSpeed's comm op was built against the torch being replaced
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore $PINS || {
        echo "stepprof deps: pip install $PINS failed" >&2; exit 1; }
fi
# DeepSpeed (tests/test_multirank.py: its launchers stay inert; tests/test_torch.py: its engine's
# model step is one step), in a private copy the tests put on PYTHONPATH: built from its sdist
# against the torch above (no build isolation: its setup.py imports torch; pydantic, a dependency,
# is pinned above), with the packages its import needs, and the CPU comm op it compiles at its first
# run built here once (g++, ninja: deps.sh) into a cache the tests use.
DS_PINS="deepspeed==0.19.8 hjson==3.1.0 py-cpuinfo==9.0.0 ninja==1.13.2 msgpack==1.2.4 einops==0.8.2 nvidia-ml-py==13.615.71"
if ! DS_ACCELERATOR=cpu PYTHONPATH="$DS_PY" "$PYTHON" -c 'import importlib.metadata as m, sys, deepspeed
sys.exit(m.version("deepspeed") != "0.19.8")' >/dev/null 2>&1; then
    rm -rf "$DS_EXT"   # its comm op was built against what is being replaced
    echo "stepprof deps: pip installing $DS_PINS into $DS_PY"
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-build-isolation \
        --upgrade --target "$DS_PY" $DS_PINS || { echo "stepprof deps: pip install $DS_PINS failed" >&2; exit 1; }
fi
if ! ls "$DS_EXT"/deepspeed_shm_comm/*.so >/dev/null 2>&1; then
    echo "stepprof deps: building DeepSpeed's CPU comm op into $DS_EXT"
    DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR="$DS_EXT" PYTHONPATH="$DS_PY" "$PYTHON" -c \
        'from deepspeed.accelerator import get_accelerator; get_accelerator().create_op_builder("ShareMemCommBuilder").load()' \
        >/dev/null 2>&1 || { echo "stepprof deps: building DeepSpeed's CPU comm op failed" >&2; exit 1; }
fi
exit 0
