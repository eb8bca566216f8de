/*
 * rai_entry.h - what every backend's RAI_BackendEntry does before its own
 * set-up: declare itself with the type the core calls it through, and
 * refuse a host table it cannot use.
 *
 * The refusal texts are those each backend gave when it carried its own copy
 * of these checks; the core shows them after the file's path.
 */
#ifndef REDISAI_RAI_ENTRY_H
#define REDISAI_RAI_ENTRY_H

#include <stddef.h>

#include "redisai/backend_abi.h"

#ifdef __cplusplus
#include <type_traits>
extern "C" {
#endif

/* 0 when h is a host table this backend can use: given, of our ABI major,
 * and at least min_size bytes long (RAI_HOST_API_SIZE_1_0, _1_1, ...).
 * Otherwise -1, with the reason in errbuf when errbuf and errlen allow:
 *
 *     no host API given
 *     host ABI major 2, backend needs 1
 *     host API table has 96 bytes, <who> needs at least 176[ (ABI <min_abi>)]
 *
 * who names the backend in the last one ("backend"); min_abi, when not NULL,
 * says which ABI minor min_size is the table of ("1.1"). */
int RAI_CheckHost(const RAI_HostApi *h, size_t min_size, const char *who, const char *min_abi,
                  char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#define RAI_ENTRY_LINKAGE_ extern "C"
#define RAI_ENTRY_TYPE_CHECK_                                                               \
    static_assert(std::is_same<decltype(&RAI_BackendEntry), RAI_BackendEntryFn>::value, \
                  "RAI_BackendEntry must match RAI_BackendEntryFn")
#else
#define RAI_ENTRY_LINKAGE_
#define RAI_ENTRY_TYPE_CHECK_                                                               \
    _Static_assert(                                                                         \
        __builtin_types_compatible_p(__typeof__(&RAI_BackendEntry), RAI_BackendEntryFn), \
        "RAI_BackendEntry must match RAI_BackendEntryFn")
#endif

/* Opens the definition of the one symbol a backend exports:
 *
 *     RAI_BACKEND_ENTRY(h, errbuf, errlen) {
 *         if (RAI_CheckHost(h, RAI_HOST_API_SIZE_1_0, "backend", NULL, errbuf, errlen) != 0) {
 *             return NULL;
 *         }
 *         ...
 *         return &descriptor;
 *     }
 *
 * It declares RAI_BackendEntry with C linkage and default visibility (every
 * other symbol is hidden, and the version script hides what visibility
 * misses), and fails the build when that declaration no longer matches
 * RAI_BackendEntryFn. */
#define RAI_BACKEND_ENTRY(host_, errbuf_, errlen_)                                     \
    RAI_ENTRY_LINKAGE_ __attribute__((visibility("default"))) const RAI_BackendDescriptor * \
    RAI_BackendEntry(const RAI_HostApi *host_, char *errbuf_, size_t errlen_);            \
    RAI_ENTRY_TYPE_CHECK_;                                                               \
    RAI_ENTRY_LINKAGE_ const RAI_BackendDescriptor *RAI_BackendEntry(                     \
        const RAI_HostApi *host_, char *errbuf_, size_t errlen_)

#endif /* REDISAI_RAI_ENTRY_H */
