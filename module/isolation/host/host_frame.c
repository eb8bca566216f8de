/*
 * host_frame.c - the call stack of a channel thread (docs/isolation.md, "The
 * protocol": a channel is a call stack): one frame per request the thread serves or
 * waits on, on its own C stack, linked from a thread-local top. A thread
 * with no frame (a framework's own thread) serves no request.
 */
#include "isolation/host/host.h"

static __thread HostFrame *top;

void HostFrame_CheckCoreId(HostChannel *ch, const IsoMsg *m) {
    if (m->h.id & HOST_ID_BIT)
        Host_ProtocolError("channel %llu: %s with id 0x%llx, an id of the host's",
                           (unsigned long long)ch->id, Iso_MsgTypeName(m->h.type),
                           (unsigned long long)m->h.id);
}

void HostFrame_Enter(HostFrame *f, HostChannel *ch, uint64_t id) {
    *f = (HostFrame){.ch = ch, .id = id, .requests = (top ? top->requests : 0) + 1, .up = top};
    top = f;
}

void HostFrame_Leave(HostFrame *f) {
    top = f->up;
}

HostFrame *HostFrame_Top(void) {
    return top;
}

void HostFrame_Push(HostFrame *f) {
    top = f;
}
