/* exporters/report_write.c — see report_write.h. Builds the neutral event
 * set once (report_adapt.c), analyses it once, renders every report from it
 * and frees it; then each file goes through outfile.h (temporary name, then
 * rename). The table printed on stderr is one write(2), so it never
 * interleaves with the program's own lines. A failure loses that report only,
 * never the trace. */
#include "report_write.h"

#include "../collectors/log.h"
#include "outfile.h"
#include "report_adapt.h"
#include "stacks_out.h"
#include "summary.h"
#include "table.h"

#include "memory_report.h"

#include <errno.h>
#include <string.h>

static const struct {
    const char *metric, *suffix;
} stack_files[] = {{"self_cpu_time_total", ".stacks.txt"}, {"self_cuda_time_total", ".stacks_cuda.txt"}};

enum { SHARE_BUILDING, SHARE_READY, SHARE_TAKEN, SHARE_DONE };

void sp_report_share_init(sp_report_share_t *sh)
{
    memset(sh, 0, sizeof *sh);
    pthread_mutex_init(&sh->lock, NULL);
    pthread_cond_init(&sh->cond, NULL);
}

void sp_report_share_destroy(sp_report_share_t *sh)
{
    pthread_mutex_destroy(&sh->lock);
    pthread_cond_destroy(&sh->cond);
}

void sp_report_share_store(sp_report_share_t *sh, int *var, int value)
{
    pthread_mutex_lock(&sh->lock);
    *var = value;
    pthread_cond_broadcast(&sh->cond);
    pthread_mutex_unlock(&sh->lock);
}

void sp_report_share_wait_while(sp_report_share_t *sh, const int *var, int value)
{
    pthread_mutex_lock(&sh->lock);
    while (*var == value)
        pthread_cond_wait(&sh->cond, &sh->lock);
    pthread_mutex_unlock(&sh->lock);
}

static void share_set(sp_report_share_t *sh, int state)
{
    sp_report_share_store(sh, &sh->state, state);
}

/* Takes the summary if it is free: 1 when this thread has it. */
static int take_summary(sp_report_share_t *sh)
{
    pthread_mutex_lock(&sh->lock);
    int mine = sh->state == SHARE_READY;
    if (mine)
        sh->state = SHARE_TAKEN;
    pthread_mutex_unlock(&sh->lock);
    return mine;
}

static void summary(sp_reports_t *r, sp_rep_set_t *s)
{
    r->summary_rc = sp_rep_summary(s, &r->text, &r->json);
}

void sp_report_help(sp_report_share_t *sh)
{
    sp_report_share_wait_while(sh, &sh->state, SHARE_BUILDING);
    if (take_summary(sh)) {
        summary(sh->r, sh->set);
        share_set(sh, SHARE_DONE);
    }
}

static void render(sp_reports_t *r, sp_report_share_t *sh, const sp_export_job_t *job, sp_rep_set_t *s)
{
    if (sh) {
        sp_rep_share(s);
        sh->set = s;
        sh->r = r;
        share_set(sh, SHARE_READY);
    }
    if (job->table.print & (SP_JOB_TABLE_STDERR | SP_JOB_TABLE_FILE)) {
        sp_rep_opts_t o = {job->table.sort_by, job->table.row_limit, job->table.group_by_input_shape,
                           job->table.group_by_stack_n};
        r->table_rc = sp_rep_table(s, &o, &r->table);
    }
    for (int i = 0; job->with_stack && i < 2 && (i == 0 || sp_rep_has_gpu_time(s)); i++)
        r->stacks_rc[r->nstacks++] = sp_rep_stacks(s, stack_files[i].metric, &r->stacks[i]);
    if (!sh || take_summary(sh)) {
        summary(r, s);
        if (sh)
            share_set(sh, SHARE_DONE);
    } else {   /* the trace's thread has it: the set lives until it is done */
        sp_report_share_wait_while(sh, &sh->state, SHARE_TAKEN);
    }
}

int sp_report_render(sp_reports_t *r, sp_report_share_t *sh, const sp_export_job_t *job, const sp_event_ref_t *ev,
                     size_t n, const sp_gpu_view_t *gpu, const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns)
{
    memset(r, 0, sizeof *r);
    sp_rep_set_t s;
    sp_rep_init(&s);
    s.dropped = job->dropped + job->cupti_dropped;
    if (sp_report_adapt(&s, ev, n, gpu, mem, base_ns, end_ns) != 0 || sp_rep_analyze(&s) != 0) {
        sp_log(SP_LOG_ERROR, "out of memory analysing cycle %ld; its reports are dropped", job->cycle);
        sp_rep_free(&s);
        if (sh)
            share_set(sh, SHARE_DONE);
        return -1;
    }
    render(r, sh, job, &s);
    sp_rep_free(&s);
    return 0;
}

static int write_table(sp_reports_t *r, const sp_export_job_t *job, const char *stem)
{
    sp_rb_t *b = &r->table;
    if (!(job->table.print & (SP_JOB_TABLE_STDERR | SP_JOB_TABLE_FILE)))
        return 0;
    int rc = r->table_rc;
    if (rc == 0 && (job->table.print & SP_JOB_TABLE_FILE))
        rc = sp_memrep_write_file(job, stem, ".key_averages.txt", b);
    if (b->n && (job->table.print & SP_JOB_TABLE_STDERR)) {
        sp_rb_t e;
        sp_rb_init(&e);
        sp_rb_printf(&e, "stepprof: key averages of cycle %ld (%s/%s):\n", job->cycle, job->output_dir, stem);
        sp_rb_add(&e, b->s, b->n);
        if (!e.oom)
            sp_rb_write_fd(&e, 2);
        sp_rb_free(&e);
    }
    return rc;
}

int sp_report_write(sp_reports_t *r, const sp_export_job_t *job, const char *stem)
{
    int rc = write_table(r, job, stem);
    for (int i = 0; i < r->nstacks; i++)
        if (r->stacks_rc[i] != 0 || sp_memrep_write_file(job, stem, stack_files[i].suffix, &r->stacks[i]) != 0)
            rc = -1;
    /* Not *.json: HTA reads every *.json in a directory as a rank's trace. */
    if (r->summary_rc != 0 || (sp_memrep_write_file(job, stem, ".summary.txt", &r->text) |
                               sp_memrep_write_file(job, stem, ".summary.json.txt", &r->json)) != 0)
        rc = -1;
    sp_report_discard(r);
    return rc;
}

void sp_report_discard(sp_reports_t *r)
{
    sp_rb_free(&r->table);
    sp_rb_free(&r->stacks[0]);
    sp_rb_free(&r->stacks[1]);
    sp_rb_free(&r->text);
    sp_rb_free(&r->json);
}
