/*
 * iso_spawn.h - starting and killing a slot's backend host process.
 */
#ifndef REDISAI_ISO_SPAWN_H
#define REDISAI_ISO_SPAWN_H

#include <stddef.h>

#include "isolation/core/iso_slot.h"

/* redisai-backend-host beside redisai.so; NULL when it cannot be found. */
const char *Iso_HostPath(void);
/* Spawns the slot's host; on success slot->pid, pidfd and ctl are set.
 * Returns 0, or -1 with the reason in why. */
int IsoSpawn_Start(IsoSlot *s, char *why, size_t whylen);
/* Formats a wait status ("signal 11 SIGSEGV", "exit status 3") and its token. */
void IsoSpawn_Describe(int code, int status, char *text, size_t tl, char *token, size_t kl);
/* SIGKILL through the pidfd (or the pid). */
void IsoSpawn_Kill(IsoSlot *s);

#endif
