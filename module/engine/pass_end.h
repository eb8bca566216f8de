/*
 * pass_end.h - "at the end of this pass of Redis's event loop", for the
 * passes that ask, without subscribing to every pass.
 *
 * Redis 7.0 dispatches the event-loop event to a subscribed module twice per
 * pass, each time with a module context and a temporary client it resets
 * afterwards: about 1,300 instructions a pass, paid by every command of the
 * server (a PING 1.40x its instructions without the module,
 * docs/performance.md "Instructions per request"). A pass that needs its end
 * marked creates one 0 ms module timer instead: Redis runs time events after
 * the pass's file events (the commands clients sent) in the same pass, never
 * from inside a command. A command Redis runs later in the pass (from
 * beforeSleep: the next pipelined command of a client just unblocked) sees
 * its timer fire in the next pass, after that pass's commands.
 */
#ifndef REDISAI_PASS_END_H
#define REDISAI_PASS_END_H

#include "redismodule.h"

typedef void (*PassEnd_Fn)(void);

/* fn runs once at the end of this pass (at most PASS_END_MAX different
 * functions; asking again for the same one in a pass adds nothing). At most
 * one timer is pending. Main thread, from a command. */
#define PASS_END_MAX 4
void PassEnd_Call(RedisModuleCtx *ctx, PassEnd_Fn fn);

#endif
