/* schedule/config_yaml.c — reads the `profiling:` section of a YAML file into
 * sp_config_t with libyaml's event API, so that a large training config costs
 * one pass and no document tree; every other top-level key is skipped
 * unread. It owns what can be wrong with the file itself: syntax errors, a
 * value or group of the wrong node kind, an unknown or repeated key, a typo of
 * profiling:, settings written at the top level of a file without profiling:
 * (a warning: a training config may have an output_dir of its own). Values
 * are parsed by config.c (sp_cfg_apply), so a value means the same in the
 * file as in PROF_*. Every message names file:line:column:,
 * and a syntax error anywhere in the file wins over a bad value before it.
 * It also owns the file guards: only a regular file of at most
 * SP_CFG_MAX_FILE_BYTES is read (opened without blocking, so a FIFO or a
 * terminal is refused, never waited on or drained), and nesting deeper than
 * SP_CFG_MAX_DEPTH stops the parse (libyaml's cost grows with the depth). */
#define _GNU_SOURCE
#include "config_int.h"

#include "../collectors/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* A training config that embeds profiling: is kilobytes; a file past 4 MiB is
 * not one. No real config nests 64 deep. */
#define SP_CFG_MAX_FILE_BYTES (4u << 20)
#define SP_CFG_MAX_DEPTH 64

/* A problem found while reading is kept in msg, not printed at once: a syntax
 * error further down the file, which explains more, takes its place. */
struct reader {
    sp_config_t *cfg;
    const char *file;
    yaml_parser_t parser;
    size_t line[SP_CFG_NKEYS]; /* where the file set each key, for "set twice" */
    char msg[1024];
    int syntax;                /* msg is libyaml's */
    size_t profiling_line;     /* of the profiling: key, 0 before it, for "appears twice" */
    int depth;                 /* mappings and sequences open at the last event read */
    char stray[160];           /* top-level keys named like settings ("active, marker"), for a file
                                * without profiling: */
    yaml_mark_t stray_mark;    /* of the first of them */
};

/* Keeps "file:line:column: <message>" (libyaml marks are 0-based). */
__attribute__((format(printf, 3, 4))) static int rfail(struct reader *r, yaml_mark_t m, const char *fmt, ...)
{
    va_list ap;
    sp_cfg_say(r->msg, sizeof r->msg, "%s:%zu:%zu: ", r->file, m.line + 1, m.column + 1);
    va_start(ap, fmt);
    sp_cfg_vappend(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int yaml_fail(struct reader *r)
{
    const yaml_parser_t *p = &r->parser;
    const char *problem = p->problem ? p->problem : "syntax error";
    r->syntax = 1;
    if (p->error == YAML_MEMORY_ERROR)
        return sp_cfg_say(r->msg, sizeof r->msg, "%s: out of memory while reading YAML", r->file);
    if (p->error == YAML_READER_ERROR)
        return sp_cfg_say(r->msg, sizeof r->msg, "%s: invalid YAML: %s at byte %zu", r->file, problem,
                          p->problem_offset);
    if (!p->context)
        return rfail(r, p->problem_mark, "invalid YAML: %s", problem);
    return rfail(r, p->problem_mark, "invalid YAML: %s (%s at line %zu, column %zu)", problem, p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
}

static int next(struct reader *r, yaml_event_t *ev)
{
    /* On failure libyaml leaves ev zeroed: nothing to delete. */
    if (!yaml_parser_parse(&r->parser, ev))
        return yaml_fail(r);
    if (ev->type == YAML_MAPPING_START_EVENT || ev->type == YAML_SEQUENCE_START_EVENT)
        r->depth++;
    else if (ev->type == YAML_MAPPING_END_EVENT || ev->type == YAML_SEQUENCE_END_EVENT)
        r->depth--;
    if (r->depth <= SP_CFG_MAX_DEPTH)
        return 0;
    /* Counts as a syntax error: it ends the parse and wins over any other message. */
    yaml_mark_t m = ev->start_mark;
    yaml_event_delete(ev);
    r->syntax = 1;
    return rfail(r, m, "nested deeper than %d levels; not read further", SP_CFG_MAX_DEPTH);
}

static const char *node_kind(yaml_event_type_t t)
{
    if (t == YAML_MAPPING_START_EVENT)
        return "a mapping";
    if (t == YAML_SEQUENCE_START_EVENT)
        return "a sequence";
    return t == YAML_ALIAS_EVENT ? "an alias (YAML anchors are not followed here)" : "a scalar";
}

static int is_null(const yaml_event_t *ev)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp((const char *)ev->data.scalar.value, nulls[i]) == 0)
            return 1;
    return 0;
}

/* Consumes the rest of a node whose first event (of type t) was already read. */
static int skip_rest(struct reader *r, yaml_event_type_t t)
{
    for (int depth = t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT; depth > 0;) {
        yaml_event_t ev;
        if (next(r, &ev))
            return -1;
        if (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT)
            depth++;
        else if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT)
            depth--;
        yaml_event_delete(&ev);
    }
    return 0;
}

/* One key of a mapping and the first event of its value. */
struct pair {
    char key[128];          /* "" unless the key is a scalar */
    yaml_mark_t mark;       /* of the key */
    yaml_event_type_t type; /* of the key's first event */
    yaml_event_t v;         /* the caller deletes it */
};

/* Reads the next key of a mapping and the first event of its value into *p.
 * 1 at the end of the mapping, 0 for a pair, -1 on error. */
static int read_pair(struct reader *r, struct pair *p)
{
    yaml_event_t kev;
    if (next(r, &kev))
        return -1;
    p->mark = kev.start_mark;
    p->type = kev.type;
    snprintf(p->key, sizeof p->key, "%s", kev.type == YAML_SCALAR_EVENT ? (const char *)kev.data.scalar.value : "");
    yaml_event_delete(&kev);
    if (p->type == YAML_MAPPING_END_EVENT)
        return 1;
    return skip_rest(r, p->type) || next(r, &p->v) ? -1 : 0;
}

/* Hands each pair of the mapping being read to fn and frees its value event,
 * the one loop for the document's top level and for every group below
 * profiling:. 0 at the end of the mapping, -1 at the first failure. */
static int each_pair(struct reader *r, int (*fn)(struct reader *, const struct pair *, const void *), const void *ctx)
{
    for (;;) {
        struct pair p;
        int rc = read_pair(r, &p);
        if (rc)
            return rc > 0 ? 0 : -1;
        rc = fn(r, &p, ctx);
        yaml_event_delete(&p.v);
        if (rc)
            return -1;
    }
}

static int read_group(struct reader *r, const char *prefix, const yaml_event_t *v);

static int read_value(struct reader *r, const struct key *k, yaml_mark_t kmark, const yaml_event_t *v)
{
    char why[600];
    size_t id = (size_t)(k - sp_cfg_keys);
    if (v->type != YAML_SCALAR_EVENT) {
        sp_cfg_expect(k, why, sizeof why);
        return rfail(r, v->start_mark, "profiling.%s: %s, got %s", k->name, why, node_kind(v->type));
    }
    if (r->line[id])
        return rfail(r, kmark, "profiling.%s is set twice (first on line %zu)", k->name, r->line[id]);
    const char *text = is_null(v) ? "" : (const char *)v->data.scalar.value;
    if (strlen(text) != v->data.scalar.length)
        return rfail(r, v->start_mark, "profiling.%s: value contains a NUL character", k->name);
    if (sp_cfg_apply(r->cfg, k, text, SP_CFG_SRC_FILE, why, sizeof why))
        return rfail(r, v->start_mark, "profiling.%s: %s", k->name, why);
    r->line[id] = kmark.line + 1;
    return 0;
}

/* One `name: value` pair below profiling: (name is the dotted path). */
static int read_entry(struct reader *r, const char *name, yaml_mark_t kmark, const yaml_event_t *v, int top)
{
    struct best b;
    const struct key *k = sp_cfg_find_key(name);
    if (k)
        return read_value(r, k, kmark, v);
    if (top && sp_cfg_is_group(name))
        return read_group(r, name, v);
    if (sp_cfg_suggest_key(name, top, &b)[0])
        return rfail(r, kmark, "unknown key profiling.%s (did you mean profiling.%s?)", name, b.name);
    return rfail(r, kmark, "unknown key profiling.%s (profiling.example.yaml lists every key)", name);
}

/* each_pair's step for a group; ctx is its prefix ("" for profiling: itself). */
static int group_pair(struct reader *r, const struct pair *p, const void *ctx)
{
    const char *prefix = ctx;
    char name[192];
    snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", p->key);
    if (p->type != YAML_SCALAR_EVENT)
        return rfail(r, p->mark, "expected a key name in profiling%s%s, got %s", *prefix ? "." : "", prefix,
                     node_kind(p->type));
    return read_entry(r, name, p->mark, &p->v, !*prefix);
}

/* The mapping of settings under profiling: (prefix "") or one of its groups
 * (prefix "table"); v is the value's first event. Empty (null) is fine. */
static int read_group(struct reader *r, const char *prefix, const yaml_event_t *v)
{
    if (is_null(v))
        return 0;
    if (v->type != YAML_MAPPING_START_EVENT)
        return rfail(r, v->start_mark, "profiling%s%s: expected a mapping of settings, got %s", *prefix ? "." : "",
                     prefix, node_kind(v->type));
    return each_pair(r, group_pair, prefix);
}

/* each_pair's step for the document's top-level mapping: only profiling: is
 * read, the rest skipped. */
static int top_pair(struct reader *r, const struct pair *p, const void *ctx)
{
    (void)ctx;
    int ours = p->type == YAML_SCALAR_EVENT && strcmp(p->key, "profiling") == 0;
    if (ours && r->profiling_line)
        return rfail(r, p->mark, "profiling: appears twice (first on line %zu)", r->profiling_line);
    if (ours) {
        r->profiling_line = p->mark.line + 1;
        return read_group(r, "", &p->v);
    }
    if (p->type == YAML_SCALAR_EVENT && sp_cfg_distance(p->key, "profiling") <= 2)
        return rfail(r, p->mark, "top-level key %s looks like a typo (did you mean profiling?)", p->key);
    if (p->type == YAML_SCALAR_EVENT && (sp_cfg_find_key(p->key) || sp_cfg_is_group(p->key))) {
        if (!r->stray[0])
            r->stray_mark = p->mark;
        sp_cfg_append(r->stray, sizeof r->stray, "%s%s", r->stray[0] ? ", " : "", p->key);
    }
    return skip_rest(r, p->v.type);
}

/* Reads the first document and drains the rest of the stream, so that a
 * syntax error anywhere in the file is reported, before anything it caused. */
static int read_stream(struct reader *r)
{
    int documents = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (next(r, &ev))
            return -1;
        yaml_event_type_t t = ev.type;
        documents += t == YAML_DOCUMENT_START_EVENT;
        if (rc == 0 && t == YAML_MAPPING_START_EVENT && documents == 1)
            rc = each_pair(r, top_pair, NULL);
        else if (rc == 0)
            rc = skip_rest(r, t);
        yaml_event_delete(&ev);
        if (r->syntax || t == YAML_STREAM_END_EVENT)
            return r->syntax ? -1 : rc;
    }
}

/* Opens path without blocking and reads it whole if it is a regular file of
 * at most SP_CFG_MAX_FILE_BYTES. 0 with *text (malloc'd) and *len; 1 for a
 * missing file that need not exist; -1 with the message (naming the file
 * shown) in msg. */
static int read_file(const char *path, const char *shown, int named, char **text, size_t *len, char *msg,
                     size_t n)
{
    char err[128];
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && !named)
        return 1;
    if (fd < 0)
        return sp_cfg_say(msg, n, "%s: cannot open config file: %s%s", shown, strerror_r(errno, err, sizeof err),
                          named ? " (named by PROF_CONFIG)" : "");
    int rc = -1;
    size_t got = 0;
    char *buf = NULL;
    if (fstat(fd, &st) != 0)
        sp_cfg_say(msg, n, "%s: cannot read config file: %s", shown, strerror_r(errno, err, sizeof err));
    else if (S_ISDIR(st.st_mode))
        sp_cfg_say(msg, n, "%s: cannot read config file: it is a directory", shown);
    else if (!S_ISREG(st.st_mode))
        sp_cfg_say(msg, n, "%s: cannot read config file: not a regular file (a pipe, FIFO or device is "
                   "never read)", shown);
    else if ((uint64_t)st.st_size > SP_CFG_MAX_FILE_BYTES)
        sp_cfg_say(msg, n, "%s: config file is %jd bytes, more than the %u a config file may have", shown,
                   (intmax_t)st.st_size, SP_CFG_MAX_FILE_BYTES);
    else if (!(buf = malloc(SP_CFG_MAX_FILE_BYTES + 1)))
        sp_cfg_say(msg, n, "%s: out of memory while reading YAML", shown);
    else {
        /* The file may grow after fstat: read at most one byte past the limit. */
        for (;;) {
            ssize_t k = read(fd, buf + got, SP_CFG_MAX_FILE_BYTES + 1 - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0) {
                sp_cfg_say(msg, n, "%s: cannot read config file: %s", shown, strerror_r(errno, err, sizeof err));
                break;
            }
            got += (size_t)k;
            if (k == 0 || got > SP_CFG_MAX_FILE_BYTES) {
                rc = got > SP_CFG_MAX_FILE_BYTES ? sp_cfg_say(msg, n, "%s: config file is more than the %u "
                                                              "bytes a config file may have", shown,
                                                              SP_CFG_MAX_FILE_BYTES) : 0;
                break;
            }
        }
    }
    close(fd);
    if (rc) {
        free(buf);
        return -1;
    }
    *text = buf;
    *len = got;
    return 0;
}

/* The name messages give path: its end when it is long, so that a message
 * still has room for what is wrong. */
static const char *shown_path(const char *path, char *buf, size_t n)
{
    size_t len = strlen(path);
    if (len < n)
        return path;
    snprintf(buf, n, "...%s", path + len - (n - 4));
    return buf;
}

int sp_cfg_load_file(sp_config_t *cfg, const char *path, int named)
{
    char shown[256];
    struct reader r = {.cfg = cfg, .file = shown_path(path, shown, sizeof shown)};
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, r.file, named, &text, &len, r.msg, sizeof r.msg);
    if (rc > 0)
        return 0;
    if (rc == 0 && !yaml_parser_initialize(&r.parser))
        rc = sp_cfg_say(r.msg, sizeof r.msg, "%s: out of memory while reading YAML", r.file);
    else if (rc == 0) {
        yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, len);
        rc = read_stream(&r);
        yaml_parser_delete(&r.parser);
    }
    free(text);
    if (rc)
        return sp_cfg_fail("%s", r.msg);
    /* Settings written without their profiling: parent would be ignored in
     * silence; they are not an error, since a training config may have keys
     * of its own called output_dir or ranks. */
    if (!r.profiling_line && r.stray[0])
        sp_log(SP_LOG_WARN, "%s:%zu:%zu: %s at the top level: only settings under a top-level profiling: mapping "
               "are read, so these are ignored (indent them under profiling:)", r.file, r.stray_mark.line + 1,
               r.stray_mark.column + 1, r.stray);
    snprintf(cfg->source, sizeof cfg->source, "%s", path);
    return 0;
}
