/* exporters/ops_lists.c — the Input Dims of operators with tensor-list
 * arguments, regrouped as Kineto writes them (sp_ops_regroup, ops_trace.h).
 *
 * torch's NVTX text flattens a list argument: its tensors' sizes join the
 * top level, and an empty list (or a list of no tensors) is one "[]", as a
 * non-tensor argument is. Kineto writes a Tensor[] as the list of its
 * tensors' sizes, `[]` when it is empty or holds more than 30 tensors
 * (torch 2.15: 30 are written, 31 are not), and a Tensor?[] as `[]` (its
 * GenericList). The text does not say which overload ran, nor where the
 * lists end, so each overload (collectors/ops.h) is fitted to it: its
 * non-empty lists of one length (foreach ops take aligned lists), any of its
 * lists empty where the text has a "[]" (not a foreach op's: its kernels
 * refuse empty lists; a fused optimizer's optional max_exp_avg_sqs or
 * momentum buffers may be), "[]" wherever it takes no tensor. Among the
 * fits, in this order:
 * - an out= overload only when nothing else fits;
 * - the fewest tensors whose sizes differ, place by place, from the first
 *   list of real sizes (a foreach op's parameters, gradients and moments
 *   line up);
 * - the fewest lists left empty;
 * - when the fits left disagree on the lists' length: the list that the
 *   thread's next foreach or fused op (among the next 8 ops that showed one,
 *   any thread's) showed for sure (an optimizer steps its parameter groups
 *   one after another: the step counts' _foreach_add_, then that group's
 *   lerp or fused step), else those that any of the process's showed: a
 *   list of real sizes reads as one of them when it has its length and
 *   sizes, a list of 0-dim tensors when it has its length.
 *   `_foreach_add_(steps, 1)` on 17 0-dim steps is 18 "[]", as is the
 *   Tensor overload on 16 steps with its alpha; `_foreach_add_(denom, eps)`
 *   on [A, B, A, B] reads as the List overload on [A, B] and [A, B] too.
 *   Such a choice is the event's own: never remembered for the same text.
 *   Lengths still in doubt leave the text as torch wrote it;
 * - the most tensors agreeing place by place, then the fewest "[]" (0-dim
 *   tensors) put into lists, then the earliest lists empty (`_fused_adamw_`
 *   without amsgrad: its empty max_exp_avg_sqs precedes its state_steps).
 * Fits still tied with different groupings leave the text as torch wrote
 * it: never a wrong grouping. The exporter's thread only. */
#include "ops_trace.h"

#include "../collectors/hash.h"
#include "../collectors/ops.h"
#include "../collectors/ranges.h"
#include "../collectors/strings.h"

#include <stdlib.h>
#include <string.h>

#define ITEMS_MAX 4096      /* top-level entries of one sizes text */
#define MEMO 4096u          /* (name, sizes) -> regrouped text, for groupings no later cycle can change */
#define KINETO_LIST_MAX 30  /* the longest Tensor[] whose sizes Kineto writes */
#define MASK_LISTS 8        /* empty lists are tried at every place up to this many list arguments */
#define CAND_MAX 1024       /* fits of one operator's overloads: past that, the text stays flat */
#define SEEN_MAX 64         /* distinct lists (length, sizes) kept as evidence: about one per parameter group */

/* One sizes text, split. */
typedef struct items {
    const char *at[ITEMS_MAX];
    size_t len[ITEMS_MAX];
    int n;
} items_t;

/* A fit of one overload with some of its lists empty. */
typedef struct fit {
    int out;           /* an out= overload */
    size_t agree;      /* tensors with sizes equal to those at their place in the first list of sizes */
    size_t mismatch;   /* tensors whose sizes differ from those */
    int empties;       /* lists left empty */
    int score;         /* "[]" items put into lists */
    unsigned early;    /* the empty lists, the first argument's as the highest bit */
    size_t each;       /* the non-empty lists' length (0: all empty) */
    int real;          /* a non-empty list holds a tensor with sizes */
    uint64_t sig;      /* the first such list's sizes, hashed (0: none) */
} fit_t;

/* The lists of real sizes that foreach and fused ops showed for sure (the
 * process's): their length and their sizes, hashed. */
typedef struct list_sig {
    uint32_t each;
    uint64_t sig;
} list_sig_t;
static list_sig_t seen[SEEN_MAX];
static int nseen;

static int is_empty_item(const items_t *it, int i)
{
    return it->len[i] == 2 && memcmp(it->at[i], "[]", 2) == 0;
}

/* The top-level items of "[a, b, ...]"; -1 when malformed or too many. */
static int split_items(const char *t, items_t *it)
{
    size_t n = strlen(t);
    if (n < 2 || t[0] != '[' || t[n - 1] != ']')
        return -1;
    int k = 0, depth = 0;
    const char *start = t + 1;
    for (const char *p = t + 1; p < t + n - 1; p++) {
        depth += (*p == '[') - (*p == ']');
        if (depth == 0 && *p == ',') {
            if (k == ITEMS_MAX)
                return -1;
            it->at[k] = start, it->len[k++] = (size_t)(p - start);
            start = p + 1 + (p[1] == ' ');
        }
    }
    if (start < t + n - 1) {
        if (k == ITEMS_MAX)
            return -1;
        it->at[k] = start, it->len[k++] = (size_t)(t + n - 1 - start);
    }
    return it->n = k;
}

/* Fits the items to an overload's kinds (kinds[0..nk)), the lists in `empty`
 * (bit i: the i-th list argument) left empty: 0 and *f, with the regrouped
 * text in out (when out is not NULL) on success; -1 when they do not fit. */
static int fit(const char *kinds, size_t nk, unsigned empty, const items_t *it, fit_t *f, char *out, size_t cap)
{
    size_t lists = 0, nempty = 0;
    for (size_t i = 0; i < nk; i++)
        if (kinds[i] == 'L' || kinds[i] == 'O')
            nempty += (empty >> lists++) & 1;
    size_t plain = nk - lists, n = (size_t)it->n, full = lists - nempty;
    if (!lists || n < plain + nempty || (full ? (n - plain - nempty) % full : n != plain + nempty))
        return -1;
    *f = (fit_t){0, 0, 0, (int)nempty, 0, 0, full ? (n - plain - nempty) / full : 0, 0, 0};
    if (full && !f->each)
        return -1;
    size_t o = 0, list = 0;
    int item = 0, first = -1;
#define PUT(s, l) do { if (out) { if (o + (l) >= cap) return -1; memcpy(out + o, (s), (l)); } o += (l); } while (0)
    PUT("[", 1);
    for (size_t i = 0; i < nk; i++) {
        if (i)
            PUT(", ", 2);
        if (kinds[i] == 'T' || kinds[i] == '.') {
            if (kinds[i] == '.' && !is_empty_item(it, item))
                return -1;
            PUT(it->at[item], it->len[item]);
            item++;
            continue;
        }
        if ((empty >> list++) & 1) {   /* an empty list: one "[]" in the text */
            if (!is_empty_item(it, item++))
                return -1;
            f->early |= 1u << (lists - list);
            PUT("[]", 2);
            continue;
        }
        int shown = kinds[i] == 'L' && f->each <= KINETO_LIST_MAX, start = item, real = 0;
        PUT("[", 1);
        for (size_t j = 0; j < f->each; j++, item++) {
            int zero = is_empty_item(it, item);
            f->score += zero;
            real |= !zero;
            if (shown) {
                if (j)
                    PUT(", ", 2);
                PUT(it->at[item], it->len[item]);
            }
        }
        PUT("]", 1);
        /* Aligned lists (a foreach op's params, grads, moments) hold the same sizes place by place. */
        for (size_t j = 0; real && first >= 0 && j < f->each; j++) {
            int same = it->len[start + j] == it->len[first + j] &&
                       memcmp(it->at[start + j], it->at[first + j], it->len[start + j]) == 0;
            f->agree += same && !is_empty_item(it, start + j);
            f->mismatch += !same;
        }
        if (real && first < 0) {   /* the list's text in torch's, ", " between its items; never 0 */
            first = start;
            const char *end = it->at[item - 1] + it->len[item - 1];
            f->sig = sp_hash_bytes(it->at[start], (size_t)(end - it->at[start])) | 1;
        }
        f->real |= real;
    }
    PUT("]", 1);
#undef PUT
    if (out)
        out[o] = 0;
    return 0;
}

/* Whether a fit's lists read as list l: a list of real sizes with its length
 * and sizes; lists of 0-dim tensors only (step counts), with its length. */
static int reads_as(const fit_t *f, const list_sig_t *l)
{
    return f->each && l->each == f->each && (!f->sig || l->sig == f->sig);
}

static int was_seen(const fit_t *f)
{
    for (int i = 0; i < nseen; i++)
        if (reads_as(f, &seen[i]))
            return 1;
    return 0;
}

/* 1 when a beats b (both pass the filters, one list length). */
static int better(const fit_t *a, const fit_t *b)
{
    if (a->agree != b->agree)
        return a->agree > b->agree;
    return a->score < b->score || (a->score == b->score && a->early > b->early);
}

/* A fit with what renders it again. */
typedef struct cand {
    fit_t f;
    const char *kinds;
    size_t nk;
    unsigned empty;
} cand_t;

/* Every fit of every overload into c (with `full`, only fits with no list
 * empty); their count, or -1 past CAND_MAX. */
static long all_fits(const char *all, int full, const items_t *it, cand_t *c)
{
    long n = 0;
    for (const char *k = all; *k;) {
        size_t len = strcspn(k, "\t");
        int out = *k == '!';
        const char *kinds = k + out;
        size_t nk = len - (size_t)out, lists = 0;
        for (size_t i = 0; i < nk; i++)
            lists += kinds[i] == 'L' || kinds[i] == 'O';
        unsigned masks = !full && lists <= MASK_LISTS ? 1u << lists : 1;   /* past that: no list empty */
        for (unsigned m = 0; m < masks; m++) {
            if (n == CAND_MAX)
                return -1;
            if (fit(kinds, nk, m, it, &c[n].f, NULL, 0) == 0) {
                c[n].f.out = out;
                c[n].kinds = kinds, c[n].nk = nk, c[n].empty = m;
                n++;
            }
        }
        k += len + (k[len] == '\t');
    }
    return n;
}

/* Keeps the fits with the least key, in order; returns how many. */
static size_t keep_least(cand_t *c, size_t n, size_t (*key)(const fit_t *))
{
    size_t least = (size_t)-1, k = 0;
    for (size_t i = 0; i < n; i++)
        least = key(&c[i].f) < least ? key(&c[i].f) : least;
    for (size_t i = 0; i < n; i++)
        if (key(&c[i].f) == least)
            c[k++] = c[i];
    return k;
}

static size_t key_out(const fit_t *f) { return (size_t)f->out; }
static size_t key_mismatch(const fit_t *f) { return f->mismatch; }
static size_t key_empties(const fit_t *f) { return (size_t)f->empties; }

/* When a fit reads as list l (NULL: as one seen), keeps those only: 1; else 0, all kept. */
static int keep_reading_as(cand_t *c, size_t *n, const list_sig_t *l)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (l ? reads_as(&c[i].f, l) : was_seen(&c[i].f))
            c[k++] = c[i];
    if (k)
        *n = k;
    return k != 0;
}

/* The regrouped text of operator `name`'s sizes `text` (interned; 0 when
 * none fits, the fits tie, or their lengths stay in doubt). Among the fits,
 * in turn: not out=, the fewest mismatches, the fewest empty lists, then
 * (with use_seen) those reading as `next` or else as a list seen; their
 * lengths must agree; then the best (better()), unless one as likely reads
 * differently. *settled (with use_seen 0 only): 1 when no list seen later
 * could change it (it may be remembered); 0 when fits of different lengths
 * wait for the lists seen (nothing chosen), or on no memory. With use_seen,
 * `next` (or NULL) is the list the thread's next foreach or fused op showed:
 * an optimizer steps its groups one after another (`_foreach_add_(steps, 1)`
 * then the group's `_fused_adam_`). *shown: the chosen list when a foreach
 * or fused op shows one of real sizes, else zeroes. */
static uint32_t regroup_text(uint32_t name, const char *text, int use_seen, const list_sig_t *next,
                             list_sig_t *shown, int *settled)
{
    static items_t it;
    static cand_t c[CAND_MAX];
    const char *kinds = sp_ops_list_kinds(name);
    *settled = 1;
    *shown = (list_sig_t){0, 0};
    if (!kinds || split_items(text, &it) < 0)
        return 0;
    const char *nm = sp_str_get(name);
    int foreach = strstr(nm, "::_foreach_") != NULL, evidence = foreach || strstr(nm, "::_fused_");
    long all = all_fits(kinds, foreach, &it, c);
    if (all <= 0)
        return 0;
    size_t n = keep_least(c, keep_least(c, keep_least(c, (size_t)all, key_out), key_mismatch), key_empties);
    if (use_seen && !(next && keep_reading_as(c, &n, next)))
        keep_reading_as(c, &n, NULL);
    size_t each = 0;
    for (size_t i = 0; i < n; i++) {
        if (each && c[i].f.each && c[i].f.each != each) {
            *settled = 0;   /* lengths in doubt: they wait (pass 1) or stay flat */
            return 0;
        }
        each = c[i].f.each ? c[i].f.each : each;
    }
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        b = better(&c[i].f, &c[b].f) ? i : b;
    size_t cap = strlen(text) + 2 * ITEMS_MAX + 16;
    char *text_b = malloc(cap), *text_i = malloc(cap);
    fit_t g;   /* the fit again, with its text */
    int ok = text_b && text_i && fit(c[b].kinds, c[b].nk, c[b].empty, &it, &g, text_b, cap) == 0;
    for (size_t i = 0; ok && i < n; i++)   /* one as likely that reads differently: a tie */
        if (i != b && !better(&c[b].f, &c[i].f))
            ok = fit(c[i].kinds, c[i].nk, c[i].empty, &it, &g, text_i, cap) == 0 && strcmp(text_b, text_i) == 0;
    uint32_t id = ok ? sp_str_intern(text_b) : 0;
    *settled = ok || (text_b && text_i);   /* no memory: not remembered */
    free(text_b), free(text_i);
    /* A list of real sizes in a foreach or fused op: evidence for the others. */
    if (id && evidence && c[b].f.real && c[b].f.each) {
        *shown = (list_sig_t){(uint32_t)c[b].f.each, c[b].f.sig};
        if (!use_seen && nseen < SEEN_MAX && !was_seen(&c[b].f))   /* never evidence from evidence */
            seen[nseen++] = *shown;
    }
    return id;
}

/* The Input Dims id of operator `name` with torch's flattened sizes text
 * `sizes`; *settled 0 when it waits for the lengths seen; *shown as
 * regroup_text's. */
static uint32_t regroup(uint32_t name, uint32_t sizes, int use_seen, const list_sig_t *next, list_sig_t *shown,
                        int *settled)
{
    static struct {
        uint32_t name, sizes, out;
        list_sig_t shown;
    } memo[MEMO];
    *settled = 1;
    *shown = (list_sig_t){0, 0};
    if (!sp_ops_list_kinds(name))
        return sizes;
    uint32_t h = (name * 0x9E3779B1u ^ sizes * 0x85EBCA77u) & (MEMO - 1);
    if (memo[h].name == name && memo[h].sizes == sizes) {
        *shown = memo[h].shown;
        return memo[h].out;
    }
    uint32_t id = regroup_text(name, sp_str_get(sizes), use_seen, next, shown, settled);
    id = id ? id : sizes;
    if (*settled && !use_seen)   /* a choice evidence made is the event's own */
        memo[h].name = name, memo[h].sizes = sizes, memo[h].out = id, memo[h].shown = *shown;
    return id;
}

/* An operator that showed a list for sure: where, on which thread, what. */
typedef struct anchor {
    size_t index;
    int tid;
    list_sig_t list;
} anchor_t;

/* The list of the first anchor after event i on thread tid (among the next
 * few anchors: an optimizer's next op follows closely), NULL when none. */
static const list_sig_t *next_list(const anchor_t *a, size_t na, size_t i, int tid)
{
    size_t lo = 0, hi = na;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid].index <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k < na && k < lo + 8; k++)
        if (a[k].tid == tid)
            return &a[k].list;
    return NULL;
}

/* Appends to a growable array of `size`-byte items; -1 when out of memory. */
static int append(void **arr, size_t *n, size_t *cap, const void *item, size_t size)
{
    if (*n == *cap) {
        void *grown = realloc(*arr, (*cap * 2 + 16) * size);
        if (!grown)
            return -1;
        *arr = grown, *cap = *cap * 2 + 16;
    }
    memcpy((char *)*arr + *n * size, item, size);
    (*n)++;
    return 0;
}

void sp_ops_regroup(const sp_event_ref_t *ev, size_t n)
{
    /* First whatever no list length can change (and the lists it shows),
     * then the rest (a few per optimizer step: their indices kept). */
    void *wait = NULL, *anch = NULL;   /* size_t, anchor_t */
    size_t nwait = 0, capwait = 0, nanch = 0, capanch = 0;
    for (size_t i = 0; i < n; i++) {
        sp_event_t *e = ev[i].ev;
        int settled;
        list_sig_t shown;
        if (e->kind != SP_EV_RANGE || !(e->flags & SP_RANGE_OP) || !e->a[2])
            continue;
        uint32_t id = regroup(e->name, (uint32_t)e->a[2], 0, NULL, &shown, &settled);
        if (!settled) {
            append(&wait, &nwait, &capwait, &i, sizeof i);   /* no memory: it keeps torch's text */
            continue;
        }
        e->a[2] = id;
        if (shown.each)
            append(&anch, &nanch, &capanch, &(anchor_t){i, sp_ev_owner(e)->tid, shown}, sizeof(anchor_t));
    }
    const size_t *waiting = wait;
    for (size_t k = 0; k < nwait; k++) {
        sp_event_t *e = ev[waiting[k]].ev;
        int settled;
        list_sig_t shown;
        const list_sig_t *next = next_list(anch, nanch, waiting[k], sp_ev_owner(e)->tid);
        e->a[2] = regroup(e->name, (uint32_t)e->a[2], 1, next, &shown, &settled);
    }
    free(wait);
    free(anch);
}
