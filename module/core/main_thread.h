/*
 * main_thread.h - which thread is Redis's main thread. Module code on the
 * main thread always runs with Redis's global lock held, so code reached
 * from it (an LLAPI client's synchronous script run calling redis.execute)
 * must not take that lock again: the lock is not recursive.
 */
#ifndef REDISAI_MAIN_THREAD_H
#define REDISAI_MAIN_THREAD_H

/* Records the calling thread as the main thread: call from OnLoad. */
void MainThread_Init(void);
int MainThread_Is(void);

#endif
