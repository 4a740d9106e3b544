/* collectors/ops.c — see ops.h. torch writes one NVTX message per operator
 * call: the name, then ", seq = N" when the op has a sequence number (forward
 * ops that record autograd and the backward nodes that run them), ", op_id =
 * N" always, ", sizes = [...]" with record_shapes, ", input_op_ids = [...]".
 * op_id grows without end, so the message as a whole is never interned: the
 * name and the sizes text are, separately (both have few distinct values).
 * Outside a record window nothing is interned; the push only keeps NVTX's
 * push/pop pairing. What is an operator follows Kineto's split between
 * cpu_op and user_annotation: aten/autograd ops ("::" in the name), backward
 * nodes (with a sequence number, or "...Backward<N>"), C++ function scopes
 * (with inputs, or directly inside the aten op of the same name: "detach" in
 * "aten::detach"); everything else is a record_function scope
 * (Optimizer.step#Adam.step, user scopes). A node with a
 * sequence number directly inside the engine's evaluate_function wrapper is
 * backward work: both are marked so, and the wrapper gets the node's number,
 * as Kineto gives it. With with_stack an operator carries the Python frames
 * of its thread (no native unwind: torch.profiler shows Python frames only). */
#define _GNU_SOURCE
#include "ops.h"

#include "events.h"
#include "ranges.h"
#include "stacks.h"
#include "strings.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define OP_ID ", op_id = "
#define SEQ ", seq = "
#define SIZES ", sizes = "
#define INPUT_IDS ", input_op_ids = "
#define EVAL "autograd::engine::evaluate_function: "

/* Per-thread cache in front of the string table (whose lock and hash every
 * operator would otherwise take twice): a hit is a hash of the text and one
 * compare with the interned copy, which is never freed. Heap-allocated so the
 * library's static TLS stays one pointer; freed when the thread ends. */
#define CACHE 512u
typedef struct cached {
    uint64_t hash;
    const char *copy;
    uint32_t len, id;
} cached_t;
static __thread cached_t *cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void make_key(void)
{
    pthread_key_create(&cache_key, free);
}

static void new_cache(void)
{
    pthread_once(&cache_once, make_key);
    cache = calloc(CACHE, sizeof *cache);
    if (cache)
        pthread_setspecific(cache_key, cache);
}

static uint32_t intern_n(const char *s, size_t n)
{
    char buf[1024];
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    if (!cache)
        new_cache();
    cached_t *c = cache ? &cache[h & (CACHE - 1)] : NULL;
    if (c && c->copy && c->hash == h && c->len == n && memcmp(c->copy, s, n) == 0)
        return c->id;
    memcpy(buf, s, n);
    buf[n] = 0;
    uint32_t id = sp_str_intern(buf);
    if (c && id)
        *c = (cached_t){h, sp_str_get(id), (uint32_t)n, id};
    return id;
}

static int backward_node(const char *name, size_t n)
{
    while (n && isdigit((unsigned char)name[n - 1]))
        n--;
    return n >= 8 && memcmp(name + n - 8, "Backward", 8) == 0;
}

/* Is the interned parent name "aten::" followed by the n bytes of name? */
static int same_aten(uint32_t parent, const char *name, size_t n)
{
    char buf[1024];
    if (n + 7 > sizeof buf)
        return 0;
    memcpy(buf, "aten::", 6);
    memcpy(buf + 6, name, n);
    return intern_n(buf, n + 6) == parent;
}

static __attribute__((noinline)) int push_op(const char *msg, const char *comma)
{
    const char *id = strstr(comma, OP_ID);
    if (!id)
        return 0;
    sp_range_op_t op = {0, 0, 0, 0};
    if (!sp_win_records(sp_ev_gate_load())) {
        sp_range_push_op(0, &op);
        return 1;
    }
    op.flags = SP_RANGE_TORCH;
    const char *seq = strstr(msg, SEQ);
    const char *end = seq && seq < id ? seq : id;
    size_t n = (size_t)(end - msg);
    if (seq && seq < id)
        op.seq = strtoull(seq + strlen(SEQ), NULL, 10) + 1;
    const char *sizes = strstr(id, SIZES);
    uint32_t parent_name = 0, name = intern_n(msg, n);
    sp_range_op_t *parent = sp_range_top_op(&parent_name);
    if (op.seq || sizes || memmem(msg, n, "::", 2) || backward_node(msg, n) ||
        (parent && (parent->flags & SP_RANGE_OP) && same_aten(parent_name, msg, n)))
        op.flags |= SP_RANGE_OP;
    if (n > strlen(EVAL) && memcmp(msg, EVAL, strlen(EVAL)) == 0)
        op.flags |= SP_RANGE_EVAL;
    if (op.seq && parent && (parent->flags & SP_RANGE_EVAL)) {
        op.flags |= SP_RANGE_BWD;
        parent->flags |= SP_RANGE_BWD;
        parent->seq = op.seq;
    }
    if (sizes) {
        sizes += strlen(SIZES);
        const char *stop = strstr(sizes, INPUT_IDS);
        op.shapes = intern_n(sizes, stop ? (size_t)(stop - sizes) : strlen(sizes));
    }
    op.stack = sp_stack_capture_py_if_on();
    sp_range_push_op(name, &op);
    return 1;
}

/* Every NVTX push asks: most user ranges have no ',' (one fast scan) and
 * cost nothing more. */
int sp_ops_push(const char *msg)
{
    const char *comma = msg ? strchr(msg, ',') : NULL;
    return comma ? push_op(msg, comma) : 0;
}

/* The list-argument table: operator name ids, sorted, each with its overloads' kinds. */
typedef struct list_op {
    uint32_t name;
    const char *kinds;   /* "L.\tL.T": overloads separated by tabs */
} list_op_t;
static struct {
    list_op_t *op;
    size_t n;
} *_Atomic lists;

static int cmp_list_op(const void *a, const void *b)
{
    const list_op_t *x = a, *y = b;
    return (x->name > y->name) - (x->name < y->name);
}

void sp_ops_set_lists(const char *table)
{
    if (atomic_load(&lists) || !table)
        return;
    size_t lines = 1;
    for (const char *p = table; *p; p++)
        lines += *p == '\n';
    char *copy = strdup(table);
    list_op_t *op = calloc(lines, sizeof *op);
    __typeof__(*lists) *l = malloc(sizeof *l);
    if (!copy || !op || !l) {
        free(copy), free(op), free(l);
        return;
    }
    size_t n = 0;
    for (char *line = copy, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = 0;
        uint32_t id = sp_str_intern(line);
        if (id)
            op[n++] = (list_op_t){id, tab + 1};
    }
    qsort(op, n, sizeof *op, cmp_list_op);
    l->op = op;
    l->n = n;
    __typeof__(l) none = NULL;   /* two first callers: one table wins, the other is freed */
    if (!atomic_compare_exchange_strong(&lists, &none, l))
        free(copy), free(op), free(l);   /* the winner's copy lives as long as the process */
}

const char *sp_ops_list_kinds(uint32_t name)
{
    __typeof__(*lists) *l = atomic_load(&lists);
    list_op_t key = {name, NULL};
    const list_op_t *hit = l ? bsearch(&key, l->op, l->n, sizeof *l->op, cmp_list_op) : NULL;
    return hit ? hit->kinds : NULL;
}
