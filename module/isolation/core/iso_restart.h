/*
 * iso_restart.h - the restart policy: each host's restarter thread, which
 * spawns the dead host again and re-creates its models and scripts.
 */
#ifndef REDISAI_ISO_RESTART_H
#define REDISAI_ISO_RESTART_H

#include "isolation/core/iso_slot.h"

/* Starts the restarter thread of a slot just loaded (READY), once per slot. */
void IsoRestart_Start(IsoSlot *s);
/* Schedules the slot's next start after its back-off (slot->mu held): a
 * supervisor hook. */
void IsoRestart_Schedule(IsoSlot *s);

#endif
