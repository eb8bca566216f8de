/*
 * iso_restart.c - the restart policy (docs/isolation.md, "The restart
 * policy"): after a death, spawn again (at once after a healthy host, then
 * with a delay doubling from 100 ms to 30 s while it keeps failing), redo
 * the hello, and re-create every stored model and script of the slot, in
 * creation order, from the blobs the core keeps.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "isolation/core/iso_control.h"
#include "isolation/core/iso_handle.h"
#include "isolation/core/iso_spawn.h"

#define ISO_BACKOFF_FIRST_MS 100
#define ISO_BACKOFF_MAX_MS 30000

static pthread_mutex_t rmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rcond = PTHREAD_COND_INITIALIZER;
/* Schedules so far, under rmu: the restarter looks at the slots, then waits
 * only if none came since it began to look (a signal before its wait would
 * otherwise be lost, and the restart start up to a second late). */
static unsigned long schedules = 0;

/* slot->mu held. */
void IsoRestart_Schedule(IsoSlot *s) {
    long long delay = 0;
    if (s->failures > 0) {
        delay = ISO_BACKOFF_FIRST_MS;
        for (int i = 1; i < s->failures && delay < ISO_BACKOFF_MAX_MS; i++) delay *= 2;
        if (delay > ISO_BACKOFF_MAX_MS) delay = ISO_BACKOFF_MAX_MS;
    }
    s->failures++;
    s->restart_at_ms = Iso_NowMs() + delay;
    pthread_mutex_lock(&rmu);
    schedules++;
    pthread_cond_signal(&rcond);
    pthread_mutex_unlock(&rmu);
}

static void markStartFailed(IsoSlot *s, const char *why) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_exit, sizeof(s->last_exit), "start failed: %.200s", why);
    snprintf(s->last_exit_token, sizeof(s->last_exit_token), "start_failed");
    s->dead_generation = s->generation;
    s->generation++;
    IsoRestart_Schedule(s);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    RedisModule_Log(NULL, "warning", "%s backend host %s: restart failed: %s",
                    Backend_KindName(s->kind), s->name, why);
}

/* Re-creates the handles waiting for this host, one at a time, each runnable
 * as soon as its own create answers. */
static void recreate(IsoSlot *s) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        uint64_t gen = s->generation;
        IsoHandle *h = s->handles;
        while (h && h->state != ISO_H_RECREATING) h = h->next;
        if (h == NULL || s->state != ISO_READY) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        h->busy = 1;
        pthread_mutex_unlock(&s->mu);

        RAI_Error err;
        Error_Init(&err);
        uint64_t used = gen;
        int rc = IsoHandle_CreateInHost(s, h, NULL, &used, &err);
        if (rc == -2) {
            char reason[300];
            snprintf(reason, sizeof(reason), "killed after the create of %s took over %lld ms",
                     h->key, rai_config.backend_start_timeout);
            IsoControl_KillWithReason(s, used, reason, "killed_create_timeout");
        }
        pthread_mutex_lock(&s->mu);
        h->busy = 0;
        if (h->freed) {
            /* Its model or script went while this create ran (iso_proxy.c
             * left it here rather than wait): free it, in the host too. */
            pthread_mutex_unlock(&s->mu);
            if (rc == 1) IsoHandle_FreeInHost(s, h, used);
            IsoHandle_Free(h);
            Error_Clear(&err);
            if (rc < 0) return;
            continue;
        }
        if (rc == 1) {
            h->state = ISO_H_LIVE;
            h->generation = used;
        } else if (rc == 0) {
            h->state = ISO_H_FAILED;
            free(h->failed);
            h->failed = strdup(Error_Message(&err));
        } else if (++h->create_deaths >= 2) {
            h->state = ISO_H_QUARANTINED;
            RedisModule_Log(NULL, "warning",
                            "%s backend host %s died twice while re-creating %s: the model is "
                            "disabled until stored again", Backend_KindName(s->kind), s->name,
                            h->key);
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        Error_Clear(&err);
        if (rc < 0) return; /* this host is gone: the next one starts over */
    }
}

static void restart(IsoSlot *s) {
    char why[512];
    pthread_mutex_lock(&s->mu);
    s->state = ISO_STARTING;
    s->kill_reason[0] = '\0';
    pthread_mutex_unlock(&s->mu);
    if (IsoSpawn_Start(s, why, sizeof(why)) != 0) {
        markStartFailed(s, why);
        return;
    }
    IsoControl_Wake();
    if (IsoControl_Hello(s, why, sizeof(why)) != 0) {
        /* The host was killed (or ended): the supervisor sees the death and
         * schedules the next try with the back-off. */
        RedisModule_Log(NULL, "warning", "%s backend host %s: restart failed: %s",
                        Backend_KindName(s->kind), s->name, why);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->state = ISO_READY;
    s->ready_since_ms = Iso_NowMs();
    s->restarts++;
    for (IsoHandle *h = s->handles; h; h = h->next) {
        if (h->state == ISO_H_LIVE || h->state == ISO_H_RECREATING) h->state = ISO_H_RECREATING;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    RedisModule_Log(NULL, "notice", "%s backend host %s restarted (pid %d, %.3f s)",
                    Backend_KindName(s->kind), s->name, (int)s->pid, s->last_start_seconds);
    recreate(s);
}

static void *restarterMain(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&rmu);
        unsigned long seen = schedules;
        pthread_mutex_unlock(&rmu);
        IsoSlot *due = NULL, *stale = NULL;
        long long now = Iso_NowMs(), next = now + 1000;
        for (int i = 0; i < ISO_MAX_HOSTS && due == NULL; i++) {
            IsoSlot *s = __atomic_load_n(&iso_slots[i], __ATOMIC_ACQUIRE);
            if (s == NULL) continue;
            pthread_mutex_lock(&s->mu);
            /* A model stored while its host died right after answering is
             * left to build in the next host, possibly after that host's
             * re-creation pass: catch it here. */
            if (s->state == ISO_READY) {
                for (IsoHandle *h = s->handles; h && !stale; h = h->next) {
                    if (h->state == ISO_H_RECREATING && !h->busy) stale = s;
                }
            }
            if (s->state == ISO_DEAD && !s->retired) {
                if (s->restart_at_ms <= now) {
                    due = s;
                } else if (s->restart_at_ms < next) {
                    next = s->restart_at_ms;
                }
            }
            /* Healthy after 60 s READY: the back-off starts over. */
            if (s->state == ISO_READY && s->failures && now - s->ready_since_ms >= 60000)
                s->failures = 0;
            pthread_mutex_unlock(&s->mu);
        }
        if (due) {
            restart(due);
            continue;
        }
        if (stale) {
            recreate(stale);
            continue;
        }
        pthread_mutex_lock(&rmu);
        struct timespec ts; /* rcond waits on the realtime clock */
        clock_gettime(CLOCK_REALTIME, &ts);
        long long wait = next - now;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        if (schedules == seen) pthread_cond_timedwait(&rcond, &rmu, &ts);
        pthread_mutex_unlock(&rmu);
    }
    return NULL;
}

static pthread_once_t restarter_once = PTHREAD_ONCE_INIT;

static void startRestarter(void) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The restarter spawns hosts: it never exits, so PR_SET_PDEATHSIG (which
     * fires when the spawning thread ends) only fires when Redis does. */
    pthread_create(&t, &attr, restarterMain, NULL);
    pthread_attr_destroy(&attr);
}

void IsoRestart_Start(void) {
    pthread_once(&restarter_once, startRestarter);
}
