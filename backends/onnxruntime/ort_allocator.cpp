/*
 * ort_allocator.cpp - see ort_allocator.h.
 *
 * C++ for one reason: ORT does not check what an allocator returns, so a
 * refusal must be an exception, which ORT catches at the kernel or session
 * boundary and turns into the status the user sees. Returning NULL would
 * let a kernel write through it.
 */
#include "onnxruntime/ort_allocator.h"

#include <atomic>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "onnxruntime/ort_env.h"

namespace {

/* ORT's CPU kernels expect the alignment of its own allocator. */
constexpr size_t kAlign = 64;

/* In front of every block: what Free needs. */
struct Header {
    void *raw;
    size_t size;
};

struct CountingAllocator {
    OrtAllocator base; /* first: ORT passes &base back */
    const OrtMemoryInfo *info;
    std::atomic<size_t> bytes{0};
    std::atomic<size_t> accesses{0};
};

CountingAllocator counting;

/* Read at every allocation: module arguments may set the limit after the
 * backend is loaded (`ONNX <path> BACKEND_MEMORY_LIMIT 32`). */
size_t limit_bytes() {
    long long mb = ort.host->config_get(RAI_CONFIG_BACKEND_MEMORY_LIMIT);
    return mb > 0 ? (size_t)mb * 1024 * 1024 : 0;
}

/* What one allocation of size bytes counts: the bytes asked for plus the
 * kAlign more taken from the host to align the block and keep its header
 * (1.2 counted its padded blocks too). 0 when that overflows. */
size_t footprint(size_t size) {
    return size <= SIZE_MAX - kAlign ? size + kAlign : 0;
}

/* Adds one allocation of size bytes to the count unless that passes the
 * limit. As in 1.2, a refused allocation is no access: the counter moves
 * only with memory. */
bool count(CountingAllocator *a, size_t size) {
    size_t bytes = footprint(size);
    if (!bytes) {
        return false; /* no such block can exist, limit or not */
    }
    size_t before = a->bytes.fetch_add(bytes, std::memory_order_relaxed);
    size_t limit = limit_bytes();
    if (limit && (before + bytes > limit || before + bytes < before)) {
        a->bytes.fetch_sub(bytes, std::memory_order_relaxed);
        return false;
    }
    a->accesses.fetch_add(1, std::memory_order_relaxed);
    return true;
}

/* Takes back one allocation of size bytes: a free is an access too. */
void uncount(CountingAllocator *a, size_t size) {
    a->accesses.fetch_add(1, std::memory_order_relaxed);
    a->bytes.fetch_sub(footprint(size), std::memory_order_relaxed);
}

void *allocate(OrtAllocator *self, size_t size) {
    auto *a = reinterpret_cast<CountingAllocator *>(self);
    if (!footprint(size)) {
        throw std::bad_alloc();
    }
    if (!count(a, size)) {
        throw std::runtime_error(ORT_MEMORY_LIMIT_TEXT);
    }
    /* Room for the header and the worst alignment gap: host memory is at
     * least 16-aligned, so the block starts within kAlign of raw + header. */
    void *raw = ort.host->alloc(footprint(size));
    if (!raw) {
        a->bytes.fetch_sub(footprint(size), std::memory_order_relaxed);
        a->accesses.fetch_sub(1, std::memory_order_relaxed);
        throw std::bad_alloc();
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(raw) + sizeof(Header);
    uintptr_t block = (start + kAlign - 1) & ~(uintptr_t)(kAlign - 1);
    auto *h = reinterpret_cast<Header *>(block) - 1;
    h->raw = raw;
    h->size = size;
    return reinterpret_cast<void *>(block);
}

void release(OrtAllocator *self, void *p) {
    if (!p) {
        return;
    }
    auto *a = reinterpret_cast<CountingAllocator *>(self);
    auto *h = reinterpret_cast<Header *>(p) - 1;
    uncount(a, h->size);
    ort.host->free(h->raw);
}

const OrtMemoryInfo *describe(const OrtAllocator *self) {
    return reinterpret_cast<const CountingAllocator *>(self)->info;
}

} // namespace

extern "C" OrtStatus *ort_allocator_register(OrtEnv *env, const OrtMemoryInfo *cpu) {
    counting.base.version = ORT_API_VERSION;
    counting.base.Alloc = allocate;
    counting.base.Free = release;
    counting.base.Info = describe;
    /* Reserve (arena-style up-front blocks) gets the same count and limit. */
    counting.base.Reserve = allocate;
    counting.info = cpu;
    return ort.api->RegisterAllocator(env, &counting.base);
}

extern "C" int ort_allocator_charge(size_t size) {
    return count(&counting, size) ? 1 : 0;
}

extern "C" void ort_allocator_discharge(size_t size) {
    uncount(&counting, size);
}

extern "C" OrtAllocator *ort_allocator_get(void) {
    return &counting.base;
}

extern "C" size_t ort_allocator_bytes(void) {
    return counting.bytes.load(std::memory_order_relaxed);
}

extern "C" size_t ort_allocator_accesses(void) {
    return counting.accesses.load(std::memory_order_relaxed);
}
