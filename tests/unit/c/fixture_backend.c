/*
 * fixture_backend.c - the good file of test_backend_file.c, built as a
 * shared object the way a backend is: hidden visibility, the ABI note of a
 * TORCH backend, RAI_BackendEntry exported and nothing else of use. The test
 * only reads it as data (it is never loaded) and derives every wrong file
 * from it by changing bytes. The static counter gives it a .bss section
 * (SHT_NOBITS), which takes no room in the file.
 */
#include "redisai/backend_abi.h"

RAI_BACKEND_ABI_NOTE(RAI_BACKEND_TORCH);

static int calls;

__attribute__((visibility("default"))) const RAI_BackendDescriptor *
RAI_BackendEntry(const RAI_HostApi *host, char *errbuf, size_t errlen);

_Static_assert(__builtin_types_compatible_p(__typeof__(&RAI_BackendEntry), RAI_BackendEntryFn),
               "RAI_BackendEntry must match RAI_BackendEntryFn");

const RAI_BackendDescriptor *RAI_BackendEntry(const RAI_HostApi *host, char *errbuf,
                                              size_t errlen) {
    (void)host;
    if (errbuf != NULL && errlen > 0) errbuf[0] = '\0';
    calls++;
    return NULL;
}

/* Keeps `calls` a real variable, not folded away. */
__attribute__((visibility("hidden"))) int FixtureCalls(void) {
    return calls;
}
