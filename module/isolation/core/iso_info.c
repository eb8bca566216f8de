/*
 * iso_info.c - INFO MODULES section `ai_isolation` (docs/info.md,
 * "ai_isolation"): one dictionary field per isolated backend, named after
 * the backend (ai_host_<name>). RSS comes from /proc on the main thread: no message to a host
 * that may be the very thing that is stuck.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_info.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "isolation/core/iso_slot.h"

static long long statmRss(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "r");
    long long size = 0, rss = 0;
    if (f == NULL) return 0;
    if (fscanf(f, "%lld %lld", &size, &rss) != 2) rss = 0;
    fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
}

static long long peakRss(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long long kb = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb * 1024;
}

static const char *stateName(IsoState st) {
    switch (st) {
    case ISO_READY: return "ready";
    case ISO_STARTING: return "starting";
    default: return "backoff";
    }
}

void Iso_InfoSection(RedisModuleInfoCtx *ctx, int (*is_default)(const RAI_BackendDescriptor *d)) {
    int count = 0;
    for (int i = 0; i < ISO_MAX_HOSTS; i++) count += iso_slots[i] != NULL;
    /* Without isolated backends INFO stays exactly as it was. */
    if (count == 0) return;
    RedisModule_InfoAddSection(ctx, "isolation");
    RedisModule_InfoAddFieldLongLong(ctx, "isolated_backends", count);
    for (int i = 0; i < ISO_MAX_HOSTS; i++) {
        IsoSlot *s = iso_slots[i];
        if (s == NULL) continue;
        /* "host_" first: a backend's own INFO fields start with its framework's
         * name (ai_onnxruntime_memory), and tools filter by that prefix. */
        char field[128] = "host_";
        size_t k = 5;
        for (const char *p = s->name; *p && k + 1 < sizeof(field); p++) {
            int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '_';
            field[k++] = ok ? *p : '_';
        }
        field[k] = '\0';
        pthread_mutex_lock(&s->mu);
        pid_t pid = s->state == ISO_READY ? s->pid : 0;
        long models = 0, scripts = 0, recreating = 0;
        for (IsoHandle *h = s->handles; h; h = h->next) {
            if (h->state == ISO_H_RECREATING) recreating++;
            if (h->is_script) {
                scripts++;
            } else {
                models++;
            }
        }
        RedisModule_InfoBeginDictField(ctx, field);
        RedisModule_InfoAddFieldCString(ctx, "kind", (char *)Backend_KindName(s->kind));
        RedisModule_InfoAddFieldLongLong(ctx, "default", is_default(&s->desc));
        RedisModule_InfoAddFieldCString(ctx, "state", (char *)stateName(s->state));
        RedisModule_InfoAddFieldLongLong(ctx, "pid", pid);
        RedisModule_InfoAddFieldLongLong(ctx, "rss", pid ? statmRss(pid) : 0);
        RedisModule_InfoAddFieldLongLong(ctx, "peak_rss", pid ? peakRss(pid) : 0);
        RedisModule_InfoAddFieldLongLong(ctx, "restarts", s->restarts);
        RedisModule_InfoAddFieldLongLong(ctx, "failed_starts", s->failed_starts);
        RedisModule_InfoAddFieldCString(ctx, "last_exit", s->last_exit_token);
        RedisModule_InfoAddFieldLongLong(ctx, "last_exit_time", s->last_exit_time);
        RedisModule_InfoAddFieldLongLong(
            ctx, "uptime", pid ? (Iso_NowMs() - s->ready_since_ms) / 1000 : 0);
        RedisModule_InfoAddFieldLongLong(ctx, "channels", s->channels);
        RedisModule_InfoAddFieldLongLong(ctx, "inflight", s->inflight);
        RedisModule_InfoAddFieldLongLong(
            ctx, "outputs_in_place", __atomic_load_n(&s->outputs_in_place, __ATOMIC_RELAXED));
        RedisModule_InfoAddFieldLongLong(
            ctx, "outputs_copied", __atomic_load_n(&s->outputs_copied, __ATOMIC_RELAXED));
        RedisModule_InfoAddFieldLongLong(ctx, "models", models);
        RedisModule_InfoAddFieldLongLong(ctx, "scripts", scripts);
        RedisModule_InfoAddFieldLongLong(ctx, "recreating", recreating);
        RedisModule_InfoAddFieldLongLong(ctx, "frees_queued", s->frees_queued);
        RedisModule_InfoEndDictField(ctx);
        pthread_mutex_unlock(&s->mu);
    }
}
