/*
 * iso_restart.h - the restart policy: the restarter thread that spawns a
 * dead host again and re-creates its models and scripts.
 */
#ifndef REDISAI_ISO_RESTART_H
#define REDISAI_ISO_RESTART_H

#include "isolation/core/iso_slot.h"

/* Starts the restarter thread, once. */
void IsoRestart_Start(void);
/* Schedules the slot's next start after its back-off (slot->mu held): a
 * supervisor hook. */
void IsoRestart_Schedule(IsoSlot *s);

#endif
