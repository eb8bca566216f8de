/*
 * device.h - device strings: `CPU`, `GPU`, `CPU:<n>`, `GPU:<n>`. A model
 * keeps its device string exactly as typed; its run queue is named after the
 * upper-cased string (docs/commands.md, "How commands run": CPU and CPU:0 are
 * different queues).
 */
#ifndef REDISAI_DEVICE_H
#define REDISAI_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "redisai/backend_abi.h"

/* MODELSTORE's rule: shorter than 10 chars, CPU/GPU, optionally `:digits`
 * (`GPU:` with no digits passes, as in 1.2). */
int Device_ParseStrict(const char *s, RAI_DeviceKind *kind, int64_t *id);
/* The backends' looser rule (MODELSET, scripts): anything starting with CPU
 * is the CPU; GPU or GPU:<n>. */
int Device_ParseLoose(const char *s, RAI_DeviceKind *kind, int64_t *id);
/* Upper-cased copy into buf. */
void Device_QueueName(const char *s, char *buf, size_t len);

#endif
