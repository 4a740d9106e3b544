/*
 * cupti_selftest.c - `make fakecupti-check`: drives the libcupti.so.13 stand-in the way a profiler does
 * (dlopen, subscribe, buffer callbacks, activity kinds) over the fakecuda runtime, and checks the
 * records.  This file holds the shared machinery (CUPTI loading, the record store, fake kernels) and
 * the orchestrator: run without arguments, it re-executes itself once per mode with the environment
 * that mode needs, so each mode starts with a fresh CUPTI and runtime.  Modes:
 *   records, threads  record contents and buffering (cupti_selftest_checks.c)
 *   faults            FAKECUPTI_SUBSCRIBE_ERROR / FAKECUPTI_ENABLE_ERROR
 *   inject            CUDA_INJECTION64_PATH: InitializeInjection runs once, at the first runtime call and
 *                     not at registration, and the CUPTI it enables sees that first call
 *   inject_bad        an unloadable injection library costs one stderr line and nothing else
 *   nort              on NVIDIA's libcudart (no fakecuda, no driver): enabling fails as CUPTI does
 * Prints one FAIL line per failed check; exit status 0 means every check passed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cupti_selftest.h"
#include "fakecuda_abi.h"

int st_failures;
const char *st_mode = "main";
struct st_cupti cu;

/* ---- loading ---- */

const char *st_dir(void) {
  static char dir[4096];
  if (!dir[0]) {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) return ".";
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
  }
  return dir;
}

bool st_load_cupti(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/libcupti.so.13", st_dir());
  void *h = dlopen(path, RTLD_NOW);
  if (!h) {
    printf("FAIL [%s] cannot load %s: %s\n", st_mode, path, dlerror());
    st_failures++;
    return false;
  }
  bool ok = true;
#define ST_LOAD(f)                                                                                                   \
  if (!(*(void **)&cu.f = dlsym(h, #f))) {                                                                           \
    printf("FAIL [%s] libcupti.so.13 does not export %s\n", st_mode, #f);                                            \
    ok = false;                                                                                                      \
  }
  ST_CUPTI_FUNCS(ST_LOAD)
#undef ST_LOAD
  *(void **)&cu.enabled_mask = dlsym(h, "fakecupti_enabled_mask");
  if (!cu.enabled_mask) ok = false;
  if (!ok) st_failures++;
  return ok;
}

/* ---- record store ---- */

size_t st_buf_size = 64 << 10;
_Atomic bool st_decline, st_flush_inside;
_Atomic size_t st_max_records;
_Atomic int st_deliveries, st_over_max;

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;
static struct st_rec *recs;
static size_t n_recs, cap_recs;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *max_records = atomic_load(&st_max_records);
  *size = st_buf_size;
  *buffer = atomic_load(&st_decline) ? NULL : aligned_alloc(8, st_buf_size);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  CHECK(ctx == NULL && stream == 0 && size == st_buf_size && valid <= size);
  atomic_fetch_add(&st_deliveries, 1);
  size_t in_buffer = 0;
  CUpti_Activity *r = NULL;
  CUptiResult res;
  pthread_mutex_lock(&store_lock);
  while ((res = cu.cuptiActivityGetNextRecord(buffer, valid, &r)) == CUPTI_SUCCESS) {
    if (n_recs == cap_recs) {
      cap_recs = cap_recs ? cap_recs * 2 : 1024;
      recs = realloc(recs, cap_recs * sizeof *recs);
    }
    memset(&recs[n_recs], 0, sizeof recs[n_recs]);
    CHECK(((uintptr_t)r & 7) == 0);
    memcpy(&recs[n_recs++], r,
           (size_t)((buffer + valid) - (uint8_t *)r) < ST_REC_BYTES ? (size_t)((buffer + valid) - (uint8_t *)r)
                                                                    : ST_REC_BYTES);
    in_buffer++;
  }
  pthread_mutex_unlock(&store_lock);
  CHECK(res == CUPTI_ERROR_MAX_LIMIT_REACHED);
  size_t max = atomic_load(&st_max_records);
  if (max && in_buffer > max) atomic_fetch_add(&st_over_max, 1);
  free(buffer);
  /* Re-entry: CUPTI must not hold its lock while calling us. */
  if (atomic_load(&st_flush_inside)) CUPTI_OK(cu.cuptiActivityFlushAll(0));
}

void st_register_buffers(void) {
  CUPTI_OK(cu.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
}

void st_clear(void) {
  pthread_mutex_lock(&store_lock);
  n_recs = 0;
  pthread_mutex_unlock(&store_lock);
}

size_t st_count(void) {
  pthread_mutex_lock(&store_lock);
  size_t n = n_recs;
  pthread_mutex_unlock(&store_lock);
  return n;
}

const struct st_rec *st_at(size_t i) {
  return &recs[i];
}

size_t st_count_kind(CUpti_ActivityKind kind) {
  size_t n = 0;
  for (size_t i = 0; i < st_count(); i++)
    n += st_at(i)->u.any.kind == kind;
  return n;
}

const struct st_rec *st_api_by_corr(uint32_t corr) {
  for (size_t i = 0; i < st_count(); i++)
    if (st_at(i)->u.any.kind == CUPTI_ACTIVITY_KIND_RUNTIME && st_at(i)->u.api.correlationId == corr) return st_at(i);
  return NULL;
}

/* ---- fake kernels ---- */

const char *const st_name_a = "_Z8kernel_aPfi", *const st_name_b = "_Z8kernel_bPKfPf",
                  *const st_name_slow = "_Z11kernel_slowv";
void st_kern_a(void) {
}
void st_kern_b(void) {
}
void st_kern_slow(void) {
}

/* What an nvcc-generated module constructor does. */
void st_register_kernels(void) {
  static char fatbin[16];
  void **module = __cudaRegisterFatBinary(fatbin);
  __cudaRegisterFunction(module, (const char *)st_kern_a, (char *)st_name_a, st_name_a, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(module, (const char *)st_kern_b, (char *)st_name_b, st_name_b, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFunction(module, (const char *)st_kern_slow, (char *)st_name_slow, st_name_slow, -1, 0, 0, 0, 0, 0);
  __cudaRegisterFatBinaryEnd(module);
}

/* In the inject mode registration must happen in a constructor, where real programs do it. */
__attribute__((constructor)) static void register_early(void) {
  if (getenv("FAKECUPTI_SELFTEST_CTOR")) st_register_kernels();
}

cudaError_t st_launch(void (*kern)(void), unsigned grid, size_t shmem, cudaStream_t s) {
  dim3 g = {grid, 1, 1}, b = {128, 1, 1};
  return cudaLaunchKernel((const void *)kern, g, b, NULL, shmem, s);
}

uint64_t st_mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t st_realtime(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- small modes ---- */

static void mode_faults(void) {
  if (!st_load_cupti()) return;
  CUpti_SubscriberHandle sub = NULL;
  CHECK(cu.cuptiSubscribe(&sub, NULL, NULL) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  CHECK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_ERROR_UNKNOWN);
  CHECK(cu.enabled_mask() == 0);
  unsetenv("FAKECUPTI_SUBSCRIBE_ERROR"); /* read at every call */
  unsetenv("FAKECUPTI_ENABLE_ERROR");
  CUPTI_OK(cu.cuptiSubscribe(&sub, NULL, NULL));
  CUPTI_OK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK(cu.enabled_mask() == 1ull << CUPTI_ACTIVITY_KIND_RUNTIME);
  CUPTI_OK(cu.cuptiFinalize());
}

static int marker_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int n = 0, c;
  while ((c = fgetc(f)) != EOF)
    n += c == '\n';
  fclose(f);
  return n;
}

static pthread_barrier_t first_call;
static void *first_call_thread(void *arg) {
  (void)arg;
  int n = 0;
  pthread_barrier_wait(&first_call);
  OK(cudaGetDeviceCount(&n));
  return NULL;
}

static void mode_inject(void) {
  const char *marker = getenv("FAKECUPTI_TEST_MARKER");
  /* The constructor registered kernels: that must not have run the injection. */
  CHECK(marker && marker_lines(marker) == 0);
  enum { THREADS = 4 };
  pthread_t th[THREADS];
  pthread_barrier_init(&first_call, NULL, THREADS);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, first_call_thread, NULL);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  CHECK(marker_lines(marker) == 1); /* once, however many threads raced to the first call */
  char path[4200];
  snprintf(path, sizeof path, "%s/libfakecupti_inject.so", st_dir());
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL);
  int (*seen)(uint32_t) = NULL;
  if (h) *(void **)&seen = dlsym(h, "fakecupti_inject_seen");
  CHECK(seen != NULL);
  /* The four first calls plus the one InitializeInjection made itself: CUPTI, enabled inside the
   * injection, saw every first call. */
  if (seen) CHECK(seen(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020) == THREADS + 1);
}

static void mode_inject_bad(void) {
  int n = 0;
  OK(cudaGetDeviceCount(&n));
  OK(cudaGetDeviceCount(&n));
  CHECK(n == 1);
}

/* NVIDIA's runtime is loaded instead of fakecuda: CUPTI loads, its clock works, enabling fails. */
static void mode_nort(void) {
  if (dlsym(RTLD_DEFAULT, "fakecuda_set_observer")) {
    printf("FAIL [nort] fakecuda was loaded instead of NVIDIA's libcudart\n");
    st_failures++;
    return;
  }
  if (!st_load_cupti()) return;
  CUpti_SubscriberHandle sub;
  uint64_t t;
  uint32_t id;
  CUPTI_OK(cu.cuptiSubscribe(&sub, NULL, NULL));
  CUPTI_OK(cu.cuptiGetTimestamp(&t));
  CHECK(cu.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_ERROR_UNKNOWN);
  CHECK(cu.cuptiGetStreamIdEx(NULL, NULL, 0, &id) == CUPTI_ERROR_UNKNOWN);
  CHECK(cu.enabled_mask() == 0);
}

/* ---- orchestrator ---- */

struct mode {
  const char *name;
  void (*run)(void);
};
static const struct mode modes[] = {
    {"records", mode_records}, {"threads", mode_threads},       {"faults", mode_faults},
    {"inject", mode_inject},   {"inject_bad", mode_inject_bad}, {"nort", mode_nort},
};

/* Runs this executable in `mode` with extra NAME=value settings; stderr to err_path if given. */
static int run_child(const char *mode, const char *const *env, const char *err_path) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (; env && *env; env++)
      putenv((char *)*env);
    if (err_path) {
      int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    execl("/proc/self/exe", "cupti_selftest", mode, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  printf("FAIL [%s] exited with status 0x%x\n", mode, status);
  return 1;
}

/* Strings for the children's environments; freed together at the end. */
static char *strings[16];
static int n_strings;
static char *fmt(const char *f, const char *a) {
  char *s = NULL;
  if (n_strings == 16 || asprintf(&s, f, a) < 0) abort();
  return strings[n_strings++] = s;
}

int main(int argc, char **argv) {
  alarm(120); /* a deadlock fails the test instead of hanging the build */
  if (argc > 1) {
    st_mode = argv[1];
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
      if (!strcmp(argv[1], modes[i].name)) modes[i].run();
    printf("%s: %d failure(s)\n", st_mode, st_failures);
    return st_failures != 0;
  }
  char tmp[] = "/tmp/fakecupti.XXXXXX";
  if (!mkdtemp(tmp)) return 2;
  char *log = fmt("%s/cupti.log", tmp), *marker = fmt("%s/marker", tmp), *err = fmt("%s/stderr", tmp);
  int failed = 0;
  const char *records_env[] = {"FAKECUDA_KERNEL_NS=20000", "FAKECUDA_KERNEL_NS_slow=100000000",
                               fmt("FAKECUPTI_LOG=%s", log), NULL};
  failed += run_child("records", records_env, NULL);
  const char *threads_env[] = {"FAKECUDA_KERNEL_NS=1000", NULL};
  failed += run_child("threads", threads_env, NULL);
  const char *faults_env[] = {"FAKECUPTI_SUBSCRIBE_ERROR=39", "FAKECUPTI_ENABLE_ERROR=999", NULL};
  failed += run_child("faults", faults_env, NULL);
  const char *inject_env[] = {fmt("CUDA_INJECTION64_PATH=%s/libfakecupti_inject.so", st_dir()),
                              fmt("FAKECUPTI_TEST_MARKER=%s", marker), "FAKECUPTI_SELFTEST_CTOR=1", NULL};
  failed += run_child("inject", inject_env, NULL);
  const char *bad_env[] = {"CUDA_INJECTION64_PATH=/nonexistent/libnothere.so", NULL};
  failed += run_child("inject_bad", bad_env, err);
  FILE *f = fopen(err, "r");
  char line[512];
  int lines = 0, injection_lines = 0;
  while (f && fgets(line, sizeof line, f))
    lines++, injection_lines += strncmp(line, "fakecuda: injection", 19) == 0;
  if (f) fclose(f);
  if (lines != 1 || injection_lines != 1) {
    printf("FAIL [inject_bad] expected one 'fakecuda: injection' stderr line, got %d line(s)\n", lines);
    failed++;
  }
  const char *cuda_home = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
  char *real_rt = fmt("%s/lib64/libcudart.so.13", cuda_home);
  if (access(real_rt, R_OK) == 0) {
    const char *nort_env[] = {fmt("LD_LIBRARY_PATH=%s/lib64", cuda_home), NULL};
    failed += run_child("nort", nort_env, NULL);
  } else {
    printf("skipped [nort]: %s not found\n", real_rt);
  }
  unlink(log), unlink(marker), unlink(err), rmdir(tmp);
  while (n_strings)
    free(strings[--n_strings]);
  printf("fakecupti-check: %s\n", failed ? "FAILED" : "passed");
  return failed != 0;
}
