/*
 * abi_check.cu - compile-only proof that fakecuda_abi.h matches NVIDIA's declarations.
 *
 * nvcc compiles the host side of this file together with crt/host_runtime.h and crt/device_functions.h;
 * a prototype in fakecuda_abi.h that differs from theirs is a conflicting C declaration, so the build
 * fails.  The kernel makes nvcc emit the registration stub that pulls in host_runtime.h.
 */
#include "fakecuda_abi.h"

__global__ void fakecuda_abi_check_kernel(int *p) { *p = 0; }
