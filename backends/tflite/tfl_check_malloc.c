/*
 * tfl_check_malloc.c - the validator's own malloc: every block ends on an
 * inaccessible page, so a model that makes LiteRT write past a block of its
 * own dies in the validator at once.
 *
 * Found by the fuzz test: a model whose operator writes its output into a
 * smaller tensor overruns one of LiteRT's blocks; glibc's heap took that
 * silently, and the same model then crashed Redis, whose malloc (jemalloc)
 * did not. Only redisai_tflite_check links this file: defining malloc in
 * the executable interposes it for libLiteRt.so and libstdc++ too.
 *
 * A mapping per block costs a page or more, so past FENCED_BLOCKS blocks
 * (a big model) the rest come from glibc's heap, unfenced. free() tells the
 * two apart by the header each fenced block carries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

#define FENCED_BLOCKS 50000
#define MAGIC 0x52414966656e6365ull /* "RAIfence" */
#define MIN_ALIGN 16

typedef struct Header {
    uint64_t magic;
    size_t size;
    void *map;
    size_t map_len;
} Header;

static atomic_long fenced_count;
static size_t page_size;

static size_t roundUp(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* The block's end touches the guard page (up to align - 1 bytes short). */
static void *fencedAlloc(size_t size, size_t align) {
    if (align < MIN_ALIGN) align = MIN_ALIGN;
    if (page_size == 0) page_size = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = roundUp(size ? size : 1, align);
    size_t head = roundUp(sizeof(Header), align);
    if (body > SIZE_MAX / 2) return NULL;
    size_t data_len = roundUp(body + head, page_size);
    if (align > page_size) data_len += align;
    char *map = mmap(NULL, data_len + page_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return NULL;
    if (mprotect(map + data_len, page_size, PROT_NONE) != 0) {
        munmap(map, data_len + page_size);
        return NULL;
    }
    char *p = map + data_len - body;
    p -= (uintptr_t)p % align;
    Header *h = (Header *)(p - sizeof(Header));
    *h = (Header){.magic = MAGIC, .size = size, .map = map, .map_len = data_len + page_size};
    return p;
}

static Header *headerOf(void *p) {
    Header *h = (Header *)((char *)p - sizeof(Header));
    return h->magic == MAGIC ? h : NULL;
}

static int fenceNext(void) {
    return atomic_fetch_add(&fenced_count, 1) < FENCED_BLOCKS;
}

void *malloc(size_t size) {
    return fenceNext() ? fencedAlloc(size, MIN_ALIGN) : __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return fenceNext() ? fencedAlloc(total, MIN_ALIGN) : __libc_calloc(n, size);
}

void free(void *p) {
    if (p == NULL) return;
    Header *h = headerOf(p);
    if (h == NULL) {
        __libc_free(p);
        return;
    }
    h->magic = 0;
    munmap(h->map, h->map_len);
}

void *realloc(void *p, size_t size) {
    if (p == NULL) return malloc(size);
    Header *h = headerOf(p);
    if (h == NULL) return __libc_realloc(p, size);
    void *q = malloc(size);
    if (q == NULL) return NULL;
    memcpy(q, p, h->size < size ? h->size : size);
    free(p);
    return q;
}

void *memalign(size_t align, size_t size) {
    return fenceNext() ? fencedAlloc(size, align) : __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size) {
    return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
    void *p = memalign(align, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t size) {
    return memalign((size_t)sysconf(_SC_PAGESIZE), size);
}
