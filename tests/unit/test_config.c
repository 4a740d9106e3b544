/* tests/unit/test_config.c — sp_config_load in-process: profiling.yaml files
 * written to a private temporary directory (the test chdirs there), PROF_*
 * variables set and cleared around each load, and stderr captured (fd 2
 * redirected to a temporary file) so that every message is checked word for
 * word. Covers defaults, file, env over file, nesting, booleans, every error
 * class, warnings, the marker grammar and profiling.example.yaml. Prints one
 * line per failure and a final "N passed, N failed"; exits non-zero on failure. */
#define _GNU_SOURCE
#include "../../schedule/config.h"

#include "../../collectors/log.h"
#include "../../collectors/stacks.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define DISABLED "; profiling disabled for this run\n"

static char example_path[PATH_MAX];
static char tmp_dir[] = "/tmp/sp_test_config.XXXXXX";

static void clear_prof_env(void)
{
    char names[64][128];
    int n = 0;
    for (char **e = environ; *e && n < 64; e++)
        if (strncmp(*e, "PROF_", 5) == 0)
            snprintf(names[n++], sizeof names[0], "%.*s", (int)strcspn(*e, "="), *e);
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("cannot write %s\n", path);
        exit(2);
    }
}

/* Loads with `yaml` as ./profiling.yaml (NULL: no file) and env entries
 * "NAME=value"; err receives everything printed on fd 2. */
static int load(const char *yaml, const char *const *env, sp_config_t *cfg, char *err, size_t errlen)
{
    clear_prof_env();
    unlink("profiling.yaml");
    if (yaml)
        write_file("profiling.yaml", yaml);
    for (; env && *env; env++) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(*env, "="), *env);
        setenv(name, strchr(*env, '=') + 1, 1);
    }
    FILE *cap = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(cap), 2);
    int rc = sp_config_load(cfg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(cap);
    size_t n = fread(err, 1, errlen - 1, cap);
    err[n] = 0;
    fclose(cap);
    clear_prof_env();
    return rc;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- failures: one line each, exact text ------------------------------------ */

static const struct bad {
    const char *yaml;
    const char *env[3];
    const char *msg; /* the whole line between "stepprof: " and DISABLED */
} bads[] = {
    {"profiling:\n  actve: 3\n", {0},
     "profiling.yaml:2:3: unknown key profiling.actve (did you mean profiling.active?)"},
    {"profling:\n  active: 3\n", {0},
     "profiling.yaml:1:1: top-level key profling looks like a typo (did you mean profiling?)"},
    {"profiling:\n  Active: 3\n", {0},
     "profiling.yaml:2:3: unknown key profiling.Active (did you mean profiling.active?)"},
    {"profiling:\n  sort_by: count\n", {0},
     "profiling.yaml:2:3: unknown key profiling.sort_by (did you mean profiling.table.sort_by?)"},
    {"profiling:\n  colour: red\n", {0},
     "profiling.yaml:2:3: unknown key profiling.colour (profiling.example.yaml lists every key)"},
    {"profiling:\n  table: {sortby: count}\n", {0},
     "profiling.yaml:2:11: unknown key profiling.table.sortby (did you mean profiling.table.sort_by?)"},
    {"profiling:\n  active: abc\n", {0}, "profiling.yaml:2:11: profiling.active: \"abc\": expected an integer >= 1"},
    {"profiling:\n  active: [1]\n", {0},
     "profiling.yaml:2:11: profiling.active: expected an integer >= 1, got a sequence"},
    {"profiling:\n  active:\n    x: 1\n", {0},
     "profiling.yaml:3:5: profiling.active: expected an integer >= 1, got a mapping"},
    {"profiling:\n  active: 0\n", {0}, "profiling.yaml:2:11: profiling.active: \"0\": expected an integer >= 1"},
    {"profiling:\n  wait: -1\n", {0}, "profiling.yaml:2:9: profiling.wait: \"-1\": expected an integer >= 0"},
    {"profiling:\n  warmup: 3x\n", {0}, "profiling.yaml:2:11: profiling.warmup: \"3x\": expected an integer >= 0"},
    {"profiling:\n  repeat: 1.5\n", {0}, "profiling.yaml:2:11: profiling.repeat: \"1.5\": expected an integer >= 0"},
    {"profiling:\n  repeat: 0x10\n", {0}, "profiling.yaml:2:11: profiling.repeat: \"0x10\": expected an integer >= 0"},
    {"profiling:\n  skip_first: 99999999999999999999\n", {0},
     "profiling.yaml:2:15: profiling.skip_first: \"99999999999999999999\": expected an integer >= 0"},
    {"profiling:\n  skip_first: 2000000000000\n", {0},
     "profiling.yaml:2:15: profiling.skip_first: \"2000000000000\": expected an integer >= 0 and at most "
     "1000000000000"},
    {"profiling:\n  buffer_mb: 70000\n", {0},
     "profiling.yaml:2:14: profiling.buffer_mb: \"70000\": expected an integer from 1 to 65536"},
    {"profiling:\n  use_gzip: maybe\n", {0},
     "profiling.yaml:2:13: profiling.use_gzip: \"maybe\": expected a boolean (true/false, yes/no, on/off, 1/0)"},
    {"profiling:\n  unwinder: libunwind8\n", {0},
     "profiling.yaml:2:13: profiling.unwinder: \"libunwind8\": expected one of auto, libunwind, glibc (did you mean "
     "libunwind?)"},
    {"profiling:\n  log: quite\n", {0},
     "profiling.yaml:2:8: profiling.log: \"quite\": expected one of info, quiet, debug (did you mean quiet?)"},
    {"profiling:\n  table:\n    sort_by: cpu\n", {0},
     "profiling.yaml:3:14: profiling.table.sort_by: \"cpu\": expected one of \"\" (automatic), cpu_time, "
     "cuda_time, cpu_time_total, cuda_time_total, self_cpu_time_total, self_cuda_time_total, cpu_memory_usage, "
     "cuda_memory_usage, self_cpu_memory_usage, self_cuda_memory_usage, count (did you mean cpu_time?)"},
    {"profiling:\n  table: 5\n", {0},
     "profiling.yaml:2:10: profiling.table: expected a mapping of settings, got a scalar"},
    {"profiling:\n  table: {row_limit: -2}\n", {0},
     "profiling.yaml:2:22: profiling.table.row_limit: \"-2\": expected an integer >= -1"},
    {"profiling:\n  marker: \"nvtx:\"\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtx:\": nvtx marker needs an NVTX range name, e.g. nvtx:train_step"},
    {"profiling:\n  marker: kernel:gemm/0\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"kernel:gemm/0\": kernel marker count \"/0\" must be an integer >= 1"},
    {"profiling:\n  marker: nvtx:a,kernel:b\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtx:a,kernel:b\": more than one step marker; give one of nvtx, "
     "function, kernel, cudaProfilerApi or torch, plus at most one signal"},
    {"profiling:\n  marker: signal:KILL\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"signal:KILL\": SIGKILL cannot be a marker: it cannot be caught; "
     "use SIGUSR1 or SIGUSR2"},
    {"profiling:\n  marker: nvtx:a,signal:SIGSEGV\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtx:a,signal:SIGSEGV\": SIGSEGV cannot be a marker: it reports a "
     "crash and belongs to the program; use SIGUSR1 or SIGUSR2"},
    {"profiling:\n  marker: signal:USR3\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"signal:USR3\": unknown signal \"USR3\" (did you mean SIGUSR2?)"},
    {"profiling:\n  marker: signal:999\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"signal:999\": unknown signal number 999"},
    {"profiling:\n  marker: nvtxx:a\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtxx:a\": unknown marker \"nvtxx\" (did you mean nvtx?); expected "
     "nvtx:NAME[@DOMAIN], function:SYMBOL[@LIBRARY], kernel:GLOB[/N], cudaProfilerApi, torch or signal[:SIGNAME]"},
    {"profiling:\n  marker: torch:adam\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"torch:adam\": torch takes no argument"},
    {"profiling:\n  marker: cudaProfilerApi:x\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"cudaProfilerApi:x\": cudaProfilerApi takes no argument"},
    {"profiling:\n  marker: nvtx:a@\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtx:a@\": empty domain after \"@\""},
    {"profiling:\n  marker: nvtx:a,,signal\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"nvtx:a,,signal\": empty entry in the marker list"},
    {"profiling:\n  marker: signal,signal:HUP\n", {0},
     "profiling.yaml:2:11: profiling.marker: \"signal,signal:HUP\": more than one signal entry"},
    {"profiling:\n  active: [1, 2\n", {0},
     "profiling.yaml:3:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence at line "
     "2, column 11)"},
    {"profiling:\n  active: 1\n   wait: 2\n", {0},
     "profiling.yaml:3:8: invalid YAML: mapping values are not allowed in this context"},
    {"profiling:\n\tactive: 1\n", {0},
     "profiling.yaml:2:1: invalid YAML: found character that cannot start any token (while scanning for the next "
     "token at line 2, column 1)"},
    {"profiling:\n  active: 1\n---\n[\n", {0},
     "profiling.yaml:5:1: invalid YAML: did not find expected node content (while parsing a flow node at line 5, "
     "column 1)"},
    {"profiling:\n  worker_name: a\xff\n", {0}, "profiling.yaml: invalid YAML: invalid leading UTF-8 octet at byte 27"},
    {"profiling:\n  ranks: 0,8-x\n", {0},
     "profiling.yaml:2:10: profiling.ranks: \"0,8-x\": range 8-... needs an end >= 8 (e.g. 8-15)"},
    {"profiling:\n  ranks: 3;4\n", {0},
     "profiling.yaml:2:10: profiling.ranks: \"3;4\": unexpected \";4\" (expected a list such as 0,8-15)"},
    {"profiling:\n  active: 1\n  active: 2\n", {0},
     "profiling.yaml:3:3: profiling.active is set twice (first on line 2)"},
    {"profiling:\n  marker: nvtx:a\nprofiling:\n  active: 2\n", {0},
     "profiling.yaml:3:1: profiling: appears twice (first on line 1)"},
    {"profiling: [1]\n", {0}, "profiling.yaml:1:12: profiling: expected a mapping of settings, got a sequence"},
    {"x: &a 3\nprofiling:\n  active: *a\n", {0},
     "profiling.yaml:3:11: profiling.active: expected an integer >= 1, got an alias (YAML anchors are not "
     "followed here)"},
    {"profiling:\n  ? [a]\n  : 1\n", {0}, "profiling.yaml:2:5: expected a key name in profiling, got a sequence"},
    {"profiling:\n  active: 2\n", {0},
     "a schedule (wait/warmup/active/repeat) needs a step marker: set profiling.marker or PROF_MARKER, e.g. "
     "PROF_MARKER=nvtx:train_step"},
    {NULL, {"PROF_WAIT=1"},
     "a schedule (wait/warmup/active/repeat) needs a step marker: set profiling.marker or PROF_MARKER, e.g. "
     "PROF_MARKER=nvtx:train_step"},
    {NULL, {"PROF_ACTIVE=x"}, "PROF_ACTIVE=\"x\": expected an integer >= 1"},
    {"profiling:\n  active: 2\n", {"PROF_ACTIVE=0"}, "PROF_ACTIVE=\"0\": expected an integer >= 1"},
    {NULL, {"PROF_WARMUP=-1"}, "PROF_WARMUP=\"-1\": expected an integer >= 0"},
    {NULL, {"PROF_USE_GZIP=2"}, "PROF_USE_GZIP=\"2\": expected a boolean (true/false, yes/no, on/off, 1/0)"},
    {NULL, {"PROF_UNWINDER=gcc"}, "PROF_UNWINDER=\"gcc\": expected one of auto, libunwind, glibc"},
    {NULL, {"PROF_ENABLED=perhaps"}, "PROF_ENABLED=\"perhaps\": expected a boolean (true/false, yes/no, on/off, 1/0)"},
    {NULL, {"PROF_MARKER=kernel:"},
     "PROF_MARKER=\"kernel:\": kernel marker needs a kernel name glob, e.g. kernel:*sgemm*/4"},
    {NULL, {"PROF_TABLE_PRINT=screen"}, "PROF_TABLE_PRINT=\"screen\": expected one of stderr, file, both, none"},
    {NULL, {"PROF_TABLE_ROW_LIMIT=ten"}, "PROF_TABLE_ROW_LIMIT=\"ten\": expected an integer >= -1"},
    {NULL, {"PROF_ACTVE=3"}, "PROF_ACTVE is not a stepprof setting (did you mean PROF_ACTIVE?)"},
    {NULL, {"PROF_TABLE_SORTBY=count"},
     "PROF_TABLE_SORTBY is not a stepprof setting (did you mean PROF_TABLE_SORT_BY?)"},
    {NULL, {"PROF_CONFIG=/nonexistent/p.yaml"},
     "/nonexistent/p.yaml: cannot open config file: No such file or directory (named by PROF_CONFIG)"},
    {NULL, {"PROF_CONFIG=."}, ".: cannot read config file: it is a directory"},
    {"profiling:\n  active: 1\n", {"PROF_CONFIG=other.yaml"},
     "other.yaml: cannot open config file: No such file or directory (named by PROF_CONFIG)"},
};

static void test_bad(void)
{
    char err[4096], want[2048];
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        sp_config_t cfg;
        const char *const *env = bads[i].env;
        int rc = load(bads[i].yaml, env, &cfg, err, sizeof err);
        snprintf(want, sizeof want, "stepprof: %s" DISABLED, bads[i].msg);
        CHECK(rc == -1 && cfg.enabled == 0, "bad #%zu: rc %d enabled %d", i, rc, cfg.enabled);
        CHECK(strcmp(err, want) == 0, "bad #%zu:\n   got: %s  want: %s", i, err, want);
    }
    /* A value longer than its field. */
    char yaml[5000] = "profiling:\n  output_dir: ";
    memset(yaml + strlen(yaml), 'd', 4200);
    sp_config_t cfg;
    int rc = load(yaml, NULL, &cfg, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "profiling.output_dir: \"dddd") &&
          strstr(err, "...\": longer than 4095 bytes" DISABLED) && count_lines(err) == 1, "long output_dir: %s", err);
}

/* ---- successes ----------------------------------------------------------------- */

static void expect_defaults(const sp_config_t *c, const char *label)
{
    CHECK(c->enabled == 1 && c->skip_first == 0 && c->skip_first_wait == 0 && c->wait == 0 && c->warmup == 1 &&
          c->active == 1 && c->repeat == 1 && c->has_schedule == 0, "%s: schedule defaults", label);
    CHECK(c->marker_spec[0] == 0 && c->marker.kind == SP_MARK_NONE && c->marker.every_n == 1 &&
          !c->marker.has_signal, "%s: marker default", label);
    CHECK(strcmp(c->output_dir, "./profiler_traces") == 0 && c->worker_name[0] == 0, "%s: paths", label);
    CHECK(!c->use_gzip && !c->record_shapes && !c->profile_memory && !c->with_stack && c->buffer_mb == 256 &&
          c->log_level == SP_LOG_INFO && c->launch_durations == SP_LAUNCH_DUR_AUTO, "%s: flags", label);
    CHECK(c->table.sort_by[0] == 0 && c->table.row_limit == 20 && !c->table.group_by_input_shape &&
          c->table.group_by_stack_n == 0 && c->table.print == SP_TABLE_PRINT_FILE, "%s: table", label);
}

static void test_defaults(void)
{
    sp_config_t c;
    char err[4096];
    int rc = load(NULL, NULL, &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.source[0] == 0, "no file: rc %d, '%s'", rc, err);
    expect_defaults(&c, "no file");
    for (int i = 0; i < SP_CFG_NKEYS; i++)
        CHECK(c.set[i] == SP_CFG_SRC_DEFAULT, "key %d marked set", i);
    static const char *const empty[] = {"", "# only a comment\n", "profiling:\n", "profiling: ~\n",
                                        "training:\n  lr: 0.1\n", "- a\n- b\n", "just a scalar\n"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        rc = load(empty[i], NULL, &c, err, sizeof err);
        CHECK(rc == 0 && err[0] == 0 && strcmp(c.source, "profiling.yaml") == 0, "empty #%zu: %d '%s'", i, rc, err);
        expect_defaults(&c, empty[i]);
    }
}

static void test_values(void)
{
    sp_config_t c;
    char err[4096];
    const char *yaml = "profiling:\n  enabled: yes\n  skip_first: 3\n  skip_first_wait: on\n  wait: 2\n"
                       "  warmup: 2\n  active: \"4\"\n  repeat: 0\n  marker: nvtx:train_step@my.domain, signal:USR1\n"
                       "  output_dir: /tmp/traces\n  worker_name: 'rank 0'\n  use_gzip: true\n  gzip_lib: zlib\n  record_shapes: 1\n"
                       "  profile_memory: On\n  with_stack: TRUE\n  stack_depth: 16\n  unwinder: glibc\n  cupti: off\n  cupti_api_filter: none\n  launch_durations: start\n  cupti_buffer_mb: 8\n  buffer_mb: 64\n  log: quiet\n"
                       "  processes: 'train*,python3*'\n  finalize_timeout_s: 3\n  exit_timeout_s: 30\n  max_events_per_cycle: 1000\n"
                       "  max_trace_mb: 50\n  ranks: ' 0, 8-15'\n"
                       "  table:\n    sort_by: self_cuda_time_total\n    row_limit: -1\n"
                       "    group_by_input_shape: true\n    group_by_stack_n: 5\n    print: both\n";
    int rc = load(yaml, NULL, &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0, "full file: %d '%s'", rc, err);
    CHECK(c.enabled && c.skip_first == 3 && c.skip_first_wait && c.wait == 2 && c.warmup == 2 && c.active == 4 &&
          c.repeat == 0 && c.has_schedule, "full file: schedule");
    CHECK(c.marker.kind == SP_MARK_NVTX && strcmp(c.marker.name, "train_step") == 0 &&
          strcmp(c.marker.scope, "my.domain") == 0 && c.marker.has_signal && c.marker.signo == SIGUSR1 &&
          strcmp(c.marker_spec, "nvtx:train_step@my.domain, signal:USR1") == 0, "full file: marker");
    CHECK(strcmp(c.output_dir, "/tmp/traces") == 0 && strcmp(c.worker_name, "rank 0") == 0, "full file: strings");
    CHECK(c.use_gzip && c.gzip_lib == SP_GZIP_LIB_ZLIB && c.record_shapes && c.profile_memory && c.with_stack && c.stack_depth == 16 &&
          c.unwinder == SP_STACK_UNWIND_GLIBC && !c.cupti && c.cupti_api_filter == SP_CUPTI_API_FILTER_NONE &&
          c.launch_durations == SP_LAUNCH_DUR_START && c.cupti_buffer_mb == 8 &&
          c.buffer_mb == 64 &&
          c.log_level == SP_LOG_WARN, "full file: flags");
    CHECK(strcmp(c.processes, "train*,python3*") == 0 && c.finalize_timeout_s == 3 && c.exit_timeout_s == 30 &&
          c.max_events_per_cycle == 1000 && c.max_trace_mb == 50 && strcmp(c.ranks, " 0, 8-15") == 0,
          "full file: processes and limits");
    CHECK(strcmp(c.table.sort_by, "self_cuda_time_total") == 0 && c.table.row_limit == -1 &&
          c.table.group_by_input_shape && c.table.group_by_stack_n == 5 && c.table.print == SP_TABLE_PRINT_BOTH,
          "full file: table");
    for (int i = 0; i < SP_CFG_NKEYS; i++)
        CHECK(c.set[i] == SP_CFG_SRC_FILE, "full file: key %d not marked as from the file", i);

    /* env beats file; an empty PROF_X is unset; the dotted form works in YAML too. */
    rc = load("profiling:\n  active: 2\n  wait: 1\n  marker: kernel:*gemm*/4\n  table.print: none\n  log: debug\n",
              ENV("PROF_ACTIVE=7", "PROF_WAIT=", "PROF_TABLE_ROW_LIMIT=-1"), &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.active == 7 && c.wait == 1 && c.table.row_limit == -1 &&
          c.table.print == SP_TABLE_PRINT_NONE && c.log_level == SP_LOG_DEBUG, "env over file: %d '%s'", rc, err);
    CHECK(c.set[SP_CFG_ACTIVE] == SP_CFG_SRC_ENV && c.set[SP_CFG_WAIT] == SP_CFG_SRC_FILE &&
          c.set[SP_CFG_TABLE_ROW_LIMIT] == SP_CFG_SRC_ENV && c.set[SP_CFG_REPEAT] == SP_CFG_SRC_DEFAULT,
          "sources");
    CHECK(c.marker.kind == SP_MARK_KERNEL && strcmp(c.marker.name, "*gemm*") == 0 && c.marker.every_n == 4,
          "kernel marker");

    /* profiling: inside a larger training config. */
    rc = load("model:\n  layers: [1, 2, 3]\n  profiling: {active: 0}\nbase: &b {lr: 0.1}\nderived:\n  <<: *b\n"
              "profiler: x\nprofiling:\n  marker: function:train_step@libtrain.so\n  table:\n    sort_by: count\n"
              "data:\n  - {path: /x}\n  - ? complex\n    : key\n",
              NULL, &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.marker.kind == SP_MARK_FUNCTION && strcmp(c.marker.scope, "libtrain.so") == 0 &&
          strcmp(c.table.sort_by, "count") == 0 && c.active == 1 && !c.has_schedule, "nested section: %d '%s'", rc,
          err);

    /* PROF_ENABLED=off wins over a broken file; enabled: false skips cross-key checks. */
    rc = load("profiling:\n  actve: [\n", ENV("PROF_ENABLED=Off"), &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.enabled == 0, "PROF_ENABLED=Off: %d '%s'", rc, err);
    rc = load("profiling:\n  enabled: false\n  active: 3\n", NULL, &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.enabled == 0 && c.has_schedule, "enabled: false: %d '%s'", rc, err);

    /* A schedule key set to its default value still counts as a schedule. */
    rc = load("profiling:\n  skip_first_wait: false\n  marker: cudaProfilerApi\n", NULL, &c, err, sizeof err);
    CHECK(rc == 0 && c.has_schedule && c.marker.kind == SP_MARK_PROFILER_API, "has_schedule from a default value");
    rc = load(NULL, ENV("PROF_MARKER=nvtx:step"), &c, err, sizeof err);
    CHECK(rc == 0 && !c.has_schedule && c.marker.kind == SP_MARK_NVTX, "marker alone is no schedule");
    rc = load(NULL, ENV("PROF_MARKER=signal:USR1", "PROF_REPEAT=2"), &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && c.has_schedule && c.marker.kind == SP_MARK_NONE && c.marker.has_signal &&
          c.marker.signo == SIGUSR1, "a signal alone is a marker for a schedule: %d '%s'", rc, err);

    /* PROF_CONFIG names the file and the messages. */
    write_file("train.yaml", "profiling:\n  buffer_mb: 0\n");
    rc = load(NULL, ENV("PROF_CONFIG=train.yaml"), &c, err, sizeof err);
    CHECK(rc == -1 && strcmp(err, "stepprof: train.yaml:2:14: profiling.buffer_mb: \"0\": expected an integer from "
                                  "1 to 65536" DISABLED) == 0, "PROF_CONFIG file: %s", err);
    write_file("train.yaml", "profiling:\n  buffer_mb: 8\n");
    rc = load("profiling:\n  buffer_mb: 9\n", ENV("PROF_CONFIG=train.yaml"), &c, err, sizeof err);
    CHECK(rc == 0 && c.buffer_mb == 8 && strcmp(c.source, "train.yaml") == 0, "PROF_CONFIG read");
}

static void test_warnings(void)
{
    sp_config_t c;
    char err[4096];
    int rc = load("profiling:\n  warmup: 0\n  active: 2\n  marker: nvtx:s\n", NULL, &c, err, sizeof err);
    CHECK(rc == 0 && strcmp(err, "stepprof: warmup is 0: profiler won't be using warmup, this can skew profiler "
                                 "results (the first recorded step includes start-up costs)\n") == 0,
          "warmup 0: %d '%s'", rc, err);
    rc = load(NULL, ENV("PROF_FOOBAR=1"), &c, err, sizeof err);
    CHECK(rc == 0 && strcmp(err, "stepprof: PROF_FOOBAR is not a stepprof setting; ignored\n") == 0, "unknown env: %s",
          err);
}

static void test_booleans(void)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "ON", "1", " 1 "};
    static const char *const no[] = {"false", "False", "FALSE", "no", "NO", "off", "Off", "0"};
    static const char *const junk[] = {"", "2", "y", "n", "t", "truee", "-1", "enable"};
    char yaml[128], env[64], err[4096];
    sp_config_t c;
    for (int want = 0; want <= 1; want++) {
        const char *const *words = want ? yes : no;
        size_t n = want ? sizeof yes / sizeof yes[0] : sizeof no / sizeof no[0];
        for (size_t i = 0; i < n; i++) {
            int v = -1;
            CHECK(sp_config_parse_bool(words[i], &v) == 0 && v == want, "parse_bool(%s)", words[i]);
            snprintf(yaml, sizeof yaml, "profiling:\n  with_stack: \"%s\"\n", words[i]);
            CHECK(load(yaml, NULL, &c, err, sizeof err) == 0 && c.with_stack == want, "yaml with_stack: %s", words[i]);
            snprintf(env, sizeof env, "PROF_WITH_STACK=%s", words[i]);
            CHECK(load(NULL, ENV(env), &c, err, sizeof err) == 0 && c.with_stack == want, "env %s", env);
        }
    }
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        int v = 7;
        CHECK(sp_config_parse_bool(junk[i], &v) == -1 && v == 7, "parse_bool(%s) accepted", junk[i]);
    }
    long l = 0;
    CHECK(sp_config_parse_long(" -12 ", &l) == 0 && l == -12, "parse_long -12");
    CHECK(sp_config_parse_long("+5", &l) == 0 && l == 5, "parse_long +5");
    CHECK(sp_config_parse_long("- 5", &l) == -1 && sp_config_parse_long("", &l) == -1 &&
          sp_config_parse_long("9223372036854775808", &l) == -1 && sp_config_parse_long("1e3", &l) == -1,
          "parse_long junk");
}

static void test_markers(void)
{
    static const struct {
        const char *spec;
        sp_marker_kind_t kind;
        const char *name, *scope;
        long every_n;
        int has_signal, signo;
    } ok[] = {
        {"", SP_MARK_NONE, "", "", 1, 0, 0},
        {"nvtx:train_step", SP_MARK_NVTX, "train_step", "", 1, 0, 0},
        {"NVTX:fwd*@a@b", SP_MARK_NVTX, "fwd*@a", "b", 1, 0, 0},
        {" function:step@libfoo.so ", SP_MARK_FUNCTION, "step", "libfoo.so", 1, 0, 0},
        {"kernel:*gemm*", SP_MARK_KERNEL, "*gemm*", "", 1, 0, 0},
        {"kernel:a/b/12", SP_MARK_KERNEL, "a/b", "", 12, 0, 0},
        {"cudaProfilerApi", SP_MARK_PROFILER_API, "", "", 1, 0, 0},
        {"nvtx:s, signal", SP_MARK_NVTX, "s", "", 1, 1, SIGUSR2},
        {"signal:usr1,kernel:k", SP_MARK_KERNEL, "k", "", 1, 1, SIGUSR1},
        {"signal:SIGHUP", SP_MARK_NONE, "", "", 1, 1, SIGHUP},
        {"signal:sigwinch", SP_MARK_NONE, "", "", 1, 1, SIGWINCH},
        {"signal:PROF", SP_MARK_NONE, "", "", 1, 1, SIGPROF},
        {"signal:TTIN", SP_MARK_NONE, "", "", 1, 1, SIGTTIN},
        {"signal:10", SP_MARK_NONE, "", "", 1, 1, 10},
        {"signal:40", SP_MARK_NONE, "", "", 1, 1, 40},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        sp_marker_t m;
        char why[512] = "";
        int rc = sp_config_parse_marker(ok[i].spec, &m, why, sizeof why);
        CHECK(rc == 0 && m.kind == ok[i].kind && strcmp(m.name, ok[i].name) == 0 && strcmp(m.scope, ok[i].scope) == 0 &&
              m.every_n == ok[i].every_n && m.has_signal == ok[i].has_signal && m.signo == ok[i].signo,
              "marker \"%s\": rc %d kind %d name '%s' scope '%s' n %ld sig %d/%d (%s)", ok[i].spec, rc, m.kind, m.name,
              m.scope, m.every_n, m.has_signal, m.signo, why);
    }
    static const char *const refused[] = {"signal:STOP", "signal:9", "signal:SIGINT", "signal:", "kernel:x/y",
                                          "kernel:x/", "function:", "function:@lib", ",", "nvtx:a,", "signal:CHLD"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        sp_marker_t m = {.kind = SP_MARK_NVTX};
        char why[512] = "";
        CHECK(sp_config_parse_marker(refused[i], &m, why, sizeof why) == -1 && why[0] && m.kind == SP_MARK_NVTX,
              "marker \"%s\" accepted", refused[i]);
    }
}

/* The shipped example loads silently to the defaults and shows every key with
 * its default, the schedule keys commented out (setting them asks for a
 * schedule, which needs a marker). */
static void test_example(void)
{
    char env[PATH_MAX + 16], err[4096], text[16384], line[256];
    sp_config_t c, d;
    FILE *f = fopen(example_path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    CHECK(f != NULL, "cannot read %s (run from the repository root)", example_path);
    if (!f)
        return;
    fclose(f);
    snprintf(env, sizeof env, "PROF_CONFIG=%s", example_path);
    int rc = load(NULL, ENV(env), &c, err, sizeof err);
    CHECK(rc == 0 && err[0] == 0 && !c.has_schedule, "example: %d '%s'", rc, err);
    sp_config_defaults(&d);
    memcpy(d.source, c.source, sizeof d.source);
    memcpy(d.set, c.set, sizeof d.set);
    CHECK(memcmp(&c, &d, sizeof c) == 0, "example values differ from the defaults");
    expect_defaults(&c, "example");
    for (int i = 0; i < SP_CFG_NKEYS; i++) {
        sp_config_key_info_t k;
        sp_config_key_info(i, &k);
        const char *leaf = strchr(k.name, '.') ? strchr(k.name, '.') + 1 : k.name;
        int sched = i >= SP_CFG_SKIP_FIRST && i <= SP_CFG_REPEAT;
        snprintf(line, sizeof line, "\n%*s%s%s: %s\n", strchr(k.name, '.') ? 4 : 2, "", sched ? "# " : "", leaf,
                 k.def[0] ? k.def : "\"\"");
        CHECK(strstr(text, line) != NULL, "example lacks the line '%.*s'", (int)strlen(line) - 2, line + 1);
        CHECK(c.set[i] == (sched ? SP_CFG_SRC_DEFAULT : SP_CFG_SRC_FILE), "example: %s set %d", k.name, c.set[i]);
    }
}

static void test_key_info(void)
{
    sp_config_key_info_t a, b;
    CHECK(sp_config_key_info(-1, &a) == -1 && sp_config_key_info(SP_CFG_NKEYS, &a) == -1, "key_info bounds");
    CHECK(sp_config_key_info(SP_CFG_TABLE_SORT_BY, &a) == 0 && strcmp(a.name, "table.sort_by") == 0 &&
          strcmp(a.env, "PROF_TABLE_SORT_BY") == 0 && a.help[0], "key_info table.sort_by");
    for (int i = 0; i < SP_CFG_NKEYS; i++)
        for (int j = i + 1; j < SP_CFG_NKEYS; j++) {
            sp_config_key_info(i, &a);
            sp_config_key_info(j, &b);
            CHECK(strcmp(a.env, b.env) != 0, "%s and %s share %s", a.name, b.name, a.env);
        }
}

int main(void)
{
    /* unit.mk passes the repository root; by hand, run from there. */
#ifdef SP_REPO_ROOT
    snprintf(example_path, sizeof example_path, "%s/profiling.example.yaml", SP_REPO_ROOT);
#else
    if (!realpath("profiling.example.yaml", example_path))
        snprintf(example_path, sizeof example_path, "profiling.example.yaml");
#endif
    if (!mkdtemp(tmp_dir) || chdir(tmp_dir) != 0) {
        perror("temporary directory");
        return 2;
    }
    sp_log_level = SP_LOG_INFO;
    test_defaults();
    test_values();
    test_bad();
    test_warnings();
    test_booleans();
    test_markers();
    test_example();
    test_key_info();
    clear_prof_env();
    unlink("profiling.yaml");
    unlink("train.yaml");
    if (chdir("/") == 0)
        rmdir(tmp_dir);
    printf("test_config: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
