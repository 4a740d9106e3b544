#!/bin/sh
# scripts/deps.sh — installs the Debian packages stepprof builds and tests
# with, when they are missing: as root with apt-get, otherwise it prints the
# apt-get line to run. The CUDA toolkit is not a Debian package here: it is
# expected at $CUDA_HOME (default /usr/local/cuda). g++ and ninja build the CPU
# comm op DeepSpeed compiles at its first run (tests/test_torch.py).
set -u
PKGS="gcc g++ ninja-build make libc6-dev libyaml-dev zlib1g-dev libisal2 libisal-dev libcjson-dev libunwind-dev libcapstone4 python3 binutils chromium clang libclang-rt-dev openmpi-bin patchelf"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "stepprof deps: installing$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null 2>&1 || true
        apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
            echo "stepprof deps: apt-get install$missing failed" >&2; exit 1; }
    else
        echo "stepprof deps: missing packages; run: sudo apt-get install -y$missing" >&2
        exit 1
    fi
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
    echo "stepprof deps: CUDA toolkit headers not found in $CUDA_HOME/include (set CUDA_HOME)" >&2
    exit 1
fi
# nvcc builds the .cu test programs; the test runner fails (never skips) a test whose tool is missing.
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "stepprof deps: no nvcc in $CUDA_HOME/bin; install the CUDA toolkit (apt: nvidia-cuda-toolkit, or NVIDIA's cuda-toolkit) or set CUDA_HOME" >&2
    exit 1
fi
sh "$(dirname "$0")/pydeps.sh" || exit 1
exit 0
