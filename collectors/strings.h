/* collectors/strings.h — interned strings (NVTX messages, domain names): an
 * id per distinct string, stable for the life of the process, resolved at
 * export. Finding a known string hashes it and takes no lock (only a new
 * string does); callers on a hot path go through the per-thread pointer
 * cache in sp_str_intern_cached, which skips the hash.
 *
 * A recording NVTX range does not intern its name on the program's thread:
 * sp_str_defer copies the text into the thread's own log (collectors/
 * strings_log.c) and hands back a deferred id, which the collecting thread
 * turns into an interned id (sp_str_settle_refs, from sp_ev_collect or, while
 * the exporter sorts, sp_ev_settle on the reports' thread) before anything reads
 * the name. A deferred id has SP_STR_DEFERRED set; interned ids never
 * do (they stay below 2^30). */
#ifndef SP_STRINGS_H
#define SP_STRINGS_H

#include <stddef.h>
#include <stdint.h>

uint32_t sp_str_intern(const char *s);          /* 0 on allocation failure */
uint32_t sp_str_intern_cached(const char *s);   /* pointer cache, verified by content */
const char *sp_str_get(uint32_t id);            /* "" for unknown ids */
/* ids[i] = sp_str_intern(s[i]) for n strings, their cache misses overlapped. */
void sp_str_intern_many(const char *const *s, uint32_t *ids, size_t n);

#define SP_STR_DEFERRED 0x80000000u

/* Hot path, the program's thread: an id for s recorded in record window
 * `window`. No lock, no malloc; a new log block (every ~16 KiB of text) is
 * taken lock-free. Falls back to sp_str_intern when the log is full or s is
 * longer than a block, and returns 0 ("") when called from a signal handler
 * that interrupted another sp_str_defer on the same thread. */
uint32_t sp_str_defer(const char *s, uint32_t window);
/* sp_str_defer's common case only: 0 (nothing kept) when s holds a ',', or
 * its copy needs a new log block, or a signal handler interrupted another
 * sp_str_defer. Reads s once (the NVTX push that skips the PyTorch operator
 * check, whose operator names have a ','). */
uint32_t sp_str_defer_plain(const char *s, uint32_t window);

/* The record naming deferred id `id` was not stored (the pool is full): its
 * text is taken back if it is the last this thread deferred, which it is
 * when every range opened inside it was dropped too (pushes and pops nest);
 * otherwise (start/end ranges overlap) it is marked and taken back together
 * with the text after it once that is given back, so a full pool does not
 * fill the log. Only for a window still open, on the thread that deferred it,
 * while that text is in the thread's current block (text dropped on another
 * thread, or after its block filled, waits for its window's collection). */
void sp_str_undefer(uint32_t id);

/* The collecting side: replaces every deferred id among the n ids at names
 * (stride bytes apart) with its interned id, then reuses the log blocks that
 * hold text of windows <= window only. The caller promises that no deferred
 * id of such a window is settled later (collections take windows in order,
 * and a later one skips older windows' records). Calls are serialized. */
void sp_str_settle(uint32_t window, uint32_t *names, size_t n, size_t stride);
/* The same for ids inside records: refs holds n record pointers, stride bytes
 * apart, each record's id at byte offset off (the exporter's event references). */
void sp_str_settle_refs(uint32_t window, void *const *refs, size_t n, size_t stride, size_t off);

void sp_str_after_fork_child(void);
void sp_str_log_after_fork_child(void);        /* strings_log.c's part of it */

#endif
