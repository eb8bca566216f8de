/*
 * backend_info_cache.c - see backend_info_cache.h. One snapshot per kind,
 * swapped in whole by the main thread. A crash report on another thread
 * may be reading the snapshot being replaced, so the one before is freed
 * only at the next swap, not at this one.
 */
#include "commands/backend_info_cache.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

typedef struct InfoLine {
    char *field;
    char *value;
} InfoLine;

typedef struct InfoSnapshot {
    const RAI_BackendDescriptor *desc; /* whose lines these are */
    InfoLine *lines;
    size_t n, cap;
    char taken_at[32]; /* "2026-12-07T18:10:00.123Z" */
} InfoSnapshot;

static InfoSnapshot *current[RAI_BACKEND_KINDS]; /* atomic */
static InfoSnapshot *retired[RAI_BACKEND_KINDS]; /* main thread */

typedef struct Collector {
    RedisModuleInfoCtx *out;
    InfoSnapshot *snap;
} Collector;

static void snapshotFree(InfoSnapshot *s) {
    if (s == NULL) return;
    for (size_t i = 0; i < s->n; i++) {
        RedisModule_Free(s->lines[i].field);
        RedisModule_Free(s->lines[i].value);
    }
    RedisModule_Free(s->lines);
    RedisModule_Free(s);
}

static void collectLine(void *ctx, const char *field, const char *value) {
    Collector *c = ctx;
    if (c->out) RedisModule_InfoAddFieldCString(c->out, field, value);
    InfoSnapshot *s = c->snap;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4;
        s->lines = RedisModule_Realloc(s->lines, s->cap * sizeof(*s->lines));
    }
    s->lines[s->n++] = (InfoLine){.field = RedisModule_Strdup(field),
                                  .value = RedisModule_Strdup(value)};
}

static void stampNow(char out[32]) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char day[24];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", day, (int)(tv.tv_usec / 1000));
}

void BackendInfoCache_Collect(RedisModuleInfoCtx *ctx, const RAI_LoadedBackend *b) {
    const RAI_BackendDescriptor *d = b->desc;
    if (d->size < RAI_DESCRIPTOR_SIZE_1_2 || d->info == NULL) return;
    InfoSnapshot *s = RedisModule_Calloc(1, sizeof(*s));
    s->desc = d;
    Collector c = {.out = ctx, .snap = s};
    d->info(&c, collectLine);
    stampNow(s->taken_at);
    InfoSnapshot *old = __atomic_exchange_n(&current[b->kind], s, __ATOMIC_ACQ_REL);
    snapshotFree(retired[b->kind]);
    retired[b->kind] = old;
}

void BackendInfoCache_CollectInProcess(void) {
    for (int k = 0; k < RAI_BACKEND_KINDS; k++) {
        const RAI_LoadedBackend *b = Backend_Loaded((RAI_BackendKind)k);
        if (b && !b->isolated) BackendInfoCache_Collect(NULL, b);
    }
}

void BackendInfoCache_Print(RedisModuleInfoCtx *ctx, const RAI_LoadedBackend *b,
                            const char *field_prefix) {
    const RAI_BackendDescriptor *d = b->desc;
    if (d->size < RAI_DESCRIPTOR_SIZE_1_2 || d->info == NULL) return; /* nothing to keep */
    const InfoSnapshot *s = __atomic_load_n(&current[b->kind], __ATOMIC_ACQUIRE);
    if (s && s->desc != b->desc) s = NULL;
    for (size_t i = 0; s && i < s->n; i++) {
        RedisModule_InfoAddFieldCString(ctx, s->lines[i].field, s->lines[i].value);
    }
    char field[64];
    snprintf(field, sizeof(field), "%s_info_taken_at", field_prefix);
    RedisModule_InfoAddFieldCString(ctx, field, s ? s->taken_at : "never");
}
