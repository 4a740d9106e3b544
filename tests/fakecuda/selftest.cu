/*
 * selftest.cu - checks the fakecuda stand-in the way its users meet it: an unmodified nvcc program
 * (built with -cudart shared, once more with --default-stream per-thread) running on
 * build/fakecuda/libcudart.so.13.  Covers <<<>>> and template launches, copies and symbols, managed
 * variables, the simulated timeline and its stream semantics, events, graphs, errors and the observer.
 * Prints one line per failed check; exit status 0 means every check passed.  It re-executes itself
 * with the FAKECUDA_* settings it needs, so running it takes only LD_LIBRARY_PATH=build/fakecuda.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "fakecuda.h"

static int failures;
#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                 \
      failures++;                                                            \
    }                                                                        \
  } while (0)
#define OK(call) CHECK((call) == cudaSuccess)

template <typename T> __global__ void scale(T *p, T f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= f;
}
__global__ void add(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}
__global__ void tiny_kernel() {} /* FAKECUDA_KERNEL_NS_tiny=0 makes it free */
__constant__ float coeffs[4];
__managed__ int counter;

static std::vector<fakecuda_op_t> ops;
static int api_enters, api_exits;
static void on_enter(const char *, void *) { api_enters++; }
static void on_exit(const char *, int, void *) { api_exits++; }
static void on_op(const fakecuda_op_t *op, void *) { ops.push_back(*op); }

static double ms_since(const timespec &t0) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6;
}

static void test_copies() {
  const int n = 1024;
  std::vector<float> h(n), back(n);
  for (int i = 0; i < n; i++) h[i] = (float)i;
  float *d, *pinned;
  OK(cudaMalloc(&d, n * sizeof(float)));
  OK(cudaMallocHost(&pinned, n * sizeof(float)));
  OK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  OK(cudaMemcpy(pinned, d, n * sizeof(float), cudaMemcpyDefault));
  OK(cudaMemcpy(back.data(), pinned, n * sizeof(float), cudaMemcpyHostToHost));
  CHECK(memcmp(h.data(), back.data(), n * sizeof(float)) == 0);
  OK(cudaMemset(d, 0, n * sizeof(float)));
  OK(cudaMemcpy(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(back[0] == 0.0f && back[n - 1] == 0.0f);

  float c[4] = {1, 2, 3, 4}, c2[4] = {0, 0, 0, 0};
  OK(cudaMemcpyToSymbol(coeffs, c, sizeof c));
  OK(cudaMemcpyFromSymbol(c2, coeffs, sizeof c2));
  CHECK(memcmp(c, c2, sizeof c) == 0);
  CHECK(cudaMemcpyToSymbol(coeffs, c, 2 * sizeof c) == cudaErrorInvalidValue);
  counter = 41;
  counter++;
  CHECK(counter == 42);
  OK(cudaFree(d));
  OK(cudaFreeHost(pinned));
}

static void test_errors() {
  int x;
  CHECK(cudaFree(&x) == cudaErrorInvalidValue);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  OK(cudaFree(nullptr));
  CHECK(strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation") == 0);
  CHECK(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  add<<<1, 2048>>>(nullptr, nullptr, 0);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  int version = 0;
  OK(cudaRuntimeGetVersion(&version));
  CHECK(version == CUDART_VERSION);
  cudaDeviceProp prop;
  OK(cudaGetDeviceProperties(&prop, 0));
  int sms = 0;
  OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(prop.major == 9 && prop.multiProcessorCount == 132 && sms == 132);
}

/* Kernels take 1 ms: ten make a 10 ms sync, as on a GPU. */
static void test_timeline() {
  cudaStream_t s;
  cudaEvent_t e0, e1;
  OK(cudaStreamCreate(&s));
  OK(cudaEventCreate(&e0));
  OK(cudaEventCreate(&e1));
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  OK(cudaEventRecord(e0, s));
  for (int i = 0; i < 10; i++) add<<<1, 32, 0, s>>>(nullptr, nullptr, 0);
  OK(cudaEventRecord(e1, s));
  double launch_ms = ms_since(t0);
  CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
  OK(cudaStreamSynchronize(s));
  double sync_ms = ms_since(t0);
  float elapsed = 0;
  OK(cudaEventElapsedTime(&elapsed, e0, e1));
  printf("10 x 1 ms kernels: launches took %.3f ms, sync returned after %.3f ms, events %.3f ms\n",
         launch_ms, sync_ms, elapsed);
  CHECK(sync_ms >= 10.0 && sync_ms < 20.0); /* the upper bound leaves room for a busy CI machine */
  CHECK(elapsed >= 9.99f && elapsed < 10.5f); /* plus the gap before the first launch */
  OK(cudaStreamQuery(s));
  OK(cudaEventDestroy(e0));
  OK(cudaEventDestroy(e1));
  OK(cudaStreamDestroy(s));
}

/* The legacy stream waits for blocking streams; non-blocking streams wait for nobody. */
static void test_stream_semantics(bool per_thread_default) {
  cudaStream_t blocking, nonblocking;
  OK(cudaStreamCreate(&blocking));
  OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
  ops.clear();
  add<<<1, 32, 0, blocking>>>(nullptr, nullptr, 0);
  add<<<1, 32, 0, cudaStreamLegacy>>>(nullptr, nullptr, 0);
  add<<<1, 32, 0, nonblocking>>>(nullptr, nullptr, 0);
  scale<double><<<2, 64>>>(nullptr, 2.0, 0);
  OK(cudaDeviceSynchronize());
  CHECK(ops.size() == 5);
  if (ops.size() == 5) {
    unsigned long long blocking_id = 0;
    OK(cudaStreamGetId(blocking, &blocking_id));
    CHECK(ops[0].kind == FAKECUDA_OP_KERNEL && ops[0].stream_id == blocking_id && blocking_id >= 13);
    CHECK(ops[0].kernel_name && strcmp(ops[0].kernel_name, "_Z3addPfPKfi") == 0);
    CHECK(ops[1].stream_id == FAKECUDA_LEGACY_STREAM_ID && ops[1].gpu_start_ns >= ops[0].gpu_end_ns);
    CHECK(ops[2].gpu_start_ns < ops[1].gpu_end_ns);
    CHECK(ops[3].kernel_name && strstr(ops[3].kernel_name, "scale") && ops[3].grid[0] == 2 && ops[3].block[0] == 64);
    CHECK((ops[3].stream_id == FAKECUDA_LEGACY_STREAM_ID) == !per_thread_default);
    CHECK(ops[3].api && strcmp(ops[3].api, per_thread_default ? "__cudaLaunchKernel_ptsz" : "__cudaLaunchKernel") == 0);
    CHECK(ops[4].kind == FAKECUDA_OP_SYNC);
  }
  OK(cudaStreamDestroy(blocking));
  OK(cudaStreamDestroy(nonblocking));
}

static void test_observed_copy() {
  float *d, h[16] = {0};
  OK(cudaMalloc(&d, sizeof h));
  ops.clear();
  OK(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyDefault, 0));
  OK(cudaMemsetAsync(d, 1, sizeof h, 0));
  CHECK(ops.size() == 2);
  if (ops.size() == 2) {
    CHECK(ops[0].kind == FAKECUDA_OP_MEMCPY && ops[0].copy_kind == cudaMemcpyHostToDevice && ops[0].bytes == sizeof h);
    CHECK(ops[0].src_mem == FAKECUDA_MEM_PAGEABLE && ops[0].dst_mem == FAKECUDA_MEM_DEVICE);
    CHECK(ops[1].kind == FAKECUDA_OP_MEMSET && ops[1].gpu_start_ns >= ops[0].gpu_end_ns);
  }
  OK(cudaFree(d));
}

static void test_graph() {
  cudaStream_t s;
  cudaGraph_t g;
  cudaGraphExec_t exec;
  cudaStreamCaptureStatus status;
  OK(cudaStreamCreate(&s));
  OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  OK(cudaStreamIsCapturing(s, &status));
  CHECK(status == cudaStreamCaptureStatusActive);
  ops.clear();
  for (int i = 0; i < 3; i++) add<<<1, 32, 0, s>>>(nullptr, nullptr, 0);
  CHECK(ops.empty());
  OK(cudaStreamEndCapture(s, &g));
  OK(cudaGraphInstantiate(&exec, g, 0));
  OK(cudaGraphLaunch(exec, s));
  CHECK(ops.size() == 3 && ops[2].kind == FAKECUDA_OP_KERNEL);
  if (!ops.empty()) CHECK(strncmp(ops[0].api, "cudaGraphLaunch", 15) == 0);
  OK(cudaStreamSynchronize(s));
  OK(cudaGraphExecDestroy(exec));
  OK(cudaGraphDestroy(g));
  OK(cudaStreamDestroy(s));
}

static void *launcher(void *stream) {
  for (int i = 0; i < 100000; i++) tiny_kernel<<<1, 32, 0, (cudaStream_t)stream>>>();
  return nullptr;
}

static void test_threads() {
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  pthread_t t[4];
  for (auto &th : t) pthread_create(&th, nullptr, launcher, s);
  for (auto &th : t) pthread_join(th, nullptr);
  OK(cudaStreamSynchronize(s));
  OK(cudaGetLastError());
  OK(cudaStreamDestroy(s));
}

static void test_limits() {
  void *p;
  size_t free_bytes, total;
  CHECK(cudaMalloc(&p, 100 << 20) == cudaErrorMemoryAllocation);
  OK(cudaMalloc(&p, 32 << 20));
  OK(cudaMemGetInfo(&free_bytes, &total));
  CHECK(total == 64 << 20 && free_bytes <= 32 << 20 && free_bytes > 31 << 20); /* __managed__ counts too */
  OK(cudaFree(p));
  CHECK(cudaHostRegister(&p, sizeof p, 0) == cudaErrorNotPermitted);
  cudaGetLastError();
}

int main(int argc, char **argv) {
  if (!getenv("FAKECUDA_KERNEL_NS_tiny")) {
    setenv("FAKECUDA_KERNEL_NS", "1000000", 1);
    setenv("FAKECUDA_KERNEL_NS_tiny", "0", 1);
    setenv("FAKECUDA_MEM_LIMIT", "67108864", 1);
    setenv("FAKECUDA_FAIL", "cudaHostRegister:800", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  (void)argc;
  auto set_observer = (void (*)(const fakecuda_observer_t *))dlsym(RTLD_DEFAULT, "fakecuda_set_observer");
  if (!set_observer) {
    printf("FAIL: fakecuda_set_observer not found: not running on the stand-in\n");
    return 1;
  }
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
  const bool per_thread_default = true;
#else
  const bool per_thread_default = false;
#endif
  test_copies();
  test_errors();
  test_limits();
  test_timeline();
  test_threads();
  fakecuda_observer_t obs = {on_enter, on_exit, on_op, nullptr};
  set_observer(&obs);
  test_stream_semantics(per_thread_default);
  test_observed_copy();
  test_graph();
  set_observer(nullptr);
  CHECK(api_enters > 0 && api_enters == api_exits);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures != 0;
}
