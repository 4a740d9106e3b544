/* exporters/agg_int.h — what the aggregation's files share and nothing else
 * calls (see agg.h for the report set itself). */
#ifndef SP_AGG_INT_H
#define SP_AGG_INT_H

#include "agg.h"

/* The set's host and memory events in lane order (thread, then canonical):
 * *order their indices, *lane every event's lane number (UINT32_MAX: none),
 * both malloc'ed. The count, or -1 when out of memory (nothing to free). */
long sp_rep_lane_order(const sp_rep_set_t *s, uint32_t **order, uint32_t **lane);

/* The set's strings (agg_strings.c), made by sp_rep_init and freed by
 * sp_rep_free. */
void sp_rep_strings_init(sp_rep_set_t *s);
void sp_rep_strings_free(sp_rep_set_t *s);

#endif
