/*
 * tfl_memory.c - buffer memory, plain (posix_memalign) in the server and
 * fenced (mmap with a PROT_NONE page after it) in the validator.
 */
#define _GNU_SOURCE
#include "tflite/tfl_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tflite/tfl_api.h"

#define SLACK_BYTE 0xA5

static int fenced;

void Tfl_FenceBuffers(void) {
    fenced = 1;
}

static size_t roundUp(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* The buffer's bytes up to the 64-byte boundary (at least 64). */
static size_t span(size_t bytes) {
    return bytes == 0 ? TFL_BUFFER_ALIGN : roundUp(bytes, TFL_BUFFER_ALIGN);
}

void *Tfl_BufferAlloc(size_t bytes) {
    size_t s = span(bytes);
    if (!fenced) {
        void *mem = NULL;
        if (posix_memalign(&mem, TFL_BUFFER_ALIGN, s) != 0) return NULL;
        memset(mem, 0, s);
        return mem;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = roundUp(s, page);
    char *map = mmap(NULL, data + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return NULL;
    if (mprotect(map + data, page, PROT_NONE) != 0) {
        munmap(map, data + page);
        return NULL;
    }
    char *mem = map + data - s;
    memset(mem + bytes, SLACK_BYTE, s - bytes);
    return mem;
}

void Tfl_BufferFree(void *mem, size_t bytes) {
    if (mem == NULL) return;
    if (!fenced) {
        free(mem);
        return;
    }
    size_t s = span(bytes), page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = roundUp(s, page);
    munmap((char *)mem - (data - s), data + page);
}

int Tfl_BufferIntact(const void *mem, size_t bytes) {
    if (!fenced || mem == NULL) return 1;
    const unsigned char *p = mem;
    for (size_t i = bytes; i < span(bytes); i++) {
        if (p[i] != SLACK_BYTE) return 0;
    }
    return 1;
}
