/* exporters/agg_rows.c — key averages: groups analysed events into rows the
 * way torch's key_averages() does (by name and kind, plus input shapes and
 * the top stack frames when asked), and orders rows by a torch sort_by key
 * (descending, stable). GPU work counts as Self CUDA; host rows carry the
 * GPU time they launched as CUDA total only, so Self CUDA % adds up to 100%
 * over GPU rows and annotation ranges never count twice. */
#include "agg.h"

#include <stdlib.h>
#include <string.h>

static const char *const sort_names[] = {
    "cpu_time",          "cuda_time",        "cpu_time_total",        "cuda_time_total",
    "self_cpu_time_total", "self_cuda_time_total", "cpu_memory_usage", "cuda_memory_usage",
    "self_cpu_memory_usage", "self_cuda_memory_usage", "count",
};
enum { NSORT = sizeof sort_names / sizeof sort_names[0] };

int sp_rep_sort_key_valid(const char *name)
{
    for (int i = 0; i < NSORT; i++)
        if (strcmp(name, sort_names[i]) == 0)
            return 0;
    return -1;
}

static double sort_value(const sp_rep_row_t *r, int key)
{
    switch (key) {
    case 0: return (double)r->cpu_total / (double)r->count;
    case 1: return (double)r->cuda_total / (double)r->count;
    case 2: return (double)r->cpu_total;
    case 3: return (double)r->cuda_total;
    case 4: return (double)r->self_cpu;
    case 5: return (double)r->self_cuda;
    case 6: return (double)r->cpu_mem;
    case 7: return (double)r->cuda_mem;
    case 8: return (double)r->self_cpu_mem;
    case 9: return (double)r->self_cuda_mem;
    default: return (double)r->count;
    }
}

typedef sp_rank_t keyed_t;

static int cmp_keyed(const void *pa, const void *pb)
{
    const keyed_t *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static void swap_keyed(keyed_t *a, keyed_t *b)
{
    keyed_t t = *a;
    *a = *b;
    *b = t;
}

/* Moves the `top` first keys (in cmp_keyed's order) to k[0..top), in no
 * order: quickselect on median-of-three pivots, O(n) on average; past a
 * depth bound (an input that keeps picking bad pivots) it sorts the rest. */
static void select_top(keyed_t *k, size_t n, size_t top)
{
    size_t lo = 0, hi = n, depth = 0;
    while (hi - lo > 16 && lo < top && top < hi) {
        if (++depth > 64) {
            qsort(k + lo, hi - lo, sizeof *k, cmp_keyed);
            return;
        }
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_keyed(&k[mid], &k[lo]) < 0)
            swap_keyed(&k[mid], &k[lo]);
        if (cmp_keyed(&k[hi - 1], &k[lo]) < 0)
            swap_keyed(&k[hi - 1], &k[lo]);
        if (cmp_keyed(&k[hi - 1], &k[mid]) < 0)
            swap_keyed(&k[hi - 1], &k[mid]);
        keyed_t pivot = k[mid];
        swap_keyed(&k[mid], &k[hi - 1]);
        size_t store = lo;
        for (size_t i = lo; i < hi - 1; i++)
            if (cmp_keyed(&k[i], &pivot) < 0)
                swap_keyed(&k[i], &k[store++]);
        swap_keyed(&k[store], &k[hi - 1]);   /* the pivot, in its final place */
        if (store < top)
            lo = store + 1;
        else
            hi = store;
    }
    if (lo < top && top < hi)
        qsort(k + lo, hi - lo, sizeof *k, cmp_keyed);
}

void sp_rep_rank(sp_rank_t *k, size_t n, size_t top)
{
    if (top < n)   /* a table of a million distinct names printing its top 10 sorts 10 */
        select_top(k, n, top);
    qsort(k, top < n ? top : n, sizeof *k, cmp_keyed);
}

int sp_rep_sort_rows(sp_rep_row_t *rows, long n, const char *sort_by, long limit)
{
    int key = 0;
    while (key < NSORT && strcmp(sort_by, sort_names[key]) != 0)
        key++;
    if (key == NSORT)
        return -1;
    keyed_t *k = malloc((n ? (size_t)n : 1) * sizeof *k);
    if (!k)
        return -1;
    for (long i = 0; i < n; i++)
        k[i] = (keyed_t){sort_value(&rows[i], key), (size_t)i};
    size_t top = limit >= 0 && limit < n ? (size_t)limit : (size_t)n;
    sp_rep_rank(k, (size_t)n, top);
    int rc = sp_rep_permute(rows, (size_t)n, sizeof *rows, k, top);
    free(k);
    return rc;
}

/* The top form: the top's items copied aside; the items in the first `top`
 * places that are not among them move into the places the top's items left
 * further on; then the copies go to the front in order. */
static int permute_top(char *b, size_t size, const sp_rank_t *k, size_t top)
{
    char *aside = malloc((top ? top : 1) * size);
    uint8_t *wanted = calloc(top ? top : 1, 1);   /* place p < top holds a top item */
    if (!aside || !wanted) {
        free(aside);
        free(wanted);
        return -1;
    }
    for (size_t j = 0; j < top; j++) {
        memcpy(aside + j * size, b + k[j].i * size, size);
        if (k[j].i < top)
            wanted[k[j].i] = 1;
    }
    size_t p = 0;
    for (size_t j = 0; j < top; j++) {   /* each top item from further on frees its place */
        if (k[j].i < top)
            continue;
        while (wanted[p])
            p++;
        memcpy(b + k[j].i * size, b + p * size, size);
        p++;
    }
    memcpy(b, aside, top * size);
    free(aside);
    free(wanted);
    return 0;
}

int sp_rep_permute(void *base, size_t n, size_t size, sp_rank_t *k, size_t top)
{
    if (top < n)
        return permute_top(base, size, k, top);
    char *b = base, *first = malloc(size ? size : 1);
    if (!first)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (k[i].i == SIZE_MAX)
            continue;
        memcpy(first, b + i * size, size);
        size_t j = i;
        while (k[j].i != i) {
            size_t from = k[j].i;
            memcpy(b + j * size, b + from * size, size);
            k[j].i = SIZE_MAX;
            j = from;
        }
        memcpy(b + j * size, first, size);
        k[j].i = SIZE_MAX;
    }
    free(first);
    return 0;
}

/* The top n frames of "outer;...;inner", innermost first: torch's evt.stack[:n]. */
static const char *top_frames(sp_rep_set_t *s, const char *stack, long n)
{
    if (!stack || !*stack || n <= 0)
        return NULL;
    size_t len = strlen(stack);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0, end = len;
    for (long taken = 0; taken < n; taken++) {
        size_t start = end;
        while (start > 0 && stack[start - 1] != ';')
            start--;
        if (o)
            out[o++] = ';';
        memcpy(out + o, stack + start, end - start);
        o += end - start;
        if (start == 0)
            break;
        end = start - 1;
    }
    const char *r = sp_rep_intern_n(s, out, o);
    free(out);
    return r;
}

/* Rows and their index by key, both grown as rows appear: a window has
 * few distinct keys, and an index sized by its events (touched all over by
 * the hashing) was 16 bytes per event at the export's peak. Keyed by name
 * and category alone (no shape, no stack: the default table), a name's rows
 * are chained from its string id instead, which needs no hashing and reads
 * the index in order when a window's names are mostly new (a million
 * distinct range names). */
typedef struct row_map {
    long *slot;   /* row index + 1, 0 = empty */
    size_t cap;
    sp_rep_row_t *rows;
    size_t n, room;
    int by_id;
    sp_rep_idmap_t first;   /* by_id: a name's last row + 1 */
    uint32_t *next;         /* by_id: the name's row before it + 1, 0 = none */
} row_map_t;

static size_t row_hash(const sp_rep_row_t *r, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)r->name * 31 + (uint64_t)r->cat;
    h = h * 1000003 ^ (uint64_t)(uintptr_t)r->shape;
    h = h * 1000003 ^ (uint64_t)(uintptr_t)r->stack;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (size_t)h & (cap - 1);
}

static int same_key(const sp_rep_row_t *a, const sp_rep_row_t *b)
{
    return a->name == b->name && a->cat == b->cat && a->shape == b->shape && a->stack == b->stack;
}

static size_t row_slot(const row_map_t *m, const sp_rep_row_t *key)
{
    size_t j = row_hash(key, m->cap);
    while (m->slot[j] && !same_key(&m->rows[m->slot[j] - 1], key))
        j = (j + 1) & (m->cap - 1);
    return j;
}

/* Room for one more row; 0, or -1 when out of memory. */
static int row_room(row_map_t *m)
{
    if (m->n == m->room) {
        size_t room = m->room ? m->room * 2 : 64;
        sp_rep_row_t *rows = realloc(m->rows, room * sizeof *rows);
        if (!rows)
            return -1;
        m->rows = rows;
        uint32_t *next = m->by_id ? realloc(m->next, room * sizeof *next) : NULL;
        if (m->by_id && !next)
            return -1;
        m->next = next;
        m->room = room;
    }
    if (m->by_id || (m->n + 1) * 2 <= m->cap)
        return 0;
    size_t cap = m->cap ? m->cap * 2 : 128;
    long *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    for (size_t k = 0; k < m->n; k++)
        m->slot[row_slot(m, &m->rows[k])] = (long)k + 1;
    return 0;
}

/* The row of key (whose name is the string id name), added when new;
 * -1 when out of memory. There is always room for one more row. */
static long row_of(row_map_t *m, const sp_rep_row_t *key, sp_rep_str_t name)
{
    long r;
    if (m->by_id) {
        uint32_t *at = sp_rep_idmap_at(&m->first, name);
        if (!at)
            return -1;
        for (r = (long)*at - 1; r >= 0 && m->rows[r].cat != key->cat; r = (long)m->next[r] - 1)
            ;
        if (r >= 0)
            return r;
        m->next[m->n] = *at;
        *at = (uint32_t)m->n + 1;
    } else {
        size_t j = row_slot(m, key);
        if ((r = m->slot[j] - 1) >= 0)
            return r;
        m->slot[j] = (long)m->n + 1;
    }
    m->rows[r = (long)m->n++] = *key;
    return row_room(m) == 0 ? r : -1;
}

static void add_to_row(sp_rep_row_t *r, const sp_rep_event_t *e, int64_t cuda_total, const sp_rep_mem_t *m)
{
    r->count++;
    if (sp_rep_is_host(e->cat)) {
        r->cpu_total += e->dur;
        r->self_cpu += e->self_cpu;
    } else if (sp_rep_is_gpu_work(e->cat)) {
        r->self_cuda += e->dur;
    }
    r->cuda_total += cuda_total;
    if (!m)
        return;
    r->cpu_mem += m->cpu;
    r->self_cpu_mem += m->self_cpu;
    r->cuda_mem += m->cuda;
    r->self_cuda_mem += m->self_cuda;
}

long sp_rep_rows(sp_rep_set_t *s, const sp_rep_opts_t *o, sp_rep_row_t **out)
{
    row_map_t m = {.by_id = !o->group_by_input_shape && o->group_by_stack_n <= 0};
    sp_rep_str_t step_id = sp_rep_intern_id(s, "ProfilerStep*");
    const char *none = sp_rep_str(s, s->no_shape_id);
    struct top_memo {
        sp_rep_str_t stack;   /* 0: none yet (an event's stack here is never 0) */
        const char *top;
    } top[256] = {{0}};
    int oom = row_room(&m) != 0;
    for (size_t i = 0; i < s->n && !oom; i++) {
        const sp_rep_event_t *e = &s->ev[i];
        if ((!sp_rep_is_host(e->cat) && !sp_rep_is_gpu_work(e->cat) && e->cat != SP_REP_SYNC) || sp_rep_merged(e))
            continue;
        sp_rep_row_t key = {0};
        sp_rep_str_t name = sp_rep_step(e) >= 0 ? step_id : e->name;
        key.name = sp_rep_str(s, name);
        key.cat = e->cat;
        key.shape = o->group_by_input_shape ? sp_rep_str(s, sp_rep_shape(s, e)) : none;
        sp_rep_str_t stack = sp_rep_stack(s, e);
        if (o->group_by_stack_n > 0 && stack) {   /* a window has few stacks: cut each once */
            struct top_memo *t = &top[stack & 255];
            if (t->stack != stack)
                *t = (struct top_memo){stack, top_frames(s, sp_rep_str(s, stack), o->group_by_stack_n)};
            key.stack = t->top;
        }
        long r = row_of(&m, &key, name);
        if ((oom = r < 0) == 0)
            add_to_row(&m.rows[r], e, sp_rep_cuda_total(s, i), s->mem ? &s->mem[i] : NULL);
    }
    free(m.slot);
    free(m.next);
    sp_rep_idmap_free(&m.first);
    if (oom || s->oom) {
        free(m.rows);
        return -1;
    }
    *out = m.rows;
    return (long)m.n;
}
