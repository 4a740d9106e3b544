#!/usr/bin/env python3
"""scripts/gpu_cupy_launch.py — a driver-API launch for gpu-validate.sh: a CuPy
RawKernel ("sp_scale", compiled by NVRTC, launched by CuPy through
cuLaunchKernel) run N times (argv[1], default 20), then a synchronize. Prints
the value the kernels computed so the run is checked, not only timed."""
import sys

import cupy as cp

SRC = r'''extern "C" __global__ void sp_scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}'''


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    k = cp.RawKernel(SRC, "sp_scale")
    size = 1 << 20
    x = cp.ones(size, dtype=cp.float32)
    for _ in range(n):
        k(((size + 255) // 256,), (256,), (x, cp.float32(2.0), cp.int32(size)))
    cp.cuda.Device().synchronize()
    print("x[0] = %g" % float(x[0]))


if __name__ == "__main__":
    main()
