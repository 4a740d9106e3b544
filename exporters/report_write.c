/* exporters/report_write.c — see report_write.h. Builds the neutral event
 * set once (report_adapt.c), analyses it once (after the caller has freed
 * what it was built from), and renders every report from it; each file goes through outfile.h (temporary name, then rename). The
 * table printed on stderr is one write(2), so it never interleaves with the
 * program's own lines. A failure loses that report only, never the trace. */
#include "report_write.h"

#include "../collectors/log.h"
#include "outfile.h"
#include "report_adapt.h"
#include "report_buf.h"
#include "stacks_out.h"
#include "summary.h"
#include "table.h"

#include "memory_report.h"

#include <errno.h>
#include <string.h>

static int table(sp_rep_set_t *s, const sp_export_job_t *job, const char *stem)
{
    if (!(job->table.print & (SP_JOB_TABLE_STDERR | SP_JOB_TABLE_FILE)))
        return 0;
    sp_rep_opts_t o = {job->table.sort_by, job->table.row_limit, job->table.group_by_input_shape,
                       job->table.group_by_stack_n};
    sp_rb_t b;
    sp_rb_init(&b);
    int rc = sp_rep_table(s, &o, &b);
    if (rc == 0 && (job->table.print & SP_JOB_TABLE_FILE))
        rc = sp_memrep_write_file(job, stem, ".key_averages.txt", &b);
    if (b.n && (job->table.print & SP_JOB_TABLE_STDERR)) {
        sp_rb_t e;
        sp_rb_init(&e);
        sp_rb_printf(&e, "stepprof: key averages of cycle %ld (%s/%s):\n", job->cycle, job->output_dir, stem);
        sp_rb_add(&e, b.s, b.n);
        if (!e.oom)
            sp_rb_write_fd(&e, 2);
        sp_rb_free(&e);
    }
    sp_rb_free(&b);
    return rc;
}

static int stacks(sp_rep_set_t *s, const sp_export_job_t *job, const char *stem)
{
    static const struct {
        const char *metric, *suffix;
    } files[] = {{"self_cpu_time_total", ".stacks.txt"}, {"self_cuda_time_total", ".stacks_cuda.txt"}};
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (i == 1 && !sp_rep_has_gpu_time(s))
            break;
        sp_rb_t b;
        sp_rb_init(&b);
        if (sp_rep_stacks(s, files[i].metric, &b) != 0 || sp_memrep_write_file(job, stem, files[i].suffix, &b) != 0)
            rc = -1;
        sp_rb_free(&b);
    }
    return rc;
}

static int summary(sp_rep_set_t *s, const sp_export_job_t *job, const char *stem)
{
    sp_rb_t text, json;
    sp_rb_init(&text);
    sp_rb_init(&json);
    int rc = sp_rep_summary(s, &text, &json);
    if (rc == 0)
        /* Not *.json: HTA reads every *.json in a directory as a rank's trace. */
        rc = sp_memrep_write_file(job, stem, ".summary.txt", &text) |
             sp_memrep_write_file(job, stem, ".summary.json.txt", &json);
    sp_rb_free(&text);
    sp_rb_free(&json);
    return rc ? -1 : 0;
}

int sp_report_build(sp_rep_set_t *s, const sp_export_job_t *job, const sp_event_ref_t *ev, size_t n,
                    const sp_gpu_view_t *gpu, const sp_mem_cycle_t *mem, uint64_t base_ns, uint64_t end_ns)
{
    sp_rep_init(s);
    s->dropped = job->dropped + job->cupti_dropped;
    if (sp_report_adapt(s, ev, n, gpu, mem, base_ns, end_ns) != 0) {
        sp_log(SP_LOG_ERROR, "out of memory analysing cycle %ld; its reports are dropped", job->cycle);
        sp_rep_free(s);
        return -1;
    }
    return 0;
}

int sp_report_write(const sp_export_job_t *job, const char *stem, sp_rep_set_t *s)
{
    if (sp_rep_analyze(s) != 0) {
        sp_log(SP_LOG_ERROR, "out of memory analysing cycle %ld; its reports are dropped", job->cycle);
        sp_rep_free(s);
        return -1;
    }
    int rc = table(s, job, stem);
    if (job->with_stack && stacks(s, job, stem) != 0)
        rc = -1;
    if (summary(s, job, stem) != 0)
        rc = -1;
    sp_rep_free(s);
    return rc;
}
