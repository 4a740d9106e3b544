/* schedule/config.h — the resolved configuration of one run: defaults, then
 * the `profiling:` section of $PROF_CONFIG (else ./profiling.yaml), then the
 * PROF_* environment. The keys themselves are listed once, in config_keys.h.
 *
 * Contract of sp_config_load: it never exits or crashes on any input and keeps
 * no global state. On the first problem it prints exactly one line,
 *   stepprof: <where>: <what>; profiling disabled for this run
 * and returns -1 with out->enabled = 0; the caller then runs the program
 * without profiling and prints nothing more. <where> is "file:line:column: "
 * for a file value or key, "PROF_X=\"value\": " for the environment, "file: "
 * for an unreadable file. A syntax error anywhere in the file is reported in
 * preference to a bad value before it. Warnings (warmup 0 with a schedule, a
 * PROF_* variable that resembles no key) print one line each and do not fail.
 *
 * A schedule is any of skip_first..repeat set by file or env (even to its
 * default value); it needs a marker: a step marker or a signal. With no
 * schedule the whole run is one window (torch's default). */
#ifndef SP_CONFIG_H
#define SP_CONFIG_H

#include <stddef.h>

#include "config_keys.h"

typedef enum { SP_MARK_NONE, SP_MARK_NVTX, SP_MARK_FUNCTION, SP_MARK_KERNEL, SP_MARK_PROFILER_API,
               SP_MARK_TORCH } sp_marker_kind_t;

/* Set (before activation) by inject/torch.c when a Python process imports
 * torch: a configuration with no step marker then gets the torch marker. */
extern int sp_config_torch_default;
/* Set at activation (inject/preload.c) in a process that imported torch, on
 * a machine without a CUDA driver: CUPTI is then not loaded, and no line says
 * so (NVIDIA's CUPTI 13.2 overflows the stack in cuptiSubscribe when
 * libcuda.so.1 is missing; collectors/cupti.c checks in other processes). */
extern int sp_config_no_driver;

/* A parsed marker spec. every_n is 1 unless kernel:GLOB/N gave N; signo is 0
 * unless has_signal. name is the NVTX range name, symbol or kernel glob;
 * scope the NVTX domain or library ("" when not given). */
typedef struct sp_marker {
    sp_marker_kind_t kind;
    char name[256];
    char scope[256];
    long every_n;
    int has_signal;
    int signo;
} sp_marker_t;

/* Bits of sp_config_t.table.print. */
enum { SP_TABLE_PRINT_NONE = 0, SP_TABLE_PRINT_STDERR = 1, SP_TABLE_PRINT_FILE = 2, SP_TABLE_PRINT_BOTH = 3 };

/* sp_config_t.cupti_api_filter. */
enum { SP_CUPTI_API_FILTER_QUERIES = 0, SP_CUPTI_API_FILTER_NONE = 1 };
/* sp_config_t.launch_durations: the values sp_cupti_set_launch_durations takes
 * (whether a launch reads the clock at its end: always, never, CUPTI decides). */
enum { SP_LAUNCH_DUR_AUTO = -1, SP_LAUNCH_DUR_START = 0, SP_LAUNCH_DUR_HOST = 1 };

/* sp_config_t.gzip_lib. */
enum { SP_GZIP_LIB_AUTO = 0, SP_GZIP_LIB_ISAL = 1, SP_GZIP_LIB_ZLIB = 2 };

/* Where a key's value came from: sp_config_t.set[SP_CFG_<ID>]. */
enum { SP_CFG_SRC_DEFAULT = 0, SP_CFG_SRC_FILE = 1, SP_CFG_SRC_ENV = 2 };

/* SP_CFG_ENABLED, SP_CFG_SKIP_FIRST, ... SP_CFG_TABLE_PRINT, then SP_CFG_NKEYS. */
#define SP_CFG_ENUM_ROW(id, ...) SP_CFG_##id,
enum { SP_CONFIG_KEYS(SP_CFG_ENUM_ROW) SP_CFG_NKEYS };
#undef SP_CFG_ENUM_ROW

typedef struct sp_config {
    int enabled;
    long skip_first;
    int skip_first_wait;
    long wait, warmup, active, repeat;
    int has_schedule;            /* any of skip_first..repeat set by file or env */
    char marker_spec[512];
    sp_marker_t marker;
    char output_dir[4096];
    char worker_name[256];
    int use_gzip, record_shapes, profile_memory, with_stack;
    int gzip_lib;                /* SP_GZIP_LIB_* */
    long stack_depth;
    int unwinder;                /* SP_STACK_UNWIND_* (collectors/stacks.h) */
    int cupti;
    int cupti_api_filter;        /* SP_CUPTI_API_FILTER_* */
    int launch_durations;        /* SP_LAUNCH_DUR_* */
    long cupti_buffer_mb;
    long buffer_mb;
    char processes[512];         /* comma-separated fnmatch globs on the program name */
    char ranks[512];             /* rank list "0,8-15"; "" = every rank */
    long finalize_timeout_s;     /* bound on the fatal-signal / _exit flush */
    long exit_timeout_s;         /* bound on the normal exit's flush */
    long max_events_per_cycle;   /* 0 = unlimited */
    long max_trace_mb;           /* 0 = unlimited */
    int log_level;               /* SP_LOG_INFO; quiet = SP_LOG_WARN (errors and warnings); debug = SP_LOG_DEBUG */
    struct {
        char sort_by[32];        /* "" = automatic, else one of the torch sort_by names */
        long row_limit;          /* -1 = all rows */
        int group_by_input_shape;
        long group_by_stack_n;
        int print;               /* SP_TABLE_PRINT_* bits */
    } table;
    char source[4096];           /* config file actually read, "" if none */
    unsigned char set[SP_CFG_NKEYS]; /* SP_CFG_SRC_* per key */
} sp_config_t;

/* Defaults, then file, then env. 0 ok, -1 error (its one line is printed).
 * PROF_ENABLED=false (or 0/no/off) short-circuits: nothing else is read and
 * the result is the defaults with enabled = 0, so a broken file cannot get in
 * the way of switching stepprof off. An empty PROF_X counts as unset. */
int sp_config_load(sp_config_t *out);
void sp_config_defaults(sp_config_t *out);

/* true/false/1/0/yes/no/on/off, any case, surrounding blanks allowed. 0 ok, -1 not a boolean. */
int sp_config_parse_bool(const char *s, int *out);
/* Decimal integer, optional sign, surrounding blanks allowed; rejects
 * anything else and overflow. 0 ok, -1 not an integer. */
int sp_config_parse_long(const char *s, long *out);
/* Marker spec (see the marker row in config_keys.h). 0 ok; -1 with the reason
 * written to why (no "stepprof:" prefix, no location). */
int sp_config_parse_marker(const char *spec, sp_marker_t *out, char *why, size_t whylen);

/* Read-only view of key i of the table, for help output and tests. */
typedef struct sp_config_key_info {
    const char *name;   /* "table.sort_by" */
    const char *def;    /* default, as written in YAML */
    const char *help;
    char env[64];       /* "PROF_TABLE_SORT_BY" */
} sp_config_key_info_t;
int sp_config_key_info(int i, sp_config_key_info_t *out);   /* 0 ok, -1 if i is not in 0..SP_CFG_NKEYS-1 */

#endif
