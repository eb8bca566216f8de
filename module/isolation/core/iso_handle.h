/*
 * iso_handle.h - proxy handles: the core's record of a model or script that
 * lives in a host, enough to build it again in the next host after a death.
 */
#ifndef REDISAI_ISO_HANDLE_H
#define REDISAI_ISO_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#include "isolation/core/iso_slot.h"

/* A new handle for slot s, not yet built in a host nor linked into the
 * slot: copies of the key, device and names; a script's source copied too
 * (a model's blob stays borrowed). NULL after err (out of memory). */
IsoHandle *IsoHandle_New(IsoSlot *s, int is_script, const char *key, size_t key_len,
                         const char *device_str, int device, int64_t device_id, const char *blob,
                         size_t blob_len, size_t nin, const char *const *in, size_t nout,
                         const char *const *out, RAI_Error *err);
void IsoHandle_Free(IsoHandle *h);
/* Queues the free of h for the host of generation `generation`, if that
 * host is the slot's live one and h was built there (slot->mu not held);
 * never waits for the host (IsoControl_QueueFree). */
void IsoHandle_FreeInHost(IsoSlot *s, const IsoHandle *h, uint64_t generation);
/* Builds h in the slot's current host (no lock held); *generation gets the
 * host's. 1, 0 refused (text in err), -1 host died, -2 timeout. names (may
 * be NULL) gets the input and output names the host found. */
int IsoHandle_CreateInHost(IsoSlot *s, IsoHandle *h, RAI_ModelNames *names, uint64_t *generation,
                           RAI_Error *err);

#endif
