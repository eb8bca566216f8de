/*
 * tfl_check_malloc.c - the validator's own malloc: every block of 256 bytes
 * or more ends on an inaccessible page, so a model that makes LiteRT write
 * past a block of its own dies in the validator at once.
 *
 * Found by the fuzz test: a model whose operator writes its output into a
 * smaller tensor overruns one of LiteRT's blocks; glibc's heap took that
 * silently, and the same model then crashed Redis, whose malloc (jemalloc)
 * did not. Only redisai_tflite_check links this file: defining malloc in
 * the executable interposes it for libLiteRt.so and libstdc++ too.
 *
 * Fenced blocks are carved from one reserved region of address space (no
 * memory until used): each block's pages are made writable, the page after
 * them stays inaccessible, and a freed block's pages become inaccessible
 * again (a use after free dies too). free() knows a fenced block by its
 * address. Each block costs two of the kernel's map entries (65,530 by
 * default), so past FENCED_BLOCKS blocks, or when the region is full, blocks
 * come from glibc's heap, unfenced, as do the small ones.
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

/* The most address space the region asks for, and the least: under an
 * address-space limit (RLIMIT_AS) it asks for less and less. */
#define REGION_MAX ((size_t)1 << 40)
#define REGION_MIN ((size_t)1 << 26)
#define FENCED_BLOCKS 20000
/* Smaller blocks (names, containers) come from glibc: fencing all of them
 * made a validation of a 57 KB CNN 24 ms instead of 4, and the overruns the
 * fuzz found were into tensors' blocks. */
#define FENCED_MIN_BYTES 256
#define MIN_ALIGN 16

typedef struct Header {
    size_t size;
    char *base; /* the block's writable pages */
    size_t len;
    size_t pad;
} Header;

static char *_Atomic region;
static size_t region_bytes; /* written before region is published */
static atomic_size_t region_used;
static atomic_long fenced_count;
static size_t page_size;

static size_t roundUp(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

static char *theRegion(void) {
    char *r = atomic_load(&region);
    if (r) return r;
    /* A quarter of what could be had: LiteRT's own mappings need the rest. */
    for (size_t want = REGION_MAX; want >= REGION_MIN; want /= 2) {
        char *fresh = mmap(NULL, want * 4, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
        if (fresh == MAP_FAILED) continue;
        munmap(fresh + want, want * 3);
        region_bytes = want;
        char *none = NULL;
        if (!atomic_compare_exchange_strong(&region, &none, fresh)) {
            munmap(fresh, want);
            return none;
        }
        return fresh;
    }
    return NULL;
}

static int isFenced(const void *p) {
    char *r = atomic_load(&region);
    return r && (const char *)p >= r && (const char *)p < r + region_bytes;
}

/* The block's end touches the guard page (up to align - 1 bytes short). */
static void *fencedAlloc(size_t size, size_t align) {
    if (size < FENCED_MIN_BYTES || atomic_fetch_add(&fenced_count, 1) >= FENCED_BLOCKS) return NULL;
    if (align < MIN_ALIGN) align = MIN_ALIGN;
    if (page_size == 0) page_size = (size_t)sysconf(_SC_PAGESIZE);
    char *r = theRegion();
    if (r == NULL || size > region_bytes / 4) return NULL;
    size_t body = roundUp(size, align);
    size_t head = roundUp(sizeof(Header), align);
    size_t len = roundUp(body + head + (align > page_size ? align : 0), page_size);
    size_t off = atomic_fetch_add(&region_used, len + page_size);
    if (off + len + page_size > region_bytes) return NULL;
    char *base = r + off;
    if (mprotect(base, len, PROT_READ | PROT_WRITE) != 0) return NULL;
    char *p = base + len - body;
    p -= (uintptr_t)p % align;
    Header *h = (Header *)(p - sizeof(Header));
    *h = (Header){.size = size, .base = base, .len = len};
    return p;
}

void *malloc(size_t size) {
    void *p = fencedAlloc(size, MIN_ALIGN);
    return p ? p : __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = fencedAlloc(total, MIN_ALIGN); /* fresh pages are zero */
    return p ? p : __libc_calloc(n, size);
}

void free(void *p) {
    if (p == NULL) return;
    if (!isFenced(p)) {
        __libc_free(p);
        return;
    }
    Header *h = (Header *)((char *)p - sizeof(Header));
    /* Fresh inaccessible pages in place: the memory goes back, the address
     * stays reserved and faults if touched again. */
    mmap(h->base, h->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

void *realloc(void *p, size_t size) {
    if (p == NULL) return malloc(size);
    if (!isFenced(p)) return __libc_realloc(p, size);
    size_t old = ((Header *)((char *)p - sizeof(Header)))->size;
    void *q = malloc(size);
    if (q == NULL) return NULL;
    memcpy(q, p, old < size ? old : size);
    free(p);
    return q;
}

void *memalign(size_t align, size_t size) {
    void *p = fencedAlloc(size, align);
    return p ? p : __libc_memalign(align, size);
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
