/*
 * host_state.c - what the whole host shares: its state (what argv and HELLO
 * told it) and how it speaks of itself on stderr and ends on a protocol
 * error.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "isolation/host/host.h"

HostState host;

void Host_Say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "redisai-backend-host[%d] %s: %s\n", (int)getpid(),
            host.kind_name ? host.kind_name : "?", line);
    fflush(stderr);
}

void Host_ProtocolError(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    Host_Say("protocol error: %s; exiting", line);
    /* Also to the core, whose log is where an operator looks (the host's
     * stderr is Redis's, often /dev/null). */
    char text[600];
    snprintf(text, sizeof(text), "protocol error: %s; exiting", line);
    IsoBuf b;
    IsoBuf_Init(&b);
    IsoBuf_U32(&b, RAI_LOG_WARNING);
    IsoBuf_CStr(&b, text);
    if (!b.oom) Iso_Send(HOST_CTL_FD, ISO_MSG_LOG, 0, b.data, b.len, NULL, 0);
    IsoBuf_Free(&b);
    /* _exit: a framework's static destructors must not run (or hang) on
     * the way out of a host that no longer trusts its connection. */
    _exit(ISO_HOST_EXIT_PROTOCOL);
}
