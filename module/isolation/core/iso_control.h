/*
 * iso_control.h - the hosts' control connections and the supervisor thread
 * that reads them, routes replies and sees deaths.
 */
#ifndef REDISAI_ISO_CONTROL_H
#define REDISAI_ISO_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "isolation/core/iso_slot.h"

/* What the supervisor does on a host's death that belongs to the files
 * above it: shut the slot's channels down so that runs blocked on them wake
 * (iso_channel.c), and schedule the restart (iso_restart.c). Both are
 * called with slot->mu held. Set once, by Iso_Init, before any host runs. */
typedef struct IsoControlHooks {
    void (*channels_down)(IsoSlot *s);
    void (*schedule_restart)(IsoSlot *s);
} IsoControlHooks;

void IsoControl_SetHooks(const IsoControlHooks *hooks);
/* Starts the supervisor thread, once. */
void IsoControl_StartThreads(void);
/* Wakes the supervisor to poll a new or changed slot. */
void IsoControl_Wake(void);
/* Sends a request on the slot's control connection and waits for its reply
 * (ERROR included) at most timeout_ms. Returns 1 with the reply in *reply,
 * 0 on timeout, -1 when the host died or was not up (slot->mu not held). */
int IsoControl_Request(IsoSlot *s, uint16_t type, const IsoBuf *payload, const int *fds, int nfds,
                       long long timeout_ms, IsoMsg *reply);
/* Sends a message that has no reply (SHUTDOWN); the send itself may block
 * while the host reads nothing. */
void IsoControl_Send(IsoSlot *s, uint16_t type, const IsoBuf *payload);
/* Queues the free of a handle for the slot's live host (slot->mu held):
 * never blocks. The supervisor sends the queue in order as the control
 * connection has room (a request sends what fits before itself); a host's
 * death drops what is left. */
void IsoControl_QueueFree(IsoSlot *s, uint16_t type, uint64_t handle);
/* The HELLO handshake of a freshly spawned host: 0, or -1 with why. */
int IsoControl_Hello(IsoSlot *s, char *why, size_t whylen);
/* Kills the host with the reason recorded first (slot->mu not held). */
void IsoControl_KillWithReason(IsoSlot *s, uint64_t generation, const char *reason,
                               const char *token);
/* The same for a protocol error: "killed: protocol error: <why>". */
void IsoControl_KillForProtocol(IsoSlot *s, uint64_t generation, const char *why);
/* Waits (slot->mu held) until the death of `generation` has a reason; then
 * writes "ERR <kind> backend process exited (<reason>) while <doing> <key>". */
void IsoControl_ExitError(IsoSlot *s, uint64_t generation, const char *doing, const char *key,
                          RAI_Error *err);

#endif
