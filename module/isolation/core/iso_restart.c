/*
 * iso_restart.c - the restart policy (docs/isolation.md, "The restart
 * policy"): after a death, spawn again (at once after a healthy host, then
 * with a delay doubling from 100 ms to 30 s while it keeps failing), redo
 * the hello, and re-create every stored model and script of the slot, in
 * creation order, from the blobs the core keeps.
 *
 * Each host has a restarter thread of its own: a re-creation waits for each
 * create (up to BACKEND_START_TIMEOUT), and one host's slow create must not
 * hold another host's restart. A spawn that fails is a death like any
 * other: the slot goes back to DEAD with its back-off, so restarts never
 * give up.
 */
#define _GNU_SOURCE
#include "isolation/core/iso_restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend_kind.h"
#include "core/config.h"
#include "core/run_gate.h"
#include "isolation/core/iso_control.h"
#include "isolation/core/iso_handle.h"
#include "isolation/core/iso_spawn.h"

#define ISO_BACKOFF_FIRST_MS 100
#define ISO_BACKOFF_MAX_MS 30000

/* slot->mu held; the caller broadcasts slot->cond, which wakes the slot's
 * restarter. */
void IsoRestart_Schedule(IsoSlot *s) {
    long long delay = 0;
    if (s->failures > 0) {
        delay = ISO_BACKOFF_FIRST_MS;
        for (int i = 1; i < s->failures && delay < ISO_BACKOFF_MAX_MS; i++) delay *= 2;
        if (delay > ISO_BACKOFF_MAX_MS) delay = ISO_BACKOFF_MAX_MS;
    }
    s->failures++;
    s->restart_at_ms = Iso_NowMs() + delay;
}

/* No host was started (posix_spawn or the file's checks failed): a death
 * like any other, retried after the back-off. */
static void markStartFailed(IsoSlot *s, const char *why) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_exit, sizeof(s->last_exit), "start failed: %.200s", why);
    snprintf(s->last_exit_token, sizeof(s->last_exit_token), "start_failed");
    s->last_exit_time = (long long)time(NULL);
    s->dead_generation = s->generation;
    s->generation++;
    s->failed_starts++;
    s->state = ISO_DEAD;
    IsoRestart_Schedule(s);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    RunGate_Wake(); /* runs parked past their give-up time now fail */
    RedisModule_Log(NULL, "warning", "%s backend host %s: restart failed: %s",
                    Backend_KindName(s->kind), s->name, why);
}

/* Whether the death of the host of generation gen (slot->mu held, the death
 * recorded) counts against the handle whose create it interrupted: a crash,
 * a signal or its own create's timeout do; the module's kills for another
 * request's fault (a run past its deadline, a protocol error) do not. */
static int deathIsTheCreates(IsoSlot *s, uint64_t gen) {
    if (s->dead_generation != gen) return 0;
    return strcmp(s->last_exit_token, "killed_timeout") != 0 &&
           strcmp(s->last_exit_token, "killed_protocol") != 0;
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
        } else if ((rc == -2 || deathIsTheCreates(s, used)) && ++h->create_deaths >= 2) {
            h->state = ISO_H_QUARANTINED;
            RedisModule_Log(NULL, "warning",
                            "%s backend host %s died twice while re-creating %s: the model is "
                            "disabled until stored again", Backend_KindName(s->kind), s->name,
                            h->key);
        }
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        RunGate_Wake(); /* its parked runs run (or fail) now */
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
    RunGate_Wake(); /* scripts and models that need no re-creation */
    RedisModule_Log(NULL, "notice", "%s backend host %s restarted (pid %d, %.3f s)",
                    Backend_KindName(s->kind), s->name, (int)s->pid, s->last_start_seconds);
    recreate(s);
}

/* A READY host has a handle left to build that no pass is building: a model
 * stored while its host died right after answering is left to build in the
 * next host, possibly after that host's re-creation pass. slot->mu held. */
static int hasStale(IsoSlot *s) {
    if (s->state != ISO_READY) return 0;
    for (IsoHandle *h = s->handles; h; h = h->next) {
        if (h->state == ISO_H_RECREATING && !h->busy) return 1;
    }
    return 0;
}

/* The slot's restarter: sleeps on the slot's condition variable (monotonic,
 * broadcast at each death and state change) until a restart is due. */
static void *restarterMain(void *arg) {
    IsoSlot *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        long long now = Iso_NowMs();
        /* Healthy after 60 s READY: the back-off starts over. */
        if (s->state == ISO_READY && s->failures && now - s->ready_since_ms >= 60000)
            s->failures = 0;
        if (s->state == ISO_DEAD && !s->retired && s->restart_at_ms <= now) {
            pthread_mutex_unlock(&s->mu);
            restart(s);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        if (hasStale(s)) {
            pthread_mutex_unlock(&s->mu);
            recreate(s);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        long long wait = 1000;
        if (s->state == ISO_DEAD && !s->retired && s->restart_at_ms - now < wait)
            wait = s->restart_at_ms - now;
        Iso_CondWaitMs(s, wait);
    }
    return NULL;
}

void IsoRestart_Start(IsoSlot *s) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* A restarter spawns hosts: it never exits, so PR_SET_PDEATHSIG (which
     * fires when the spawning thread ends) only fires when Redis does. */
    if (pthread_create(&t, &attr, restarterMain, s) != 0) {
        RedisModule_Log(NULL, "warning", "%s backend host %s: cannot start its restarter: %s",
                        Backend_KindName(s->kind), s->name, strerror(errno));
    }
    pthread_attr_destroy(&attr);
}
