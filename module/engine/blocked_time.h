/*
 * blocked_time.h - the background time a blocked client's command is told
 * (RedisModule_BlockedClientMeasureTimeStart/End): what SLOWLOG, INFO
 * COMMANDSTATS and the latency histogram add to the main thread's time.
 *
 * Redis logs a blocked command as the main thread's time in the command
 * (measured until the command returns to Redis) + every Start/End interval
 * + the reply callback's time. A worker woken by the queue can begin a run
 * before the command has returned: that stretch would count twice, and the
 * logged time exceed the client's round trip. So a blocked client's runs
 * start only once its command has returned ("released"): at the next
 * blocking AI command, at the end of this pass of the event loop, or at a
 * one-shot event a waiting worker asks for, whichever comes first. Then
 * every interval lies between the command's return and its unblocking, one
 * after another (a DAG is on one worker at a time), and the logged total is
 * at most the time from the command's start to the reply's end. Each run
 * still lies inside its interval, so SLOWLOG >= AI.INFO's duration for the
 * runs of that command. Every End follows a Start of its own: Redis 7.0 and
 * Valkey 8.1 (module.c) do not reset the start at End, so a repeated End
 * would add the same stretch again. A server without one-shot events (6.2)
 * holds nothing (blocked_time.c).
 */
#ifndef REDISAI_BLOCKED_TIME_H
#define REDISAI_BLOCKED_TIME_H

#include "redismodule.h"

typedef struct RAI_BlockedTime {
    RedisModuleBlockedClient *bc;
    int released; /* atomic: the command that blocked bc has returned */
} RAI_BlockedTime;

/* bc was just blocked by the running command, whose DAG is about to be
 * queued: its runs wait until the command has returned. Releases the one
 * held before (its command has returned). Main thread. */
void BlockedTime_Hold(RedisModuleCtx *ctx, RAI_BlockedTime *t, RedisModuleBlockedClient *bc);
/* Before t's memory goes (the client's DAG is freed). Main thread. */
void BlockedTime_Forget(RAI_BlockedTime *t);
/* Around a backend run for t's client, on a worker (never the main thread,
 * which releases): Start waits until t is released. Nothing for a DAG no
 * client is blocked on (bc NULL: the LLAPI's, an inline run's). */
void BlockedTime_RunStart(RAI_BlockedTime *t);
void BlockedTime_RunEnd(RAI_BlockedTime *t);

#endif
