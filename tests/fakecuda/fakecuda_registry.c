/*
 * fakecuda_registry.c - what nvcc's generated constructors register: fat binaries (modules), kernels
 * (host stub -> mangled device name, simulated duration) and device / constant / managed variables
 * (host shadow -> size).  Launches look kernels up on every call, so the maps are open-addressing
 * tables that readers probe without a lock; writers serialize on a mutex and publish a grown table
 * with a release store.  Superseded tables are never freed because a reader may still be probing one;
 * tables only double, so that costs at most the size of the live table.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda_int.h"

struct slot {
  const void *_Atomic key;
  void *_Atomic val; /* NULL after removal: the key stays as a tombstone until the table grows */
};

struct table {
  size_t mask;
  struct slot slots[];
};

struct ptrmap {
  struct table *_Atomic tab;
  size_t used; /* slots with a key, tombstones included */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ptrmap kernels, vars;

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  return (size_t)(x ^ (x >> 33));
}

static void *map_get(struct ptrmap *m, const void *key) {
  const struct table *t = atomic_load_explicit(&m->tab, memory_order_acquire);
  if (!t) return NULL;
  for (size_t i = hash_ptr(key) & t->mask;; i = (i + 1) & t->mask) {
    const void *k = atomic_load_explicit(&t->slots[i].key, memory_order_acquire);
    if (k == key) return atomic_load_explicit(&t->slots[i].val, memory_order_acquire);
    if (!k) return NULL;
  }
}

static struct slot *probe(struct table *t, const void *key) {
  size_t i = hash_ptr(key) & t->mask;
  while (atomic_load_explicit(&t->slots[i].key, memory_order_relaxed) &&
         atomic_load_explicit(&t->slots[i].key, memory_order_relaxed) != key)
    i = (i + 1) & t->mask;
  return &t->slots[i];
}

/* Caller holds registry_lock. */
static bool map_put(struct ptrmap *m, const void *key, void *val) {
  struct table *t = atomic_load_explicit(&m->tab, memory_order_relaxed);
  if (!t || (m->used + 1) * 2 > t->mask + 1) {
    size_t cap = t ? (t->mask + 1) * 2 : 256;
    struct table *n = calloc(1, sizeof *n + cap * sizeof n->slots[0]);
    if (!n) return false;
    n->mask = cap - 1;
    m->used = 0;
    for (size_t i = 0; t && i <= t->mask; i++) {
      void *v = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
      if (!v) continue;
      struct slot *s = probe(n, atomic_load_explicit(&t->slots[i].key, memory_order_relaxed));
      atomic_store_explicit(&s->val, v, memory_order_relaxed);
      atomic_store_explicit(&s->key, atomic_load_explicit(&t->slots[i].key, memory_order_relaxed),
                            memory_order_relaxed);
      m->used++;
    }
    atomic_store_explicit(&m->tab, n, memory_order_release);
    t = n;
  }
  struct slot *s = probe(t, key);
  atomic_store_explicit(&s->val, val, memory_order_release);
  if (!atomic_load_explicit(&s->key, memory_order_relaxed)) {
    atomic_store_explicit(&s->key, key, memory_order_release);
    m->used++;
  }
  return true;
}

/* Caller holds registry_lock. */
static void map_remove(struct ptrmap *m, const void *key) {
  struct table *t = atomic_load_explicit(&m->tab, memory_order_relaxed);
  if (!t) return;
  struct slot *s = probe(t, key);
  if (atomic_load_explicit(&s->key, memory_order_relaxed) == key)
    atomic_store_explicit(&s->val, NULL, memory_order_release);
}

/* Both the host stub and the handle itself map to the entry, so either can be passed as `func`. */
static struct CUkern_st *add_kernel(void **module, const void *host_fun, const char *name) {
  struct CUkern_st *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->host_fun = host_fun;
  k->name = name ? strdup(name) : NULL;
  k->ns = fc_kernel_ns_for(name);
  k->module = module;
  if (!map_put(&kernels, host_fun, k) || !map_put(&kernels, k, k)) {
    map_remove(&kernels, host_fun);
    free(k->name);
    free(k);
    return NULL;
  }
  return k;
}

struct CUkern_st *fc_kernel(const void *func) {
  struct CUkern_st *k = map_get(&kernels, func);
  if (FC_LIKELY(k != NULL) || !func) return k;
  pthread_mutex_lock(&registry_lock);
  k = map_get(&kernels, func);
  if (!k) k = add_kernel(NULL, func, NULL);
  pthread_mutex_unlock(&registry_lock);
  return k;
}

struct fc_var *fc_var_lookup(const void *symbol) {
  return map_get(&vars, symbol);
}

static void add_var(const void *key, char *host, size_t size) {
  struct fc_var *v = malloc(sizeof *v);
  if (!v) return;
  v->host = host;
  v->size = size;
  pthread_mutex_lock(&registry_lock);
  if (!map_put(&vars, key, v)) free(v);
  pthread_mutex_unlock(&registry_lock);
}

/* ---- entry points called by nvcc-generated constructors ---- */

/* A module handle only has to be a unique, stable pointer; its contents are never read. */
FC_EXPORT void **__cudaRegisterFatBinary(void *fatCubin) {
  fc_note_enter(__func__);
  void **h = calloc(1, sizeof *h);
  if (h) *h = fatCubin;
  fc_note_exit(__func__, 0);
  return h;
}

FC_EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle FC_UNUSED) {
  fc_note_enter(__func__);
  fc_note_exit(__func__, 0);
}

/* Runs at exit or dlclose; the module's host stubs may be reused by a later dlopen, so its
 * kernels stop resolving.  Entries stay allocated for handles a stub may still hold. */
FC_EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle) {
  fc_note_enter(__func__);
  pthread_mutex_lock(&registry_lock);
  struct table *t = atomic_load(&kernels.tab);
  for (size_t i = 0; fatCubinHandle && t && i <= t->mask; i++) {
    struct CUkern_st *k = atomic_load(&t->slots[i].val);
    if (k && k->module == fatCubinHandle && atomic_load(&t->slots[i].key) == k->host_fun)
      atomic_store(&t->slots[i].val, NULL);
  }
  pthread_mutex_unlock(&registry_lock);
  free(fatCubinHandle);
  fc_note_exit(__func__, 0);
}

FC_EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun FC_UNUSED,
                                      const char *deviceName, int thread_limit FC_UNUSED, uint3 *tid FC_UNUSED,
                                      uint3 *bid FC_UNUSED, dim3 *bDim FC_UNUSED, dim3 *gDim FC_UNUSED,
                                      int *wSize FC_UNUSED) {
  fc_note_enter(__func__);
  pthread_mutex_lock(&registry_lock);
  add_kernel(fatCubinHandle, hostFun, deviceName);
  pthread_mutex_unlock(&registry_lock);
  fc_note_exit(__func__, 0);
}

/* Device and constant variables live in their host shadows: copies to the symbol land there. */
FC_EXPORT void __cudaRegisterVar(void **fatCubinHandle FC_UNUSED, char *hostVar, char *deviceAddress FC_UNUSED,
                                 const char *deviceName FC_UNUSED, int ext FC_UNUSED, size_t size,
                                 int constant FC_UNUSED, int global FC_UNUSED) {
  fc_note_enter(__func__);
  add_var(hostVar, hostVar, size);
  fc_note_exit(__func__, 0);
}

/* The host side of a __managed__ variable is a pointer the runtime points at managed memory;
 * the generated code reads it only after __cudaInitModule, so allocating here is early enough. */
FC_EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle FC_UNUSED, void **hostVarPtrAddress,
                                        char *deviceAddress FC_UNUSED, const char *deviceName FC_UNUSED,
                                        int ext FC_UNUSED, size_t size, int constant FC_UNUSED,
                                        int global FC_UNUSED) {
  fc_note_enter(__func__);
  void *p = NULL;
  if (hostVarPtrAddress && fc_mem_alloc(__func__, &p, size ? size : 1, FAKECUDA_MEM_MANAGED, 256) == cudaSuccess) {
    memset(p, 0, size);
    *hostVarPtrAddress = p;
    add_var(hostVarPtrAddress, p, size);
  }
  fc_note_exit(__func__, 0);
}

FC_EXPORT char __cudaInitModule(void **fatCubinHandle FC_UNUSED) {
  fc_note_enter(__func__);
  fc_note_exit(__func__, 1);
  return 1;
}
