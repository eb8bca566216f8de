/*
 * iso_slot.c - the slot table and the helpers of iso_slot.h.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_slot.h"

#include <time.h>

IsoSlot *iso_slots[ISO_MAX_HOSTS];
static const RAI_HostApi *host_api;

void Iso_SetApi(const RAI_HostApi *api) {
    host_api = api;
}

const RAI_HostApi *Iso_Api(void) {
    return host_api;
}

long long Iso_NowMs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void Iso_CondWaitMs(IsoSlot *s, long long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&s->cond, &s->mu, &ts);
}

void Iso_ErrorText(const IsoMsg *m, RAI_Error *err) {
    IsoReader r;
    IsoReader_Init(&r, m->payload, m->payload_len);
    const char *text = "";
    size_t len = 0;
    IsoReader_StrView(&r, &text, &len, ISO_NAME_MAX);
    Error_SetFmt(err, "%.*s", (int)len, text);
}
