/* exporters/table.h — the key-average table, byte for byte the layout of
 * torch's key_averages().table() (formats.md section 4). */
#ifndef SP_TABLE_H
#define SP_TABLE_H

#include "agg.h"
#include "report_buf.h"

/* Appends the table of an analysed set to out (nothing when the set has no
 * rows, as torch prints ""). 0, or -1 (bad sort key, out of memory). */
int sp_rep_table(sp_rep_set_t *s, const sp_rep_opts_t *o, sp_rb_t *out);

/* torch's _format_time for a duration in ns: 1.234us, 1.234ms, 1.234s. */
void sp_rep_fmt_time(char *buf, size_t len, int64_t ns);

/* torch's _format_memory: 1.50 MB, 512 B (1024 steps). */
void sp_rep_fmt_bytes(char *buf, size_t len, int64_t bytes);

#endif
