/*
 * iso_pipeline.h - model runs in flight on a channel (docs/isolation.md,
 * "Runs in flight"): a run-queue worker sends a run and goes on; the
 * host's answers, in order, complete the runs on the worker's thread.
 */
#ifndef REDISAI_ISO_PIPELINE_H
#define REDISAI_ISO_PIPELINE_H

#include <stddef.h>

#include "core/async_run.h"
#include "isolation/core/iso_chan.h"

/* async_run.h's submit, pending and wait, for an isolated model handle. */
int IsoPipeline_Submit(void *handle, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                       size_t ninputs, size_t noutputs, AsyncRun_DoneFn done, void *ctx,
                       RAI_Error *err);
size_t IsoPipeline_Pending(void);
/* The spin the next runs submitted on this thread tell their host (core/async_run.h). */
void IsoPipeline_SpinHint(long long spin_us);
void IsoPipeline_Wait(int wake_fd, long long max_ms);
/* Reads c until no run is in flight on it (before a run that is waited
 * for): each answer is kept for the next wait to deliver. c may be dropped
 * meanwhile (its host died): compare IsoChan_Current after. */
void IsoPipeline_Drain(IsoChan *c);
/* The host of c died (or c goes): every run in flight on c gets the exit
 * error, to be delivered by the next wait. */
void IsoPipeline_FailAll(IsoChan *c);

#endif
