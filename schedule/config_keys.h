/* schedule/config_keys.h — the one table of configuration keys. Each row is
 * everything stepprof knows about a key: its name below `profiling:` (dotted
 * for the one level of nesting: "table.sort_by" is `table: {sort_by: ...}` in
 * YAML and PROF_TABLE_SORT_BY in the environment), its type, the sp_config_t
 * field it fills, its default written in the same syntax a user would write,
 * its bounds (integers), its allowed words (enums) and a one-line help text.
 * Adding a key is one row here plus its field in sp_config_t (config.c checks
 * at compile time that the field matches the type).
 *
 * X(ID, name, type, field, default, min, max, choices, help)
 *   type: BOOL (int), LONG (long, min..max), STR (char[]), ENUM (int: the
 *   value of the matched word in `choices`), WORD (char[]: the matched word
 *   itself), MARKER (char[] spec, also parsed into sp_config_t.marker).
 *   `choices` names a table in config.c; it is only expanded there. */
#ifndef SP_CONFIG_KEYS_H
#define SP_CONFIG_KEYS_H

/* Upper bound for counts that have no natural one: keeps the schedule
 * arithmetic (wait + warmup + active, step + wait) far from overflow. */
#define SP_CFG_BIG 1000000000000L

#define SP_CONFIG_KEYS(X)                                                                          \
    X(ENABLED, "enabled", BOOL, enabled, "true", 0, 0, NULL,                                       \
      "master switch; false leaves the program untouched")                                         \
    X(SKIP_FIRST, "skip_first", LONG, skip_first, "0", 0, SP_CFG_BIG, NULL,                        \
      "steps ignored before the first cycle starts")                                               \
    X(SKIP_FIRST_WAIT, "skip_first_wait", BOOL, skip_first_wait, "false", 0, 0, NULL,              \
      "the first cycle starts without its wait phase")                                             \
    X(WAIT, "wait", LONG, wait, "0", 0, SP_CFG_BIG, NULL,                                          \
      "idle steps at the start of every cycle")                                                    \
    X(WARMUP, "warmup", LONG, warmup, "1", 0, SP_CFG_BIG, NULL,                                    \
      "steps traced then discarded before recording, so start-up costs stay out")                  \
    X(ACTIVE, "active", LONG, active, "1", 1, SP_CFG_BIG, NULL,                                    \
      "recorded steps per cycle; a trace is written after the last one")                           \
    X(REPEAT, "repeat", LONG, repeat, "1", 0, SP_CFG_BIG, NULL,                                    \
      "number of cycles; 0 cycles until the program ends")                                         \
    X(MARKER, "marker", MARKER, marker_spec, "", 0, 0, NULL,                                       \
      "what counts as a step: nvtx:NAME[@DOMAIN], function:SYMBOL[@LIBRARY], kernel:GLOB[/N] "     \
      "or cudaProfilerApi, optionally followed by ,signal[:SIGNAME]")                              \
    X(OUTPUT_DIR, "output_dir", STR, output_dir, "./profiler_traces", 0, 0, NULL,                  \
      "directory for traces, tables and summaries")                                                \
    X(WORKER_NAME, "worker_name", STR, worker_name, "", 0, 0, NULL,                                \
      "file name prefix; empty means <hostname>_<pid>")                                            \
    X(USE_GZIP, "use_gzip", BOOL, use_gzip, "false", 0, 0, NULL,                                   \
      "write .pt.trace.json.gz instead of .pt.trace.json")                                         \
    X(GZIP_LIB, "gzip_lib", ENUM, gzip_lib, "auto", 0, 0, gzip_lib_choices,                        \
      "use_gzip's compressor: auto = ISA-L igzip (libisal.so.2) when installed, else zlib")        \
    X(RECORD_SHAPES, "record_shapes", BOOL, record_shapes, "false", 0, 0, NULL,                    \
      "record launch shapes (grid, block) as input shapes")                                        \
    X(PROFILE_MEMORY, "profile_memory", BOOL, profile_memory, "false", 0, 0, NULL,                 \
      "track device allocations and frees")                                                        \
    X(WITH_STACK, "with_stack", BOOL, with_stack, "false", 0, 0, NULL,                             \
      "capture host call stacks of CUDA calls")                                                    \
    X(STACK_DEPTH, "stack_depth", LONG, stack_depth, "32", 1, 256, NULL,                           \
      "frames kept per captured call stack (with_stack)")                                          \
    X(UNWINDER, "unwinder", ENUM, unwinder, "auto", 0, 0, unwinder_choices,                        \
      "with_stack's native unwinder: auto = libunwind (libunwind.so.8) when installed, else glibc's " \
      "backtrace()")                                                                               \
    X(CUPTI, "cupti", BOOL, cupti, "true", 0, 0, NULL,                                             \
      "record GPU activity with CUPTI when available; false: interposition and NVTX only")         \
    X(CUPTI_API_FILTER, "cupti_api_filter", ENUM, cupti_api_filter, "queries", 0, 0,            \
      cupti_api_filter_choices, "queries: leave out CUPTI's records of calls stepprof did not intercept " \
      "that only ask (cudaGetDevice, cudaGetLastError, cuCtxGetCurrent...), as torch.profiler does; " \
      "none: keep them all")                                                                    \
    X(LAUNCH_DURATIONS, "launch_durations", ENUM, launch_durations, "auto", 0, 0,                  \
      launch_durations_choices, "where a kernel launch's duration comes from: auto = for a runtime " \
      "launch CUPTI's record of the call while CUPTI records runtime API calls (one clock read per " \
      "launch), else a second clock read; a driver launch always reads twice; host = always a "    \
      "second clock read; start = never one (a launch without CUPTI's record lasts 0)")           \
    X(CUPTI_BUFFER_MB, "cupti_buffer_mb", LONG, cupti_buffer_mb, "64", 4, 4096, NULL,              \
      "cap on CUPTI activity buffers in MiB (4 MiB each); past it CUPTI drops and counts records") \
    X(BUFFER_MB, "buffer_mb", LONG, buffer_mb, "256", 1, 65536, NULL,                              \
      "event buffer pool in MiB; events beyond it are dropped and counted")                        \
    X(PROCESSES, "processes", STR, processes, "", 0, 0, NULL,                                      \
      "comma-separated globs on the program name (basename of the executable or of argv[0]); "     \
      "other processes stay inert; empty means every process")                                     \
    X(FINALIZE_TIMEOUT_S, "finalize_timeout_s", LONG, finalize_timeout_s, "10", 0, 3600, NULL,     \
      "seconds a terminating signal or _exit waits for the last files to be written")              \
    X(EXIT_TIMEOUT_S, "exit_timeout_s", LONG, exit_timeout_s, "600", 0, 86400, NULL,              \
      "seconds a normal exit (return from main, exit()) waits for the last files to be written")   \
    X(MAX_EVENTS_PER_CYCLE, "max_events_per_cycle", LONG, max_events_per_cycle, "0", 0, SP_CFG_BIG, \
      NULL, "events kept per cycle; past it recording stops and the trace is marked truncated; "   \
      "0 = unlimited")                                                                             \
    X(MAX_TRACE_MB, "max_trace_mb", LONG, max_trace_mb, "0", 0, 1048576, NULL,                     \
      "approximate bound on one trace file in MiB, enforced as an event budget; 0 = unlimited")    \
    X(LOG, "log", ENUM, log_level, "info", 0, 0, log_choices,                                      \
      "info: plan and files written; quiet: errors and warnings only; debug: more")                \
    X(TABLE_SORT_BY, "table.sort_by", WORD, table.sort_by, "", 0, 0, sort_choices,                 \
      "key-average table order (descending); empty means automatic")                               \
    X(TABLE_ROW_LIMIT, "table.row_limit", LONG, table.row_limit, "20", -1, SP_CFG_BIG, NULL,       \
      "rows in the key-average table; -1 prints all")                                              \
    X(TABLE_GROUP_BY_INPUT_SHAPE, "table.group_by_input_shape", BOOL, table.group_by_input_shape,  \
      "false", 0, 0, NULL, "one row per (name, input shapes) instead of per name")                 \
    X(TABLE_GROUP_BY_STACK_N, "table.group_by_stack_n", LONG, table.group_by_stack_n, "0", 0,      \
      SP_CFG_BIG, NULL, "one row per (name, top N stack frames); 0 disables")                      \
    X(TABLE_PRINT, "table.print", ENUM, table.print, "file", 0, 0, print_choices,                  \
      "where the key-average table goes: stderr, file, both or none")                              \
    X(RANKS, "ranks", STR, ranks, "", 0, 0, NULL,                                                  \
      "ranks that record in a multi-process job, e.g. 0,8-15 (rank from torchrun, Open MPI, PMI or " \
      "Slurm; a process with no rank is rank 0); other ranks stay inert; empty means every rank")

#endif
