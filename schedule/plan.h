/* schedule/plan.h — the pure schedule function (torch.profiler.schedule
 * semantics, formats.md section 1) and the one-line plan printed at start.
 * No state, no I/O: both are safe to call from any thread at any time. */
#ifndef SP_PLAN_H
#define SP_PLAN_H

#include <stddef.h>

#include "config.h"

typedef enum { SP_ACT_NONE, SP_ACT_WARMUP, SP_ACT_RECORD, SP_ACT_RECORD_AND_SAVE } sp_action_t;

typedef struct sp_sched {
    long skip_first;
    int skip_first_wait;
    long wait, warmup, active, repeat;
} sp_sched_t;

/* Action for 0-based marker step `step`. Out-of-contract input (negative
 * step or counts, active < 1, arithmetic beyond a long) yields SP_ACT_NONE. */
sp_action_t sp_sched_action(const sp_sched_t *s, long step);

/* The schedule fields of a loaded configuration. */
sp_sched_t sp_sched_from_config(const sp_config_t *cfg);

/* Writes the plan line, without the "stepprof: " prefix (sp_log adds it), e.g.
 *   marker nvtx:train_step; recording steps 2-4, 7-9 (wait 1, warmup 1, active 3, repeat 2);
 *   traces -> ./profiler_traces                                          (one line)
 * repeat 0 lists two windows then ", ... every N steps"; repeat > 3 lists two
 * then ", ... every N steps, R windows"; no schedule gives "no schedule:
 * recording the whole run as one window"; enabled = 0 gives "disabled by ...".
 * Like snprintf: always NUL-terminates when len > 0 and returns the length
 * the whole line needs (> 0), so a return >= len means it was cut. */
int sp_plan_format(const sp_config_t *cfg, char *buf, size_t len);

#endif
