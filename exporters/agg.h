/* exporters/agg.h — the neutral event array every report is computed from,
 * and the one aggregation shared by the preloaded library (built from the
 * window's records, exporters/report_adapt.c) and the offline tool (built
 * from a trace file, exporters/report_main.c). Nothing here knows where the
 * events came from, so both paths produce byte-identical reports.
 *
 * Strings are interned per set: equal strings are the same 32-bit id in an
 * event and the same pointer in a row, which makes grouping an integer or
 * pointer compare; ordering compares their text (ids follow input order).
 * Times are integer nanoseconds relative to the trace base, exactly what the
 * trace's three-decimal microseconds hold. */
#ifndef SP_AGG_H
#define SP_AGG_H

#include <stddef.h>
#include <stdint.h>

enum sp_rep_cat {
    SP_REP_RUNTIME,         /* cuda_runtime: host thread */
    SP_REP_DRIVER,          /* cuda_driver: host thread */
    SP_REP_ANNOTATION,      /* user_annotation: NVTX ranges and ProfilerStep#N */
    SP_REP_KERNEL,          /* kernel: pid = device, tid = stream */
    SP_REP_MEMCPY,          /* gpu_memcpy */
    SP_REP_MEMSET,          /* gpu_memset */
    SP_REP_SYNC,            /* cuda_sync */
    SP_REP_GPU_ANNOTATION,  /* gpu_user_annotation: drawn from a host range, never a row */
    SP_REP_MEMORY,          /* [memory] instant on a host thread */
};

static inline int sp_rep_is_host(int cat) { return cat <= SP_REP_ANNOTATION; }
static inline int sp_rep_is_gpu_work(int cat) { return cat >= SP_REP_KERNEL && cat <= SP_REP_MEMSET; }

/* An interned string of a set, by number: sp_rep_str(set, id). Id 0 is "",
 * which a stack or copy direction uses for none. */
typedef uint32_t sp_rep_str_t;

/* 40 bytes: a window of millions of events holds one per event (strings by
 * 32-bit id; pid, tid and device as a lane of the set; input shape, stack,
 * copy direction and launch flag as a detail of the set, which most events
 * share; a field only one kind of event has shares its room with another's;
 * times, sizes and correlation ids in 48 bits, the lane and the parent in the
 * 16-bit halves left over). */
#define SP_REP_48_MAX (((int64_t)1 << 47) - 1)   /* ts, dur, self_cpu, bytes: ns past 39 hours clamp */
typedef struct sp_rep_event {
    int64_t ts : 48;        /* ns from the trace base (sp_rep_set_ts clamps) */
    uint64_t parent_lo : 16;    /* sp_rep_parent: see below */
    int64_t dur : 48;       /* ns (sp_rep_set_dur clamps) */
    uint64_t lane_lo : 16;  /* the lane: pid, tid and device (sp_rep_set_lane, sp_rep_pid...) */
    int64_t bytes : 48;     /* copy / set / allocation size, memory event delta; -1 = none;
                             * annotations: ProfilerStep#N's N (sp_rep_step), else -1
                             * (sp_rep_set_bytes clamps) */
    uint64_t lane_hi : 16;
    union {
        struct {
            uint64_t correlation : 48;  /* links a GPU event to its launching API call; 0 = none */
            uint64_t parent_hi : 16;
        };
        struct {
            int64_t self_cpu : 48;      /* host events, from sp_rep_analyze on (which has read their
                                         * correlation by then): dur minus direct children */
            uint64_t : 16;
        };
    };
    sp_rep_str_t name;
    uint32_t detail : 28;   /* shape, stack, copy direction, launch flag: sp_rep_detail_of */
    uint32_t cat : 4;       /* enum sp_rep_cat */
} sp_rep_event_t;

/* What few events have, kept once per distinct combination (sp_rep_set_detail):
 * detail 0 is {"[]", none, none, 0}, every new event's. */
typedef struct sp_rep_detail {
    sp_rep_str_t shape;     /* input shapes text, "[]" when none */
    sp_rep_str_t stack;     /* "outermost;...;innermost", 0 when none */
    uint32_t kind : 31;     /* runtime copy direction ("HtoD"...) as a string id, 0 when none */
    uint32_t launch : 1;    /* a kernel launch API call (it has grid / block) */
} sp_rep_detail_t;

static inline int64_t sp_rep_clamp48(int64_t v)
{
    return v > SP_REP_48_MAX ? SP_REP_48_MAX : v < -SP_REP_48_MAX ? -SP_REP_48_MAX : v;
}
static inline void sp_rep_set_dur(sp_rep_event_t *e, int64_t ns) { e->dur = sp_rep_clamp48(ns); }
/* ts within +-39 hours of the trace base (a window that long, or a trace
 * read back that says more, clamps there); ts + dur never overflows. */
static inline void sp_rep_set_ts(sp_rep_event_t *e, int64_t ns) { e->ts = sp_rep_clamp48(ns); }
static inline void sp_rep_set_bytes(sp_rep_event_t *e, int64_t b) { e->bytes = sp_rep_clamp48(b); }
static inline uint32_t sp_rep_lane_of(const sp_rep_event_t *e) { return (uint32_t)e->lane_lo | (uint32_t)e->lane_hi << 16; }
/* Filled by sp_rep_analyze. Host events: the enclosing host event on the
 * same thread; GPU work: the API call with the same correlation (its
 * launcher); -1 for none. */
static inline int32_t sp_rep_parent(const sp_rep_event_t *e)
{
    return (int32_t)((uint32_t)e->parent_lo | (uint32_t)e->parent_hi << 16);
}
static inline void sp_rep_set_parent(sp_rep_event_t *e, int32_t p)
{
    e->parent_lo = (uint32_t)p & 0xffffu;
    e->parent_hi = (uint32_t)p >> 16;
}

/* An event's process and thread (GPU work and syncs: device and stream) and
 * device (GPU events: the device id; memory events: Device Type, 0 CPU,
 * 1 CUDA; else 0), kept once per distinct triple. */
typedef struct sp_rep_lane {
    int32_t pid, tid;
    int32_t device;
} sp_rep_lane_t;

/* ProfilerStep#N: N; -1 for every other event. */
static inline int32_t sp_rep_step(const sp_rep_event_t *e)
{
    return e->cat == SP_REP_ANNOTATION && e->bytes >= 0 && e->bytes <= INT32_MAX ? (int32_t)e->bytes : -1;
}
/* An annotation (operator or range) that torch's key_averages leaves out:
 * the only child of one of the same name (an op that redispatches to
 * itself, aten::add_ in aten::add_), merged into it (sp_rep_analyze). Kept
 * in the room of the step number. */
#define SP_REP_MERGED (-2)
static inline int sp_rep_merged(const sp_rep_event_t *e)
{
    return e->cat == SP_REP_ANNOTATION && e->bytes == SP_REP_MERGED;
}
/* Marks an annotation as ProfilerStep#n (n < 0: none). */
static inline void sp_rep_set_step(sp_rep_event_t *e, int64_t n)
{
    e->bytes = n >= 0 && n <= INT32_MAX ? n : -1;
}


/* Memory charged to an event (profile_memory), kept beside the events: most
 * windows have none, and every event would carry these 32 bytes. */
typedef struct sp_rep_mem {
    int64_t cpu, self_cpu, cuda, self_cuda;
} sp_rep_mem_t;

/* From a set's string id to a position + 1 (0: none yet): what groups by
 * name index instead of hashing, since ids are dense and, in a window of many
 * distinct names, mostly rising. Pages of 1024 ids are allocated as ids in
 * them are asked for, so a list of a few names costs a page or two however
 * many strings the set has. */
typedef struct sp_rep_idmap {
    uint32_t **page;
    size_t npages;
} sp_rep_idmap_t;

/* The entry of id; NULL when out of memory. */
uint32_t *sp_rep_idmap_at(sp_rep_idmap_t *m, sp_rep_str_t id);
void sp_rep_idmap_free(sp_rep_idmap_t *m);

struct sp_intern;

#define SP_REP_STR_PAGE_BITS 14u
#define SP_REP_STR_PAGE (1u << SP_REP_STR_PAGE_BITS)

typedef struct sp_rep_set {
    sp_rep_event_t *ev;
    size_t n, cap;
    sp_rep_mem_t *mem;      /* per event, after sp_rep_analyze; NULL unless has_memory */
    int64_t *cuda;          /* per event, after sp_rep_analyze: host, the GPU time it launched,
                             * itself or below; GPU work and syncs, dur. NULL when the set has
                             * no GPU work or sync (CUPTI off): every such time is 0 */
    struct sp_intern *strings;
    const char ***str;      /* id -> interned text, in pages of SP_REP_STR_PAGE ids that never
                             * move: a thread reads texts while another interns (sp_rep_share) */
    sp_rep_lane_t *lanes;   /* by an event's lane; lane 0 is (0, 0, 0), a new event's */
    struct sp_rep_lane_index *lane_index;   /* lanes by value (agg_lanes.c) */
    sp_rep_detail_t *details;       /* by an event's detail (sp_rep_set_detail); 0 is the default */
    struct sp_rep_lane_index *detail_index;   /* details by value (agg_lanes.c) */
    uint64_t dropped;       /* records lost in the window (stepprof_dropped_events) */
    int has_memory;         /* any SP_REP_MEMORY event */
    sp_rep_str_t no_shape_id;       /* interned "[]", every event's default shape ("" is id 0) */
    int analyzed;           /* sp_rep_analyze has run */
    _Atomic int oom;        /* an allocation failed: reports are incomplete (atomic: once shared,
                             * one thread may set it while the other reads it) */
} sp_rep_set_t;

void sp_rep_init(sp_rep_set_t *s);
void sp_rep_free(sp_rep_set_t *s);
const char *sp_rep_intern_n(sp_rep_set_t *s, const char *str, size_t len);
/* The same, as an id (0, "", when out of memory: s->oom set). */
sp_rep_str_t sp_rep_intern_id(sp_rep_set_t *s, const char *str);
sp_rep_str_t sp_rep_intern_id_n(sp_rep_set_t *s, const char *str, size_t len);
/* ids[i] = sp_rep_intern_id_n(s, str[i], len[i]) for each i < n, in groups
 * whose table lookups overlap (a million new names are a cache miss each). */
void sp_rep_intern_many(sp_rep_set_t *s, const char *const *str, const size_t *len, sp_rep_str_t *ids, size_t n);
static inline const char *sp_rep_str(const sp_rep_set_t *s, sp_rep_str_t id)
{
    return s->str[id >> SP_REP_STR_PAGE_BITS][id & (SP_REP_STR_PAGE - 1)];
}
/* From then on, interning takes a lock: two threads render reports from
 * one analysed set, and either may intern a string (a copy direction, a
 * stack's top frames). Reading texts and events needs none (they never move;
 * oom is atomic). */
void sp_rep_share(sp_rep_set_t *s);
/* e's lane: the one of (pid, tid, device), new ones added (lane 0 when out
 * of memory or past 2^31 lanes: s->oom set). Not once the set is shared. */
void sp_rep_set_lane(sp_rep_set_t *s, sp_rep_event_t *e, long pid, long tid, int device);
static inline int32_t sp_rep_pid(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->lanes[sp_rep_lane_of(e)].pid; }
static inline int32_t sp_rep_tid(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->lanes[sp_rep_lane_of(e)].tid; }
static inline int32_t sp_rep_device(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->lanes[sp_rep_lane_of(e)].device; }
/* e's shape, stack, copy direction and launch flag: the set's number of d,
 * added when new (past 2^28 distinct ones: the default, s->oom set). Not
 * once the set is shared. */
void sp_rep_set_detail(sp_rep_set_t *s, sp_rep_event_t *e, const sp_rep_detail_t *d);
/* d's copy direction (a string id past 2^31: none, s->oom set). */
static inline void sp_rep_detail_kind(sp_rep_set_t *s, sp_rep_detail_t *d, sp_rep_str_t kind)
{
    if (kind >> 31)
        s->oom = 1;
    else
        d->kind = kind;
}
/* A new event's detail (shape "[]"). */
static inline sp_rep_detail_t sp_rep_no_detail(const sp_rep_set_t *s)
{
    return (sp_rep_detail_t){s->no_shape_id, 0, 0, 0};
}
static inline const sp_rep_detail_t *sp_rep_detail_of(const sp_rep_set_t *s, const sp_rep_event_t *e)
{
    return &s->details[e->detail];
}
static inline sp_rep_str_t sp_rep_shape(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->details[e->detail].shape; }
static inline sp_rep_str_t sp_rep_stack(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->details[e->detail].stack; }
static inline sp_rep_str_t sp_rep_kind(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->details[e->detail].kind; }
static inline int sp_rep_launch(const sp_rep_set_t *s, const sp_rep_event_t *e) { return s->details[e->detail].launch; }
/* A zeroed event (bytes -1, step -1, detail 0, lane 0, parent -1) appended to the set; NULL
 * when out of memory (s->oom set). */
sp_rep_event_t *sp_rep_add(sp_rep_set_t *s);
/* e set to what sp_rep_add gives (an event built aside, appended later). */
void sp_rep_reset(const sp_rep_set_t *s, sp_rep_event_t *e);
/* Room for n more events without growing (a builder that knows its count
 * allocates once, not up to twice the events); 0, or -1 (s->oom set). */
int sp_rep_reserve(sp_rep_set_t *s, size_t n);
/* Room for n more distinct strings without growing the intern table (a
 * builder that can count its distinct names: a table grown from small moves
 * every slot again at each doubling); 0, or -1 (s->oom set). */
int sp_rep_reserve_strings(sp_rep_set_t *s, size_t n);

/* Input shapes as key_averages(group_by_input_shape=True) shows them: a launch
 * is [[grid], [block], [shared memory]], a copy / set / allocation [[bytes]]. */
sp_rep_str_t sp_rep_shape_launch(sp_rep_set_t *s, const unsigned grid[3], const unsigned block[3], uint64_t shm);
sp_rep_str_t sp_rep_shape_bytes(sp_rep_set_t *s, int64_t bytes);

/* Once per set (a second call fails): host events' correlation ids are
 * spent on it, and sp_rep_cmp orders events only before it.
 * Sorts the events into the canonical order (start, longer first, then a
 * total order on the rest so the result does not depend on input order),
 * links host events to their enclosing host event per thread, computes self
 * CPU time, charges each GPU event's time to its launching API call and every
 * host event enclosing that call (by correlation, never by time overlap), and
 * attributes memory events. 0, or -1 when out of memory. */
int sp_rep_analyze(sp_rep_set_t *s);
/* Event i's CUDA total (see cuda), after sp_rep_analyze. */
static inline int64_t sp_rep_cuda_total(const sp_rep_set_t *s, size_t i)
{
    return s->cuda ? s->cuda[i] : 0;
}
/* The canonical order: < 0, 0 or > 0 as a sorts before, with or after b.
 * Before sp_rep_analyze only (host events' correlation ids are gone after). */
int sp_rep_cmp(const sp_rep_set_t *s, const sp_rep_event_t *a, const sp_rep_event_t *b);


/* ---- key averages ---------------------------------------------------- */

typedef struct sp_rep_row {
    const char *name;       /* ProfilerStep#N merged as ProfilerStep* */
    int cat;
    const char *shape;
    const char *stack;      /* the row's top group_by_stack_n frames, innermost first, ';'-joined */
    long count;
    int64_t self_cpu, cpu_total, self_cuda, cuda_total;
    int64_t cpu_mem, self_cpu_mem, cuda_mem, self_cuda_mem;
} sp_rep_row_t;

typedef struct sp_rep_opts {
    const char *sort_by;    /* torch's names; NULL or "" = self_cuda_time_total with GPU time, else self_cpu_time_total */
    long row_limit;         /* -1 = all */
    int group_by_input_shape;
    long group_by_stack_n;  /* 0 = off */
} sp_rep_opts_t;

/* Rows in first-occurrence order (canonical event order), after sp_rep_analyze.
 * Returns the count, or -1 when out of memory; *out is malloc'ed. Interns
 * the row keys it builds into s. */
long sp_rep_rows(sp_rep_set_t *s, const sp_rep_opts_t *o, sp_rep_row_t **out);

/* Orders rows by sort_by, descending; equal values keep their order. With
 * 0 <= limit < n only the first `limit` rows are those, in that order, and
 * the rest follow in no order (sp_rep_permute's top form).
 * 0, or -1 for an unknown name or when out of memory. */
int sp_rep_sort_rows(sp_rep_row_t *rows, long n, const char *sort_by, long limit);

/* A value to rank and its first-seen position. */
typedef struct sp_rank {
    double v;
    size_t i;
} sp_rank_t;

/* Ranks k[0..n) largest v first, equal v by i: the first `top` (all when
 * top >= n) in that order, the rest after them in no order. O(n) to find
 * the top and O(top log top) to order it: rows and summary lists show a few
 * of a million names. */
void sp_rep_rank(sp_rank_t *k, size_t n, size_t top);
/* base[j] = the old base[k[j].i] for every j < n, in place along the
 * permutation's cycles (a sorted copy of a million rows was their size again
 * at the export's peak); k's indices are spent. With top < n, only for
 * j < top: the rest of the items follow them in no order, and only the
 * top's items and the ones they displace move (O(top): a summary lists 1000
 * of a million ranges and sums the rest). 0, or -1 when out of memory. */
int sp_rep_permute(void *base, size_t n, size_t size, sp_rank_t *k, size_t top);

/* 0 when name is one of torch's sort_by names. */
int sp_rep_sort_key_valid(const char *name);

#endif
