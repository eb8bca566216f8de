/*
 * iso_channel.h - runs over the calling thread's data channel to a host.
 */
#ifndef REDISAI_ISO_CHANNEL_H
#define REDISAI_ISO_CHANNEL_H

#include <stddef.h>

#include "isolation/core/iso_slot.h"

int IsoChannel_ModelRun(IsoHandle *h, const RAI_RunInfo *info, RAI_Tensor *const *inputs,
                        size_t ninputs, RAI_Tensor **outputs, size_t noutputs, RAI_Error *err);
int IsoChannel_ScriptRun(IsoHandle *h, const RAI_RunInfo *info, const RAI_ScriptCall *call,
                         RAI_Tensor **outputs, RAI_Error *err);
/* Shuts down every channel of the slot (slot->mu held): a supervisor hook. */
void IsoChannel_ShutdownAll(IsoSlot *s);

#endif
