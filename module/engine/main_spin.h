/*
 * main_spin.h - Redis's main thread kept awake between a lone client's runs
 * (docs/performance.md, "Main-thread spin").
 *
 * Between two requests of a lone client every thread of a request sleeps:
 * the worker on its queue (engine/run_queue.c spins for that), and Redis's
 * main thread in its event loop's poll, once after handing a run off and
 * once after the reply. On these virtual machines a wake-up from there costs
 * tens of microseconds, as much as a small CNN's run. So after a run starts
 * (inline or queued) and after a run's reply, for a lone client (at most one
 * waits for a queued run, and the latest two runs were its own:
 * RunQueue_LoneClient), the module keeps an always-readable eventfd in
 * Redis's event loop for WORKER_SPIN_US: the loop's poll then returns at
 * once, pass after pass, and sees the worker's unblock or the client's next
 * request without a wake-up. A pass that did nothing else yields the CPU to
 * anything runnable (the framework's threads); a busy one does not, so
 * other clients' commands keep the main thread's share of the CPU. With more
 * clients waiting, or clients taking turns, the main thread is busy anyway
 * and nothing spins; WORKER_SPIN_US 0 turns it off with the
 * workers' spins. Redis 6.2 has no RedisModule_EventLoopAdd: no spin there.
 *
 * While the fd is in the loop, workers only queue finished clients
 * (engine/completion.h) and every pass unblocks them: from the main thread
 * the unblock takes Redis's unblocked-clients mutex uncontended and its
 * pipe write wakes no one (a worker's write met the spinning main thread on
 * that mutex, 3 us a request on the Torch CNN).
 *
 * Not a 0 ms module timer asked for again from its own callback: Redis
 * reschedules its timer event at least 1 ms ahead then, and the loop
 * sleeps that long.
 */
#ifndef REDISAI_MAIN_SPIN_H
#define REDISAI_MAIN_SPIN_H

#include "redismodule.h"

/* A run started or was answered: spin from now for WORKER_SPIN_US for a
 * lone client. Main thread. */
void MainSpin_Note(void);

/* Passes of the event loop kept from sleeping since load (INFO). */
long long MainSpin_Passes(void);

#endif
