/*
 * iso_proxy.h - isolated backends as the core sees them (docs/isolation.md,
 * "How it works"). An isolated backend is one slot of a fixed table; its
 * descriptor has the proxy's functions, which forward every create, run and
 * free to the slot's backend host process. The engine, batching, DAGs,
 * scripts, stats and persistence call it like any in-process descriptor.
 */
#ifndef REDISAI_ISO_PROXY_H
#define REDISAI_ISO_PROXY_H

#include "core/error.h"
#include "redisai/backend_abi.h"
#include "redismodule.h"

/* Module load: records where redisai.so lives (the host is beside it) and
 * the host table the core lends to backends, which the proxy uses on their
 * behalf (tensors, callbacks); sets the supervisor's hooks. */
void Iso_Init(RedisModuleCtx *ctx, const RAI_HostApi *api);
/* Starts a backend host for the backend file `real` (its real path, which
 * the loader has already checked as for an in-process load), waits for its
 * hello reply and returns the slot's proxy descriptor, whose kind,
 * framework, version and variant are the host's. `name` is the backend's
 * name (its folder under BACKENDSPATH without "redisai_"), `shown` the path
 * as the user gave it (for errors). NULL, with the reason in err naming the
 * file, when no host could be started. Main thread. */
const RAI_BackendDescriptor *Iso_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *name,
                                      const char *real, const char *shown, RAI_Error *err);
/* Frees an isolated model's handle (its descriptor's model_free) and takes
 * the model's blob (RedisModule_Alloc'd), which the handle borrowed: freed
 * now, or with the handle when the restarter is re-creating the model from
 * it. Never waits for the restarter or a host. Main thread. */
void Iso_ModelFree(void *handle, char *blob);
/* Redis is shutting down: SHUTDOWN to every host, wait briefly, kill. */
void Iso_Shutdown(void);

#endif
