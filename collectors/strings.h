/* collectors/strings.h — interned strings (NVTX messages, domain names): an
 * id per distinct string, stable for the life of the process, resolved at
 * export. Finding a known string hashes it and takes no lock (only a new
 * string does); callers on a hot path go through the per-thread pointer
 * cache in sp_str_intern_cached, which skips the hash. */
#ifndef SP_STRINGS_H
#define SP_STRINGS_H

#include <stdint.h>

uint32_t sp_str_intern(const char *s);          /* 0 on allocation failure */
uint32_t sp_str_intern_cached(const char *s);   /* pointer cache, verified by content */
const char *sp_str_get(uint32_t id);            /* "" for unknown ids */

void sp_str_after_fork_child(void);

#endif
