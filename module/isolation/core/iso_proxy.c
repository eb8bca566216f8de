/*
 * iso_proxy.c - PLACEHOLDER while the proxy is written on branch i13 (issue
 * 13): refuses every isolated load so that the loader and config changes
 * can be built and tested beside it. Replaced by the real proxy before the
 * branch merges.
 */
#include "iso_proxy.h"

void Iso_Init(RedisModuleCtx *ctx) { (void)ctx; }

const RAI_BackendDescriptor *Iso_Load(RedisModuleCtx *ctx, RAI_BackendKind kind, const char *name,
                                      const char *real, const char *shown, RAI_Error *err) {
    (void)ctx, (void)kind, (void)name, (void)real;
    Error_SetFmt(err, "%s: cannot isolate: the isolation proxy is not built yet", shown);
    return NULL;
}

int Iso_IsProxy(const RAI_BackendDescriptor *d) { (void)d; return 0; }
void Iso_InfoSection(RedisModuleInfoCtx *ctx) { (void)ctx; }
void Iso_Shutdown(void) {}
