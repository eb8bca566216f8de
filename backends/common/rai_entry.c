/*
 * rai_entry.c - the host table checks every backend's entry makes first.
 */
#include "common/rai_entry.h"

#include <stdarg.h>
#include <stdio.h>

__attribute__((format(printf, 3, 4))) static int refuse(char *errbuf, size_t errlen,
                                                        const char *fmt, ...) {
    if (errbuf && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int RAI_CheckHost(const RAI_HostApi *h, size_t min_size, const char *who, const char *min_abi,
                  char *errbuf, size_t errlen) {
    if (!h) {
        return refuse(errbuf, errlen, "no host API given");
    }
    if (h->abi_major != RAI_ABI_MAJOR) {
        return refuse(errbuf, errlen, "host ABI major %u, backend needs %d",
                      (unsigned)h->abi_major, RAI_ABI_MAJOR);
    }
    if (h->size < min_size) {
        if (min_abi) {
            return refuse(errbuf, errlen,
                          "host API table has %u bytes, %s needs at least %zu (ABI %s)",
                          (unsigned)h->size, who, min_size, min_abi);
        }
        return refuse(errbuf, errlen, "host API table has %u bytes, %s needs at least %zu",
                      (unsigned)h->size, who, min_size);
    }
    return 0;
}
