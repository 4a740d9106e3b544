/* exporters/memory_html.h — <stem>.memory.html (profile_memory): one
 * self-contained page, inline SVG and CSS and no script, that draws the
 * allocated bytes over the window per device (and for pinned host memory),
 * with the step boundaries and the peak marked. Opens from disk in any
 * browser. */
#ifndef SP_MEMORY_HTML_H
#define SP_MEMORY_HTML_H

#include "../collectors/memory.h"
#include "export.h"

int sp_memhtml_write(const sp_export_job_t *job, const char *stem, const sp_mem_cycle_t *m);

#endif
