/*
 * rai_dtype.c - the (code, bits) pair of each RAI_DTypeId, and the lookups
 * through a framework's column.
 */
#include "common/rai_dtype.h"

static const RAI_DType pairs[RAI_DTYPE_ID_COUNT] = {
    [RAI_DTYPE_ID_FLOAT32] = {.code = RAI_DTYPE_FLOAT, .bits = 32},
    [RAI_DTYPE_ID_FLOAT64] = {.code = RAI_DTYPE_FLOAT, .bits = 64},
    [RAI_DTYPE_ID_FLOAT16] = {.code = RAI_DTYPE_FLOAT, .bits = 16},
    [RAI_DTYPE_ID_BFLOAT16] = {.code = RAI_DTYPE_BFLOAT, .bits = 16},
    [RAI_DTYPE_ID_INT8] = {.code = RAI_DTYPE_INT, .bits = 8},
    [RAI_DTYPE_ID_INT16] = {.code = RAI_DTYPE_INT, .bits = 16},
    [RAI_DTYPE_ID_INT32] = {.code = RAI_DTYPE_INT, .bits = 32},
    [RAI_DTYPE_ID_INT64] = {.code = RAI_DTYPE_INT, .bits = 64},
    [RAI_DTYPE_ID_UINT8] = {.code = RAI_DTYPE_UINT, .bits = 8},
    [RAI_DTYPE_ID_UINT16] = {.code = RAI_DTYPE_UINT, .bits = 16},
    [RAI_DTYPE_ID_UINT32] = {.code = RAI_DTYPE_UINT, .bits = 32},
    [RAI_DTYPE_ID_UINT64] = {.code = RAI_DTYPE_UINT, .bits = 64},
    [RAI_DTYPE_ID_BOOL] = {.code = RAI_DTYPE_BOOL, .bits = 8},
    [RAI_DTYPE_ID_STRING] = {.code = RAI_DTYPE_STRING, .bits = 8},
};

int RAI_DTypeToFramework(const int *column, RAI_DType dt, int *out) {
    for (int id = 0; id < RAI_DTYPE_ID_COUNT; id++) {
        if (pairs[id].code == dt.code && pairs[id].bits == dt.bits) {
            if (column[id] == RAI_DTYPE_NO_TYPE) {
                return 0;
            }
            *out = column[id];
            return 1;
        }
    }
    return 0;
}

int RAI_DTypeFromFramework(const int *column, int type, RAI_DType *out) {
    for (int id = 0; id < RAI_DTYPE_ID_COUNT; id++) {
        if (column[id] != RAI_DTYPE_NO_TYPE && column[id] == type) {
            *out = pairs[id];
            return 1;
        }
    }
    return 0;
}
