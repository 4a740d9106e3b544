/* collectors/api.c — the row data of collectors/api.h, expanded once. */
#include "api.h"

const sp_api_info_t sp_api_table[SP_API_COUNT] = {
#define SP_API_ROW(sym, cbid, shape, stream) [SP_API_##sym] = {#sym, cbid, SP_SHAPE_##shape, stream, 0},
    SP_API_LIST(SP_API_ROW)
#undef SP_API_ROW
#define SP_DRV_ROW(sym, cbid, shape, stream) [SP_API_##sym] = {#sym, cbid, SP_SHAPE_##shape, stream, 1},
    SP_DRIVER_API_LIST(SP_DRV_ROW)
#undef SP_DRV_ROW
};

const char *sp_api_copy_kind_name(uint64_t k)
{
    static const char *const names[] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default"};
    if (k < sizeof names / sizeof names[0])
        return names[k];
    return k == SP_COPY_PEER ? "PtoP" : "Unknown";
}
