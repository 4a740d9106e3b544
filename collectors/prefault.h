/* collectors/prefault.h — keeps the event pool's memory faulted in ahead of
 * the chunks being handed out, so page faults (and the huge-page zeroing or
 * compaction behind them, measured at up to 8 ms here) happen on a helper
 * thread, never on a recording thread. */
#ifndef SP_PREFAULT_H
#define SP_PREFAULT_H

#include <stddef.h>

/* Populates the first stretch now and starts the helper; the pool works
 * without it (faults then land on writers) if the thread cannot start. */
void sp_prefault_start(void *base, size_t bytes);
/* The pool has handed out memory up to `offset` bytes: keep ahead of it.
 * Cheap: a compare, and a condition signal once per populated stretch. */
void sp_prefault_need(size_t offset);
void sp_prefault_after_fork_child(void);

#endif
