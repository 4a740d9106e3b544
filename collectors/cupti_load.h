/* collectors/cupti_load.h — libcupti, found and dlopened, its entry points
 * looked up by name (collectors/cupti_load.c); the collector (cupti.c) and the
 * device queries call CUPTI only through sp_cupti_api. */
#ifndef SP_CUPTI_LOAD_H
#define SP_CUPTI_LOAD_H

#include <cupti.h>

typedef struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*timestamp)(uint64_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*finalize)(void);
    CUptiResult (*callback_name)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType);
} sp_cupti_api_t;

extern sp_cupti_api_t sp_cupti_api;

void *sp_cupti_open(void);              /* dlopen handle of libcupti.so.13, NULL when none is found */
int sp_cupti_load_api(void *handle);    /* fills sp_cupti_api; 0 when a required entry point is missing */
const char *sp_cupti_result_text(CUptiResult r);

#endif
