/* exporters/writeback.h — how a large output file leaves the page cache as
 * it is written (the trace writer's and the gzip stream's write loops).
 *
 * A multi-GB trace written through the page cache alone costs the writing
 * thread more per byte the larger it gets: on the 2-core VM, 3 GB took 4.4 s
 * of system time (300 MB: 0.11 s) as fresh page-cache pages were found and
 * filled; every SP_WRITEBACK bytes this starts the writeback of the last
 * stretch (sync_file_range, which does not wait for it) and drops the pages
 * of the stretch before, whose writeback began a stretch ago
 * (POSIX_FADV_DONTNEED), so the cache recycles the same pages: 2.4 s for the
 * same 3 GB, and the CUPTI-on 3M-launch export's rate 1.87M -> 2.07-2.20M
 * events/s. Files under two stretches are left to the page cache (a viewer
 * reads them back from memory). Errors are ignored: write(2) and close report
 * what matters. */
#ifndef SP_WRITEBACK_H
#define SP_WRITEBACK_H

#include <fcntl.h>
#include <stdint.h>

#define SP_WRITEBACK ((uint64_t)64 << 20)

/* After a write that brought the file to `written` bytes; *started: where
 * the writeback was last started (0 at open). */
static inline void sp_writeback(int fd, uint64_t written, uint64_t *started)
{
    if (written - *started < SP_WRITEBACK)
        return;
    (void)sync_file_range(fd, (off_t)*started, (off_t)(written - *started), SYNC_FILE_RANGE_WRITE);
    if (*started >= SP_WRITEBACK)
        (void)posix_fadvise(fd, (off_t)(*started - SP_WRITEBACK), (off_t)SP_WRITEBACK, POSIX_FADV_DONTNEED);
    *started = written;
}

#endif
