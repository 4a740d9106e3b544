# A program that starts torch.profiler while stepprof holds CUPTI, on the CUDA and CUPTI
# stand-ins (tests/fakecuda). Real PyTorch cannot run there (its libraries bind NVIDIA's
# libcudart and libcupti by RPATH, and without a GPU its Kineto never opens CUPTI), so this
# program does, through ctypes, what such a program does. Each [...] is a
# cudaProfilerStart..Stop range (a cycle with PROF_MARKER=cudaProfilerApi):
#   [BEFORE memsets] [2 memsets, the program starts torch.profiler, AFTER memsets] [3 memsets]
# Starting torch.profiler: inject/python/ calls libstepprof's stepprof_torch(4) from
# torch.autograd.profiler.profile._prepare_trace, then Kineto sets up CUPTI as libkineto
# does (cuptiSubscribe for its callbacks, its own buffer callbacks, activity kinds on); after
# the AFTER memsets Kineto flushes, turns its kinds off and writes its trace. Runtime calls go
# through the global scope, as a program's calls do. Prints what Kineto's CUPTI client got:
#   yield <CLOCK_MONOTONIC ns when the hand-over returned>
#   kineto subscribe <cuptiSubscribe's result> memsets <n> foreign_buffers <n>
# (foreign buffers: buffers completed to Kineto's callback that it never handed out).
# Usage: torch_cupti_handback.py BEFORE AFTER
import ctypes
import sys
import time

MEMSET = 2           # CUPTI_ACTIVITY_KIND_MEMSET
FLUSH_FORCED = 1     # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
BUF_BYTES = 1 << 20


def check(what, r):
    if r != 0:
        sys.exit("%s failed: %d" % (what, r))


def main():
    before, after = int(sys.argv[1]), int(sys.argv[2])
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    cupti = ctypes.CDLL("libcupti.so.13")
    libc = rt = ctypes.CDLL(None)
    dev = ctypes.c_void_p()
    check("cudaMalloc", rt.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(4096)))

    def memsets(n):
        for _ in range(n):
            check("cudaMemset", rt.cudaMemset(dev, 0, ctypes.c_size_t(4096)))
        check("cudaDeviceSynchronize", rt.cudaDeviceSynchronize())

    rt.cudaProfilerStart()
    memsets(before)
    rt.cudaProfilerStop()
    rt.cudaProfilerStart()
    memsets(2)
    # torch.profiler starts: the PyTorch bootstrap tells stepprof first.
    entry = libc.stepprof_torch
    entry.argtypes = [ctypes.c_int]
    entry(4)
    print("yield %d" % time.monotonic_ns())

    # Kineto's CUPTI client.
    mine, memset_records, foreign = {}, [0], [0]
    REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                               ctypes.POINTER(ctypes.c_size_t))
    COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.c_size_t)
    CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)

    def request(buf, size, max_records):
        b = ctypes.c_void_p()
        libc.posix_memalign(ctypes.byref(b), ctypes.c_size_t(8), ctypes.c_size_t(BUF_BYTES))
        mine[b.value] = True
        buf[0] = b.value
        size[0] = BUF_BYTES
        max_records[0] = 0

    def complete(ctx, stream, buf, size, valid):
        if buf not in mine:
            foreign[0] += 1
            return
        rec = ctypes.c_void_p()
        while valid and cupti.cuptiActivityGetNextRecord(ctypes.c_void_p(buf), ctypes.c_size_t(valid),
                                                         ctypes.byref(rec)) == 0:
            memset_records[0] += ctypes.cast(rec, ctypes.POINTER(ctypes.c_uint32))[0] == MEMSET
        del mine[buf]
        libc.free(ctypes.c_void_p(buf))

    keep = (REQUEST(request), COMPLETE(complete), CALLBACK(lambda *a: None))
    handle = ctypes.c_void_p()
    sub = cupti.cuptiSubscribe(ctypes.byref(handle), keep[2], None)
    check("cuptiActivityRegisterCallbacks", cupti.cuptiActivityRegisterCallbacks(keep[0], keep[1]))
    check("cuptiActivityEnable", cupti.cuptiActivityEnable(MEMSET))
    memsets(after)
    check("cuptiActivityFlushAll", cupti.cuptiActivityFlushAll(FLUSH_FORCED))
    check("cuptiActivityDisable", cupti.cuptiActivityDisable(MEMSET))
    if sub == 0:
        cupti.cuptiUnsubscribe(handle)
    print("kineto subscribe %d memsets %d foreign_buffers %d" % (sub, memset_records[0], foreign[0]))
    rt.cudaProfilerStop()
    rt.cudaProfilerStart()
    memsets(3)
    rt.cudaProfilerStop()
    rt.cudaFree(dev)


if __name__ == "__main__":
    main()
