/* exporters/writeback.h — how a large output file leaves the page cache as
 * it is written (the trace writer's and the gzip stream's write loops).
 *
 * A multi-GB trace written through the page cache alone costs the writing
 * thread more per byte the larger it gets: on the 2-core VM, 3 GB took 4.4 s
 * of system time (300 MB: 0.11 s) as fresh page-cache pages were found and
 * filled. Past SP_WRITEBACK_FROM, every SP_WRITEBACK bytes this starts the
 * writeback of the last stretch (sync_file_range, which does not wait for it)
 * and drops the pages before it that are clean by then (POSIX_FADV_DONTNEED),
 * so the cache recycles the same pages: 2.4 s for the same 3 GB. Smaller
 * files are left to the page cache: started early, the writeback competed
 * with the export for the CPU (a 400 MB trace's export 10% slower on 2
 * cores), and a viewer reads a small trace back from memory. Errors are
 * ignored: write(2) and close report what matters. */
#ifndef SP_WRITEBACK_H
#define SP_WRITEBACK_H

#include <fcntl.h>
#include <stdint.h>

#define SP_WRITEBACK ((uint64_t)64 << 20)          /* a stretch */
#define SP_WRITEBACK_FROM ((uint64_t)1 << 30)       /* files smaller are left to the page cache */

/* After a write that brought the file to `written` bytes; *started: where
 * the writeback was last started (0 at open). */
static inline void sp_writeback(int fd, uint64_t written, uint64_t *started)
{
    if (written < SP_WRITEBACK_FROM || written - *started < SP_WRITEBACK)
        return;
    (void)sync_file_range(fd, (off_t)*started, (off_t)(written - *started), SYNC_FILE_RANGE_WRITE);
    /* Everything before this stretch: pages still being written back are
     * skipped, and taken at a later call; ranges already dropped cost a walk
     * over an empty range, which does not grow with it (0.8-2 us a call for
     * an empty 3, 30 or 300 GB range on the VM). */
    if (*started)
        (void)posix_fadvise(fd, 0, (off_t)*started, POSIX_FADV_DONTNEED);
    *started = written;
}

#endif
