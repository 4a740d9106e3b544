/*
 * fakecupti_buffer.c - the client's activity buffers, handled as CUPTI does: buffers come from the
 * client's bufferRequested callback, records are packed 8-byte aligned, a buffer that cannot take the
 * next record is completed, and bufferCompleted(NULL, 0, buffer, size, validSize) hands it back.
 * Records the client gives no room for are dropped and counted.  Also cuptiActivityGetNextRecord's
 * walk over a delivered buffer and the record size of every kind written here.
 *
 * Like CUPTI, buffers that fill up (and buffers whose records become final later) are completed on
 * CUPTI's own worker thread, never on the thread that made the CUDA call; it also wakes every
 * FCP_WORKER_MS to deliver what became final.  A flush delivers on the flushing thread, after the
 * worker's deliveries in progress, so everything completed before a flush is in the client's hands
 * when it returns.  With OVERHEAD on, each delivery by a flush is preceded by an OVERHEAD record
 * (CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, object = the flushing thread).  Like CUPTI, a non-forced flush holds back a buffer while any of its GPU
 * records is still in flight on the simulated timeline, so a client that flushes without synchronizing
 * first misses records, as it would on a GPU.
 *
 * One mutex guards everything; it is never held while a client callback runs, so callbacks may call
 * back into CUPTI (a flush from bufferCompleted, a timestamp query from bufferRequested).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#include "fakecupti_int.h"

#define FCP_ALIGN 8 /* ACTIVITY_RECORD_ALIGNMENT in cupti_common.h */
#define FCP_MAX_REQUESTS 2 /* per record: another thread may take the buffer we just got */
#define FCP_WORKER_MS 10

struct buf {
  uint8_t *base;
  size_t size; /* as the client gave it */
  size_t used; /* offset just past the last record; starts at the first aligned byte */
  size_t max_records; /* 0: no limit */
  size_t records;
  uint64_t complete; /* CLOCK_MONOTONIC time from which every record in it is final */
  struct buf *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc request_cb;
static CUpti_BuffersCallbackCompleteFunc complete_cb;
static struct buf *cur; /* being filled */
static struct buf *spare; /* received from the client, not yet used */
static struct buf *pending; /* completed, waiting for their records to be final; FIFO */
static struct buf **pending_tail = &pending;
static size_t dropped;
/* The worker: buffers to hand to the client, and whether a delivery is under way. */
static pthread_cond_t worker_wake = PTHREAD_COND_INITIALIZER, worker_idle = PTHREAD_COND_INITIALIZER;
static struct buf *to_deliver;
static bool worker_started, worker_busy;
static pthread_t worker_thread;

size_t fcp_record_size(CUpti_ActivityKind kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
  case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
  case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
  case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
  case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
  case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
  case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
  default: return 0;
  }
}

static size_t align_skip(const uint8_t *p) {
  return (size_t)(-(uintptr_t)p & (FCP_ALIGN - 1));
}

static bool fits(const struct buf *b, size_t size) {
  return b->used + size <= b->size && (b->max_records == 0 || b->records < b->max_records);
}

/* Caller holds lock. */
static void complete(struct buf *b) {
  b->next = NULL;
  *pending_tail = b;
  pending_tail = &b->next;
}

/* Unlinks the pending buffers that may go to the client now: those whose records are final, or all
 * of them when forced.  Caller holds lock. */
static struct buf *take_pending(bool forced) {
  if (!pending) return NULL;
  uint64_t now = forced ? 0 : fcp_mono_now();
  struct buf *out = NULL, **out_tail = &out;
  struct buf **pp = &pending;
  while (*pp) {
    struct buf *b = *pp;
    if (forced || b->complete <= now) {
      *pp = b->next;
      b->next = NULL;
      *out_tail = b;
      out_tail = &b->next;
    } else {
      pp = &b->next;
    }
  }
  pending_tail = pp;
  return out;
}

/* Runs without the lock: the client may re-enter. */
static void deliver(struct buf *list, CUpti_BuffersCallbackCompleteFunc done) {
  while (list) {
    struct buf *next = list->next;
    if (done) done(NULL, 0, list->base, list->size, list->used);
    free(list);
    list = next;
  }
}

/* Asks the client for a buffer, without the lock.  NULL when it declines. */
static struct buf *request(CUpti_BuffersCallbackRequestFunc req) {
  uint8_t *base = NULL;
  size_t size = 0, max_records = 0;
  req(&base, &size, &max_records);
  if (!base) return NULL;
  struct buf *b = calloc(1, sizeof *b);
  if (!b) return NULL; /* the client's buffer is lost with the record: only under memory exhaustion */
  b->base = base;
  b->size = size;
  b->used = align_skip(base) < size ? align_skip(base) : size;
  b->max_records = max_records;
  return b;
}

static void append(struct buf **list, struct buf *more) {
  while (*list) list = &(*list)->next;
  *list = more;
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    if (!to_deliver && !pending) {
      pthread_cond_wait(&worker_wake, &lock);
    } else if (!to_deliver) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += FCP_WORKER_MS * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&worker_wake, &lock, &ts);
    }
    append(&to_deliver, take_pending(false));
    struct buf *list = to_deliver;
    to_deliver = NULL;
    CUpti_BuffersCallbackCompleteFunc done = complete_cb;
    worker_busy = list != NULL;
    pthread_mutex_unlock(&lock);
    deliver(list, done);
    pthread_mutex_lock(&lock);
    worker_busy = false;
    pthread_cond_broadcast(&worker_idle);
  }
  return NULL;
}

/* Queues buffers for the worker (started on first use).  Caller holds lock. */
static void hand_to_worker(struct buf *list) {
  if (!list) return;
  append(&to_deliver, list);
  if (!worker_started) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    worker_started = pthread_create(&worker_thread, &a, worker_main, NULL) == 0;
    pthread_attr_destroy(&a);
    if (worker_started) pthread_setname_np(worker_thread, "cupti-worker");
  }
  pthread_cond_signal(&worker_wake);
}

/* Waits until the worker has handed over everything queued, so a flush returns only after every
 * buffer completed before it reached the client.  Caller holds lock; the worker itself never waits. */
static void drain_worker(void) {
  if (!worker_started || pthread_equal(pthread_self(), worker_thread)) return;
  while (to_deliver || worker_busy) {
    pthread_cond_signal(&worker_wake);
    pthread_cond_wait(&worker_idle, &lock);
  }
}

void fcp_record(const void *rec, size_t size, uint64_t complete_at) {
  struct buf *unusable = NULL;
  int requests = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    if (cur && fits(cur, size)) {
      memcpy(cur->base + cur->used, rec, size);
      cur->used += size;
      cur->records++;
      if (complete_at > cur->complete) cur->complete = complete_at;
      break;
    }
    if (cur) {
      complete(cur);
      cur = NULL;
    }
    if (spare) {
      cur = spare;
      spare = spare->next;
      continue;
    }
    CUpti_BuffersCallbackRequestFunc req = request_cb;
    if (!req || requests++ == FCP_MAX_REQUESTS) {
      dropped++;
      break;
    }
    pthread_mutex_unlock(&lock);
    struct buf *b = request(req);
    pthread_mutex_lock(&lock);
    if (!b) {
      dropped++;
      break;
    }
    if (b->used + size > b->size) {
      /* Too small to hold even this record: give it straight back (empty) rather than leak it. */
      dropped++;
      b->next = unusable;
      unusable = b;
      break;
    }
    b->next = spare;
    spare = b;
  }
  hand_to_worker(unusable);
  hand_to_worker(take_pending(false));
  pthread_mutex_unlock(&lock);
}

CUptiResult fcp_register_buffers(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done) {
  if (!req || !done) return CUPTI_ERROR_INVALID_PARAMETER;
  pthread_mutex_lock(&lock);
  request_cb = req;
  complete_cb = done;
  pthread_mutex_unlock(&lock);
  return CUPTI_SUCCESS;
}

/* CUPTI's record of its own flush: an OVERHEAD record on the flushing thread, correlation id 0
 * (cupti_activity.h: "it can be zero, such as for CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH"). */
static void flush_overhead(uint64_t t0) {
  CUpti_ActivityOverhead3 r = {.kind = CUPTI_ACTIVITY_KIND_OVERHEAD,
                               .overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH,
                               .objectKind = CUPTI_ACTIVITY_OBJECT_THREAD,
                               .start = fcp_ts(t0),
                               .end = fcp_ts(fcp_mono_now())};
  r.objectId.pt.processId = (uint32_t)getpid();
  r.objectId.pt.threadId = (uint32_t)gettid();
  fcp_record(&r, sizeof r, 0);
}

/* A default flush completes the current buffer only if it holds records that are all final (CUPTI:
 * "it returns all the activity buffers which have all the activity records completed"); a forced one
 * returns every buffer with records. */
CUptiResult fcp_flush(uint32_t flag) {
  bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
  uint64_t t0 = fcp_mono_now();
  pthread_mutex_lock(&lock);
  drain_worker();
  CUpti_BuffersCallbackCompleteFunc done = complete_cb;
  if (!done) {
    pthread_mutex_unlock(&lock);
    return CUPTI_ERROR_INVALID_OPERATION;
  }
  if (cur && cur->records && (forced || cur->complete <= fcp_mono_now())) {
    complete(cur);
    cur = NULL;
  }
  struct buf *ready = take_pending(forced);
  pthread_mutex_unlock(&lock);
  if (ready && fcp_on(CUPTI_ACTIVITY_KIND_OVERHEAD)) flush_overhead(t0); /* lands in a later buffer */
  deliver(ready, done);
  return CUPTI_SUCCESS;
}

size_t fcp_take_dropped(void) {
  pthread_mutex_lock(&lock);
  size_t n = dropped;
  dropped = 0;
  pthread_mutex_unlock(&lock);
  return n;
}

/* CUPTI relinquishes every buffer at cuptiFinalize, empty ones included, so the client can free them. */
void fcp_buffers_finalize(void) {
  pthread_mutex_lock(&lock);
  drain_worker();
  if (cur) complete(cur);
  cur = NULL;
  while (spare) {
    struct buf *b = spare;
    spare = b->next;
    complete(b);
  }
  struct buf *all = take_pending(true);
  CUpti_BuffersCallbackCompleteFunc done = complete_cb;
  request_cb = NULL;
  complete_cb = NULL;
  pthread_mutex_unlock(&lock);
  deliver(all, done);
}

/* A child forked while another thread held the lock would otherwise deadlock on its first record. */
static void before_fork(void) {
  pthread_mutex_lock(&lock);
}
static void after_fork(void) {
  pthread_mutex_unlock(&lock);
}
static void after_fork_child(void) {
  worker_started = worker_busy = false; /* the worker does not exist in the child */
  pthread_cond_init(&worker_wake, NULL);
  pthread_cond_init(&worker_idle, NULL);
  pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void buffer_init(void) {
  pthread_atfork(before_fork, after_fork, after_fork_child);
}

/* ---- iteration over a delivered buffer ---- */

FCP_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                  CUpti_Activity **record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  uint8_t *end = buffer + validBufferSizeBytes, *p;
  if (!*record) {
    p = buffer + align_skip(buffer);
  } else {
    size_t prev = fcp_record_size((*record)->kind);
    if (!prev) return CUPTI_ERROR_INVALID_KIND;
    p = (uint8_t *)*record + prev;
  }
  if (p >= end) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  if ((size_t)(end - p) < sizeof kind) return CUPTI_ERROR_INVALID_KIND;
  memcpy(&kind, p, sizeof kind);
  size_t size = fcp_record_size(kind);
  if (!size || (size_t)(end - p) < size) return CUPTI_ERROR_INVALID_KIND; /* unknown or cut short */
  *record = (CUpti_Activity *)(void *)p;
  return CUPTI_SUCCESS;
}
