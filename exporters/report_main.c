/* exporters/report_main.c — build/stepprof-report: regenerates the reports
 * of a trace written by stepprof (or any Kineto-flavoured Chrome trace), so a
 * table can be re-sorted or regrouped without re-running the job:
 *
 *   stepprof-report TRACE[.gz] [--sort-by KEY] [--row-limit N]
 *                   [--group-by-input-shape] [--group-by-stack-n N]
 *                   [--summary] [--summary-json] [--stacks METRIC]
 *
 * With no output option it prints the key-average table, byte for byte what
 * the profiled process wrote with the same options (the aggregation is the
 * library's, exporters/agg*.c). The trace is streamed: a small scanner walks
 * the top-level object and cuts traceEvents into one event at a time, each
 * parsed with cJSON and dropped, so memory is the event array, not a DOM of
 * the file. zlib reads .gz and plain files alike. Exit 0 on success, 1 on a
 * bad trace (missing, truncated, not a trace), 2 on bad usage. Not part of
 * the preloaded library (cJSON is for offline tools only). */
#include "agg.h"
#include "report_buf.h"
#include "stacks_out.h"
#include "summary.h"
#include "table.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char *prog = "stepprof-report";

/* ---- byte source ---------------------------------------------------------- */

typedef struct src {
    gzFile gz;
    const char *path;
    unsigned char buf[1 << 18];
    int n, pos;
    long long offset;   /* bytes consumed before buf */
    int eof, err;
} src_t;

static int fill(src_t *s)
{
    if (s->eof || s->err)
        return 0;
    s->offset += s->n;
    s->pos = 0;
    s->n = gzread(s->gz, s->buf, sizeof s->buf);
    if (s->n <= 0) {
        int zerr;
        const char *msg = gzerror(s->gz, &zerr);
        s->n = 0;
        if (zerr != Z_OK && zerr != Z_STREAM_END) {
            fprintf(stderr, "%s: %s: cannot read: %s\n", prog, s->path, zerr == Z_ERRNO ? strerror(errno) : msg);
            s->err = 1;
        }
        s->eof = 1;
        return 0;
    }
    return 1;
}

static int peek(src_t *s)
{
    if (s->pos == s->n && !fill(s))
        return -1;
    return s->buf[s->pos];
}

static int next(src_t *s)
{
    int c = peek(s);
    if (c >= 0)
        s->pos++;
    return c;
}

static int skip_ws(src_t *s)
{
    int c;
    while ((c = peek(s)) == ' ' || c == '\n' || c == '\r' || c == '\t')
        s->pos++;
    return c;
}

static int fail(src_t *s, const char *what)
{
    if (!s->err)
        fprintf(stderr, "%s: %s: %s at byte %lld\n", prog, s->path, what, s->offset + s->pos);
    s->err = 1;
    return -1;
}

static int truncated(src_t *s)
{
    return fail(s, "truncated JSON (the file ends inside the trace)");
}

/* Copies the next JSON value's text into b: strings with escapes, nested
 * objects and arrays, scalars up to a delimiter. Full validation is cJSON's. */
static int read_value(src_t *s, sp_rb_t *b)
{
    b->n = 0;
    int depth = 0, c = skip_ws(s);
    if (c < 0)
        return truncated(s);
    do {
        c = next(s);
        if (c < 0)
            return truncated(s);
        char ch = (char)c;
        sp_rb_add(b, &ch, 1);
        if (c == '"') {
            for (;;) {
                c = next(s);
                if (c < 0)
                    return truncated(s);
                ch = (char)c;
                sp_rb_add(b, &ch, 1);
                if (c == '\\') {
                    if ((c = next(s)) < 0)
                        return truncated(s);
                    ch = (char)c;
                    sp_rb_add(b, &ch, 1);
                } else if (c == '"') {
                    break;
                }
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth < 0)
                return fail(s, "unbalanced JSON");
        } else if (depth == 0) {   /* a scalar: up to the next delimiter */
            while ((c = peek(s)) >= 0 && !strchr(",}] \n\r\t", c)) {
                ch = (char)next(s);
                sp_rb_add(b, &ch, 1);
            }
            if (c < 0)
                return truncated(s);
        }
    } while (depth > 0);
    return b->oom ? fail(s, "out of memory") : 0;
}

/* ---- events --------------------------------------------------------------- */

static const struct {
    const char *name;
    int cat;
} cats[] = {
    {"cuda_runtime", SP_REP_RUNTIME}, {"cuda_driver", SP_REP_DRIVER},   {"user_annotation", SP_REP_ANNOTATION},
    {"kernel", SP_REP_KERNEL},        {"gpu_memcpy", SP_REP_MEMCPY},     {"gpu_memset", SP_REP_MEMSET},
    {"cuda_sync", SP_REP_SYNC},       {"gpu_user_annotation", SP_REP_GPU_ANNOTATION},
    {"cpu_op", SP_REP_ANNOTATION},    /* PyTorch operators: rows like user ranges */
};


/* JSON numbers as integers: a trace may carry anything (4e40, -1, NaN is not
 * JSON but 1e999 parses as inf); converting an out-of-range double is
 * undefined, so every conversion clamps first. */
static int64_t num_i64(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    if (v <= -9.2e18)
        return INT64_MIN;
    return (int64_t)v;
}

static uint64_t num_u64(double v)
{
    if (!(v > 0))
        return 0;
    return v >= 1.8e19 ? UINT64_MAX : (uint64_t)v;
}

/* pids, tids and streams in 32 bits, as Linux and CUDA number them. A name
 * ("stream 7") or a number past 32 bits (another OS's thread ids) becomes a
 * negative number hashed from it: any stable number keeps lanes apart, and
 * only another such id can meet it (1 in 2^31 per pair). */
static int32_t away(uint64_t h)
{
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ull;
    return -(int32_t)(h >> 33) - 1;
}

static int32_t id_of(const cJSON *v)
{
    int64_t n;
    if (cJSON_IsNumber(v)) {
        n = num_i64(v->valuedouble);
    } else if (cJSON_IsString(v)) {
        char *end;
        errno = 0;
        n = strtoll(v->valuestring, &end, 10);
        if (!*v->valuestring || *end || errno) {
            uint64_t h = 5381;
            for (const char *p = v->valuestring; *p; p++)
                h = h * 33 + (unsigned char)*p;
            return away(h);
        }
    } else {
        return 0;
    }
    return n >= INT32_MIN && n <= INT32_MAX ? (int32_t)n : away((uint64_t)n ^ 0x5bd1e995u);
}

static int64_t ns_of(const cJSON *v)
{
    return cJSON_IsNumber(v) ? num_i64(llround(fmin(fmax(v->valuedouble * 1000.0, -9.2e18), 9.2e18))) : 0;
}

static int dims(const cJSON *a, unsigned out[3])
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
        return 0;
    for (int i = 0; i < 3; i++)
        out[i] = (unsigned)(num_u64(cJSON_GetArrayItem(a, i)->valuedouble) & 0xffffffffu);
    return 1;
}

static sp_rep_str_t str_arg(sp_rep_set_t *set, const cJSON *args, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsString(v) ? sp_rep_intern_id(set, v->valuestring) : 0;
}

/* "Input Dims" as torch prints it (and stepprof stores it): [[16, 32], [64]]. */
static void dims_text(sp_rb_t *b, const cJSON *v)
{
    if (!cJSON_IsArray(v)) {
        sp_rb_printf(b, "%lld", (long long)num_i64(cJSON_IsNumber(v) ? v->valuedouble : 0));
        return;
    }
    sp_rb_printf(b, "[");
    for (const cJSON *c = v->child; c; c = c->next) {
        dims_text(b, c);
        if (c->next)
            sp_rb_printf(b, ", ");
    }
    sp_rb_printf(b, "]");
}

static void add_args(sp_rep_set_t *set, sp_rep_event_t *r, const cJSON *args)
{
    sp_rep_detail_t d = sp_rep_no_detail(set);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(args, "Input Dims");
    if (cJSON_IsArray(in)) {
        sp_rb_t b;
        sp_rb_init(&b);
        dims_text(&b, in);
        d.shape = b.oom ? d.shape : sp_rep_intern_id_n(set, b.s ? b.s : "", b.n);
        sp_rb_free(&b);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, "correlation");
    if (!v)   /* a driver call made inside a runtime call (exporters/gpu_trace.c) */
        v = cJSON_GetObjectItemCaseSensitive(args, "stepprof_runtime_correlation");
    r->correlation = cJSON_IsNumber(v) ? num_u64(v->valuedouble) : 0;
    v = cJSON_GetObjectItemCaseSensitive(args, "bytes");
    if (cJSON_IsNumber(v)) {   /* an annotation's bytes field is its step (stepprof writes none there) */
        int64_t bytes = num_i64(v->valuedouble);
        if (r->cat != SP_REP_ANNOTATION)
            sp_rep_set_bytes(r, bytes);
        d.shape = sp_rep_shape_bytes(set, bytes);
    }
    unsigned grid[3], block[3];
    if (dims(cJSON_GetObjectItemCaseSensitive(args, "grid"), grid) &&
        dims(cJSON_GetObjectItemCaseSensitive(args, "block"), block)) {
        v = cJSON_GetObjectItemCaseSensitive(args, "shared memory");
        d.shape = sp_rep_shape_launch(set, grid, block, cJSON_IsNumber(v) ? num_u64(v->valuedouble) : 0);
        d.launch = r->cat == SP_REP_RUNTIME || r->cat == SP_REP_DRIVER;
    }
    if (r->cat == SP_REP_RUNTIME || r->cat == SP_REP_DRIVER) {
        sp_rep_detail_kind(set, &d, str_arg(set, args, "kind"));
        d.stack = str_arg(set, args, "Call stack");
    }
    sp_rep_set_detail(set, r, &d);
}

static void add_event(sp_rep_set_t *set, const cJSON *e)
{
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph"), *cat = cJSON_GetObjectItemCaseSensitive(e, "cat"),
                *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!cJSON_IsString(ph) || !cJSON_IsString(name))
        return;
    int c = -1;
    if (strcmp(ph->valuestring, "X") == 0 && cJSON_IsString(cat)) {
        for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
            if (strcmp(cat->valuestring, cats[i].name) == 0)
                c = cats[i].cat;
    } else if (strcmp(ph->valuestring, "i") == 0 && strcmp(name->valuestring, "[memory]") == 0) {
        c = SP_REP_MEMORY;
    }
    if (c < 0)
        return;
    sp_rep_event_t *r = sp_rep_add(set);
    if (!r)
        return;
    r->cat = c;
    r->name = sp_rep_intern_id(set, name->valuestring);
    long pid = id_of(cJSON_GetObjectItemCaseSensitive(e, "pid")), tid = id_of(cJSON_GetObjectItemCaseSensitive(e, "tid"));
    int device = 0;
    sp_rep_set_ts(r, ns_of(cJSON_GetObjectItemCaseSensitive(e, "ts")));
    sp_rep_set_dur(r, c == SP_REP_MEMORY ? 0 : ns_of(cJSON_GetObjectItemCaseSensitive(e, "dur")));
    if (sp_rep_is_gpu_work(c) || c == SP_REP_SYNC)
        device = (int16_t)pid;   /* as the in-process view keeps it: 16 bits */
    if (c == SP_REP_ANNOTATION && strncmp(name->valuestring, "ProfilerStep#", 13) == 0) {
        char *end;
        long n = strtol(name->valuestring + 13, &end, 10);
        sp_rep_set_step(r, *end || end == name->valuestring + 13 || n < 0 || n > INT32_MAX ? -1 : n);
    }
    if (c == SP_REP_MEMORY) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(args, "Bytes"),
                    *d = cJSON_GetObjectItemCaseSensitive(args, "Device Type");
        sp_rep_set_bytes(r, cJSON_IsNumber(b) ? num_i64(b->valuedouble) : 0);
        int64_t type = cJSON_IsNumber(d) ? num_i64(d->valuedouble) : 0;
        device = (int16_t)(type < 0 ? 0 : type > INT16_MAX ? INT16_MAX : type);
    } else if (cJSON_IsObject(args)) {
        add_args(set, r, args);
    }
    sp_rep_set_lane(set, r, pid, tid, device);
}

static int read_events(src_t *s, sp_rep_set_t *set, sp_rb_t *b)
{
    if (next(s) != '[')
        return fail(s, "traceEvents is not an array");
    if (skip_ws(s) == ']')
        return next(s), 0;
    for (;;) {
        if (read_value(s, b) != 0)
            return -1;
        cJSON *e = cJSON_ParseWithLength(b->s, b->n);
        if (!e)
            return fail(s, "invalid JSON in traceEvents");
        add_event(set, e);
        cJSON_Delete(e);
        if (set->oom)
            return fail(s, "out of memory");
        int c = skip_ws(s);
        next(s);
        if (c == ']')
            return 0;
        if (c != ',')
            return c < 0 ? truncated(s) : fail(s, "expected ',' or ']' in traceEvents");
    }
}

/* The top-level object: traceEvents streamed, other keys parsed whole. */
static int read_trace(src_t *s, sp_rep_set_t *set)
{
    sp_rb_t b;
    sp_rb_init(&b);
    int c = skip_ws(s), seen = 0, rc = 0;
    if (c != '{') {
        rc = c < 0 ? fail(s, "empty file, not a trace") : fail(s, "not a Chrome trace (no top-level object)");
        goto out;
    }
    next(s);
    for (;;) {
        c = skip_ws(s);
        if (c == '}')
            break;
        if (c != '"' || read_value(s, &b) != 0) {
            rc = c < 0 ? truncated(s) : fail(s, "expected a key");
            goto out;
        }
        cJSON *key = cJSON_ParseWithLength(b.s, b.n);
        int events = key && cJSON_IsString(key) && strcmp(key->valuestring, "traceEvents") == 0;
        int dropped = key && cJSON_IsString(key) &&
                      (strcmp(key->valuestring, "stepprof_dropped_events") == 0 ||
                       strcmp(key->valuestring, "stepprof_cupti_dropped_records") == 0);
        cJSON_Delete(key);
        if (skip_ws(s) != ':') {
            rc = peek(s) < 0 ? truncated(s) : fail(s, "expected ':'");
            goto out;
        }
        next(s);
        skip_ws(s);
        if (events) {
            seen = 1;
            if ((rc = read_events(s, set, &b)) != 0)
                goto out;
        } else {
            if ((rc = read_value(s, &b)) != 0)
                goto out;
            cJSON *v = dropped ? cJSON_ParseWithLength(b.s, b.n) : NULL;
            if (cJSON_IsNumber(v))
                set->dropped += num_u64(v->valuedouble);
            cJSON_Delete(v);
        }
        c = skip_ws(s);
        if (c == ',') {
            next(s);
        } else if (c != '}') {
            rc = c < 0 ? truncated(s) : fail(s, "expected ',' or '}'");
            goto out;
        }
    }
    next(s);
    if (!seen)
        rc = fail(s, "not a Chrome trace (no traceEvents array)");
    else if (skip_ws(s) >= 0)   /* also makes zlib check the gzip trailer */
        rc = fail(s, "unexpected data after the trace");
    else if (s->err)
        rc = -1;
out:
    sp_rb_free(&b);
    return rc;
}

/* ---- command line --------------------------------------------------------- */

static int usage(const char *why)
{
    if (why)
        fprintf(stderr, "%s: %s\n", prog, why);
    fprintf(stderr,
            "usage: %s TRACE[.gz] [--sort-by KEY] [--row-limit N] [--group-by-input-shape]\n"
            "       [--group-by-stack-n N] [--summary] [--summary-json] [--stacks METRIC]\n"
            "Prints the key-average table (default), the step summary (text or JSON) and/or collapsed\n"
            "stacks (METRIC: self_cpu_time_total or self_cuda_time_total) of a stepprof trace.\n",
            prog);
    return 2;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *stacks = NULL;
    sp_rep_opts_t o = {NULL, 20, 0, 0};
    int want_table = 0, want_summary = 0, want_json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--sort-by") == 0 && i + 1 < argc) {
            o.sort_by = argv[++i];
            if (sp_rep_sort_key_valid(o.sort_by) != 0)
                return usage("unknown --sort-by key (torch's names: cpu_time, cuda_time, cpu_time_total, "
                             "cuda_time_total, self_cpu_time_total, self_cuda_time_total, *_memory_usage, count)");
            want_table = 1;
        } else if (strcmp(a, "--row-limit") == 0) {
            if (parse_long(i + 1 < argc ? argv[++i] : NULL, &o.row_limit) != 0 || o.row_limit < -1)
                return usage("--row-limit takes an integer >= -1");
            want_table = 1;
        } else if (strcmp(a, "--group-by-stack-n") == 0) {
            if (parse_long(i + 1 < argc ? argv[++i] : NULL, &o.group_by_stack_n) != 0 || o.group_by_stack_n < 0)
                return usage("--group-by-stack-n takes an integer >= 0");
            want_table = 1;
        } else if (strcmp(a, "--group-by-input-shape") == 0) {
            o.group_by_input_shape = want_table = 1;
        } else if (strcmp(a, "--summary") == 0) {
            want_summary = 1;
        } else if (strcmp(a, "--summary-json") == 0) {
            want_json = 1;
        } else if (strcmp(a, "--stacks") == 0 && i + 1 < argc) {
            stacks = argv[++i];
            if (strcmp(stacks, "self_cpu_time_total") != 0 && strcmp(stacks, "self_cuda_time_total") != 0)
                return usage("--stacks takes self_cpu_time_total or self_cuda_time_total");
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(NULL);
            return 0;
        } else if (a[0] == '-' || path) {
            return usage(a[0] == '-' ? "unknown or incomplete option" : "one trace at a time");
        } else {
            path = a;
        }
    }
    if (!path)
        return usage("no trace given");
    if (!want_summary && !want_json && !stacks)
        want_table = 1;

    static src_t s;
    s.path = path;
    s.gz = gzopen(path, "rb");
    if (!s.gz) {
        fprintf(stderr, "%s: %s: cannot open: %s\n", prog, path, errno ? strerror(errno) : "out of memory");
        return 1;
    }
    sp_rep_set_t set;
    sp_rep_init(&set);
    int rc = read_trace(&s, &set) != 0 || s.err;
    gzclose(s.gz);
    if (!rc && sp_rep_analyze(&set) != 0)
        rc = fail(&s, "out of memory") != 0;
    sp_rb_t out;
    sp_rb_init(&out);
    if (!rc && want_table && sp_rep_table(&set, &o, &out) != 0)
        rc = fail(&s, "out of memory");
    if (!rc && want_summary && sp_rep_summary(&set, &out, NULL) != 0)
        rc = fail(&s, "out of memory");
    if (!rc && want_json && sp_rep_summary(&set, NULL, &out) != 0)
        rc = fail(&s, "out of memory");
    if (!rc && stacks && sp_rep_stacks(&set, stacks, &out) != 0)
        rc = fail(&s, "out of memory");
    if (!rc && (sp_rb_write_fd(&out, 1) != 0)) {
        fprintf(stderr, "%s: cannot write the output: %s\n", prog, strerror(errno));
        rc = 1;
    }
    sp_rb_free(&out);
    sp_rep_free(&set);
    return rc ? 1 : 0;
}
