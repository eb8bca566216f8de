/*
 * test_tensor.c - module/core/tensor.c: dtypes, shapes, element counts and
 * byte sizes, the four ways a tensor holds its data, STRING offsets,
 * reference counts, and rows sliced and concatenated. Allocations go
 * through the shim, which counts them: every test ends with none live.
 */
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "unit.h"
#include "unit_shim.h"

static const RAI_DType FLOAT = {RAI_DTYPE_FLOAT, 32};
static const RAI_DType INT32 = {RAI_DTYPE_INT, 32};
static const RAI_DType STRING = {RAI_DTYPE_STRING, 8};

#define NDIMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int sameDType(RAI_DType a, RAI_DType b) {
    return a.code == b.code && a.bits == b.bits;
}

/* ---------------------------------- dtypes -------------------------------- */

static void testDTypes(void) {
    static const struct {
        const char *name;
        RAI_DType dt;
        size_t size;
    } named[] = {
        {"FLOAT", {RAI_DTYPE_FLOAT, 32}, 4}, {"DOUBLE", {RAI_DTYPE_FLOAT, 64}, 8},
        {"INT8", {RAI_DTYPE_INT, 8}, 1},     {"INT16", {RAI_DTYPE_INT, 16}, 2},
        {"INT32", {RAI_DTYPE_INT, 32}, 4},   {"INT64", {RAI_DTYPE_INT, 64}, 8},
        {"UINT8", {RAI_DTYPE_UINT, 8}, 1},   {"UINT16", {RAI_DTYPE_UINT, 16}, 2},
        {"BOOL", {RAI_DTYPE_BOOL, 8}, 1},    {"STRING", {RAI_DTYPE_STRING, 8}, 0},
    };
    for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
        RAI_DType dt = {0, 0};
        CHECK(DType_Parse(named[k].name, strlen(named[k].name), &dt));
        CHECK(sameDType(dt, named[k].dt));
        CHECK_STR(DType_Name(named[k].dt), named[k].name);
        CHECK_INT(DType_ElemSize(named[k].dt), named[k].size);
        CHECK(DType_IsStorable(named[k].dt));
        CHECK_INT(DType_IsString(named[k].dt), named[k].dt.code == RAI_DTYPE_STRING);
    }
    /* Any case; the length given, not the NUL, ends the token. */
    RAI_DType dt;
    CHECK(DType_Parse("float", 5, &dt) && sameDType(dt, FLOAT));
    CHECK(DType_Parse("uInT8", 5, &dt) && dt.code == RAI_DTYPE_UINT && dt.bits == 8);
    CHECK(DType_Parse("INT32 and more", 5, &dt) && sameDType(dt, INT32));
    static const char *unknown[] = {"FLOAT32", "FLOA", "INT", "INT128", "UINT32", "UINT64",
                                    "FLOAT16", "BFLOAT16", "", "STRINGS", " FLOAT"};
    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++) {
        if (!CHECK(!DType_Parse(unknown[k], strlen(unknown[k]), &dt))) {
            fprintf(stderr, "    \"%s\"\n", unknown[k]);
        }
    }
    /* Fixed-width types a backend makes are storable without a name. */
    CHECK(DType_Name((RAI_DType){RAI_DTYPE_FLOAT, 16}) == NULL);
    CHECK(DType_IsStorable((RAI_DType){RAI_DTYPE_FLOAT, 16}));
    CHECK(DType_IsStorable((RAI_DType){RAI_DTYPE_BFLOAT, 16}));
    CHECK(DType_IsStorable((RAI_DType){RAI_DTYPE_UINT, 64}));
    CHECK(!DType_IsStorable((RAI_DType){RAI_DTYPE_BOOL, 16}));
    CHECK(!DType_IsStorable((RAI_DType){RAI_DTYPE_INT, 24}));
    CHECK(!DType_IsStorable((RAI_DType){RAI_DTYPE_INT, 128}));
    CHECK(!DType_IsStorable((RAI_DType){3, 32})); /* no such code */
    CHECK(!DType_IsStorable((RAI_DType){RAI_DTYPE_STRING, 16}));
    CHECK_INT(DType_ElemSize((RAI_DType){RAI_DTYPE_FLOAT, 16}), 2);
}

static void testInternalNames(void) {
    char buf[DTYPE_INTERNAL_NAME_MAX];
    RAI_DType f16 = {RAI_DTYPE_FLOAT, 16}, dt = {0, 0};
    DType_InternalName(f16, buf);
    CHECK_STR(buf, "_DTYPE2_16");
    CHECK(DType_ParseInternal(buf, strlen(buf), &dt) && sameDType(dt, f16));
    /* Named ones round-trip too. */
    DType_InternalName(INT32, buf);
    CHECK(DType_ParseInternal(buf, strlen(buf), &dt) && sameDType(dt, INT32));
    /* Not STRING, nothing unstorable, nothing trailing, nothing long. */
    static const char *bad[] = {"_DTYPE7_8", "_DTYPE6_16", "_DTYPE2_24", "_DTYPE2_16x",
                                "_DTYPE2_", "_DTYPE_16", "_dtype2_16", "DTYPE2_16",
                                "_DTYPE258_16", "_DTYPE2_272", "_DTYPE2_16_________________________"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        if (!CHECK(!DType_ParseInternal(bad[k], strlen(bad[k]), &dt))) {
            fprintf(stderr, "    \"%s\"\n", bad[k]);
        }
    }
    /* The length given ends the token. */
    CHECK(DType_ParseInternal("_DTYPE2_16 tail", 10, &dt) && sameDType(dt, f16));
}

/* --------------------------------- shapes --------------------------------- */

static void testShapes(void) {
    static const int64_t d234[] = {2, 3, 4}, d05[] = {0, 5}, d1[] = {1}, dbig[] = {1 << 20, 1 << 20};
    CHECK_INT(Tensor_ShapeLength(d234, 3), 24);
    CHECK_INT(Tensor_ShapeLength(d234, 1), 2);
    CHECK_INT(Tensor_ShapeLength(d05, 2), 0);
    CHECK_INT(Tensor_ShapeLength(d1, 1), 1);
    CHECK_INT(Tensor_ShapeLength(NULL, 0), 1); /* a 0-d tensor holds one element */
    CHECK_INT(Tensor_ShapeLength(dbig, 2), 1ll << 40);

    /* Dims from outside (an isolated backend's host): a negative dim or a
     * product past SIZE_MAX is refused, where the plain length would wrap. */
    static const int64_t dover[] = {1ll << 62, 4}, dneg[] = {2, -3};
    static const int64_t dmax[] = {1ll << 31, 1ll << 31};
    size_t n = 7;
    CHECK(Tensor_CheckedLength(d234, 3, &n) && n == 24);
    CHECK(Tensor_CheckedLength(d05, 2, &n) && n == 0);
    CHECK(Tensor_CheckedLength(NULL, 0, &n) && n == 1);
    CHECK(Tensor_CheckedLength(dmax, 2, &n) && n == (size_t)1 << 62);
    n = 7;
    CHECK(!Tensor_CheckedLength(dover, 2, &n) && n == 7);
    CHECK(!Tensor_CheckedLength(dneg, 2, &n) && n == 7);
    CHECK_INT(Tensor_ShapeLength(dover, 2), 0); /* why the checked form exists: it wraps */

    /* Length and bytes for each element size; dims are copied. */
    int64_t dims[] = {2, 3};
    static const RAI_DType types[] = {{RAI_DTYPE_INT, 8}, {RAI_DTYPE_INT, 16}, {RAI_DTYPE_FLOAT, 32},
                                      {RAI_DTYPE_FLOAT, 64}, {RAI_DTYPE_BOOL, 8}};
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        RAI_Tensor *t = Tensor_New(types[k], dims, 2, 0);
        CHECK_INT(t->ndims, 2);
        CHECK(t->dims != dims && t->dims[0] == 2 && t->dims[1] == 3);
        CHECK_INT(t->len, 6);
        CHECK_INT(t->nbytes, 6 * (types[k].bits / 8));
        CHECK(sameDType(t->dtype, types[k]));
        CHECK_INT(t->refcount, 1);
        CHECK(t->offsets == NULL && t->held == NULL && t->deleter == NULL);
        dims[0] = 9;
        CHECK_INT(t->dims[0], 2);
        dims[0] = 2;
        Tensor_Release(t);
    }
    /* zero != 0 fills with zeros. */
    int64_t d100[] = {10, 10};
    RAI_Tensor *t = Tensor_New((RAI_DType){RAI_DTYPE_FLOAT, 64}, d100, 2, 1);
    int zeros = 1;
    for (size_t i = 0; i < t->nbytes; i++) zeros &= t->data[i] == 0;
    CHECK(zeros);
    CHECK_INT(t->nbytes, 800);
    Tensor_Release(t);
    /* 0-d: one element. */
    t = Tensor_New(INT32, NULL, 0, 1);
    CHECK_INT(t->ndims, 0);
    CHECK_INT(t->len, 1);
    CHECK_INT(t->nbytes, 4);
    Tensor_Release(t);
    /* A zero dim: no elements, no bytes, still data to point at. */
    int64_t empty[] = {3, 0, 2};
    t = Tensor_New(FLOAT, empty, 3, 0);
    CHECK_INT(t->len, 0);
    CHECK_INT(t->nbytes, 0);
    CHECK(t->data != NULL);
    Tensor_Release(t);
    CHECK_INT(UnitShim_Live(), 0);
}

/* --------------------------------- strings -------------------------------- */

static void testStrings(void) {
    int64_t dims[] = {2, 2};
    const char *elems[] = {"a", "", "xyz", "hello"};
    const size_t lens[] = {1, 0, 3, 5};
    RAI_Tensor *t = Tensor_NewStrings(dims, 2, elems, lens);
    CHECK(DType_IsString(t->dtype));
    CHECK_INT(t->len, 4);
    /* Each element and its NUL, back to back. */
    CHECK_INT(t->nbytes, 2 + 1 + 4 + 6);
    CHECK(!memcmp(t->data, "a\0\0xyz\0hello\0", 13));
    CHECK_INT(t->offsets[0], 0);
    CHECK_INT(t->offsets[1], 2);
    CHECK_INT(t->offsets[2], 3);
    CHECK_INT(t->offsets[3], 7);
    size_t len = 99;
    CHECK_STR(Tensor_StringAt(t, 2, &len), "xyz");
    CHECK_INT(len, 3);
    CHECK_STR(Tensor_StringAt(t, 1, &len), "");
    CHECK_INT(len, 0);
    CHECK_STR(Tensor_StringAt(t, 3, NULL), "hello");
    Tensor_Release(t);

    t = Tensor_NewEmptyStrings(dims, 2);
    CHECK_INT(t->len, 4);
    CHECK_INT(t->nbytes, 4);
    for (size_t i = 0; i < 4; i++) {
        CHECK_INT(t->offsets[i], i);
        CHECK_STR(Tensor_StringAt(t, i, NULL), "");
    }
    Tensor_Release(t);

    /* Offsets from a blob: it must end in NUL and hold exactly n. */
    uint64_t *off = NULL;
    CHECK(Tensor_StringOffsets("ab\0\0c\0", 6, 3, &off));
    if (off) {
        CHECK_INT(off[0], 0);
        CHECK_INT(off[1], 3);
        CHECK_INT(off[2], 4);
        RedisModule_Free(off);
    }
    off = NULL;
    CHECK(!Tensor_StringOffsets("ab\0\0c\0", 6, 2, &off));
    CHECK(!Tensor_StringOffsets("ab\0\0c\0", 6, 4, &off));
    CHECK(!Tensor_StringOffsets("ab\0\0c", 5, 2, &off));
    CHECK(!Tensor_StringOffsets("", 0, 0, &off));
    CHECK(off == NULL);
    /* The offsets make a tensor with an owned blob. */
    char *blob = RedisModule_Alloc(6);
    memcpy(blob, "ab\0\0c\0", 6);
    CHECK(Tensor_StringOffsets(blob, 6, 3, &off));
    int64_t three[] = {3};
    t = Tensor_NewOwned(STRING, three, 1, blob, 6, off);
    CHECK_STR(Tensor_StringAt(t, 2, &len), "c");
    Tensor_Release(t);
    CHECK_INT(UnitShim_Live(), 0);
}

/* ------------------------------- ownership -------------------------------- */

static int deleted;
static void deleter(void *ctx) {
    deleted++;
    free(ctx);
}

static void testOwnership(void) {
    int64_t dims[] = {2, 2};
    /* Retain and release: freed with the last reference. */
    RAI_Tensor *t = Tensor_New(INT32, dims, 2, 1);
    CHECK(Tensor_Retain(t) == t);
    CHECK_INT(t->refcount, 2);
    Tensor_Release(t);
    CHECK_INT(t->refcount, 1);
    Tensor_Release(t);
    Tensor_Release(NULL);
    CHECK_INT(UnitShim_Live(), 0);

    /* Adopted: the deleter runs once, with the last reference. */
    void *mem = malloc(16);
    memset(mem, 7, 16);
    deleted = 0;
    t = Tensor_NewAdopted(INT32, dims, 2, mem, 16, deleter, mem);
    CHECK(t->data == mem);
    CHECK_INT(t->len, 4);
    CHECK_INT(t->nbytes, 16);
    CHECK_INT(Tensor_ForeignBytes(t), 16);
    /* What enters the keyspace is a copy in Redis's memory. */
    RAI_Tensor *kept = Tensor_ForKeyspace(t);
    CHECK(kept != t && kept->data != t->data && kept->deleter == NULL);
    CHECK(!memcmp(kept->data, mem, 16));
    CHECK_INT(kept->nbytes, 16);
    CHECK_INT(kept->len, 4);
    CHECK_INT(Tensor_ForeignBytes(kept), 0);
    Tensor_Retain(t);
    Tensor_Release(t);
    CHECK_INT(deleted, 0);
    Tensor_Release(t);
    CHECK_INT(deleted, 1);
    Tensor_Release(kept);
    /* Our own memory enters as it is, one more reference. */
    t = Tensor_New(INT32, dims, 2, 1);
    kept = Tensor_ForKeyspace(t);
    CHECK(kept == t);
    CHECK_INT(t->refcount, 2);
    CHECK_INT(Tensor_ForeignBytes(t), 0);
    Tensor_Release(kept);
    Tensor_Release(t);
    /* STRING cannot be adopted: NULL, the memory stays the caller's. */
    deleted = 0;
    mem = malloc(4);
    CHECK(Tensor_NewAdopted(STRING, dims, 2, mem, 4, deleter, mem) == NULL);
    CHECK_INT(deleted, 0);
    free(mem);
    CHECK_INT(UnitShim_Live(), 0);

    /* Held: the data is the string's bytes, the string kept until the
     * tensor goes. */
    RedisModuleString *s = UnitShim_String("\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0", 16);
    t = Tensor_NewHeld(INT32, dims, 2, s, NULL);
    CHECK_INT(s->refs, 2);
    CHECK(t->data == s->ptr);
    CHECK_INT(t->nbytes, 16);
    CHECK_INT(t->len, 4);
    kept = Tensor_ForKeyspace(t);
    CHECK(kept == t);
    Tensor_Release(kept);
    Tensor_Release(t);
    CHECK_INT(s->refs, 1);
    RedisModule_FreeString(NULL, s);
    CHECK_INT(UnitShim_Live(), 0);
}

/* ---------------------------------- rows ---------------------------------- */

static RAI_Tensor *ints(const int64_t *dims, int ndims, int first) {
    RAI_Tensor *t = Tensor_New(INT32, dims, ndims, 0);
    for (size_t i = 0; i < t->len; i++) ((int32_t *)t->data)[i] = first + (int32_t)i;
    return t;
}

static int isRange(const RAI_Tensor *t, int first) {
    for (size_t i = 0; i < t->len; i++) {
        if (((int32_t *)t->data)[i] != first + (int32_t)i) return 0;
    }
    return 1;
}

static void testSlice(void) {
    int64_t dims[] = {4, 3};
    RAI_Tensor *t = ints(dims, 2, 0);
    RAI_Tensor *s = Tensor_SliceRows(t, 1, 2);
    if (CHECK(s != NULL)) {
        CHECK_INT(s->ndims, 2);
        CHECK_INT(s->dims[0], 2);
        CHECK_INT(s->dims[1], 3);
        CHECK_INT(s->len, 6);
        CHECK_INT(s->nbytes, 24);
        CHECK(isRange(s, 3));
        CHECK(s->data != t->data + 12); /* a copy */
        Tensor_Release(s);
    }
    /* Whole, empty at either end. */
    s = Tensor_SliceRows(t, 0, 4);
    CHECK(s && s->len == 12 && isRange(s, 0));
    Tensor_Release(s);
    s = Tensor_SliceRows(t, 4, 0);
    CHECK(s && s->dims[0] == 0 && s->len == 0 && s->nbytes == 0);
    Tensor_Release(s);
    s = Tensor_SliceRows(t, 0, 0);
    CHECK(s && s->len == 0 && s->nbytes == 0);
    Tensor_Release(s);
    /* Out of range, negative, past the end, wrapping. */
    CHECK(Tensor_SliceRows(t, 5, 0) == NULL);
    CHECK(Tensor_SliceRows(t, 3, 2) == NULL);
    CHECK(Tensor_SliceRows(t, -1, 1) == NULL);
    CHECK(Tensor_SliceRows(t, 1, -1) == NULL);
    CHECK(Tensor_SliceRows(t, 1, 0x7fffffffffffffffll) == NULL);
    CHECK(Tensor_SliceRows(t, 0x7fffffffffffffffll, 1) == NULL);
    CHECK(Tensor_SliceRows(NULL, 0, 1) == NULL);
    Tensor_Release(t);
    /* A 0-d tensor has no rows. */
    t = Tensor_New(INT32, NULL, 0, 1);
    CHECK(Tensor_SliceRows(t, 0, 0) == NULL);
    Tensor_Release(t);

    /* STRING rows: the offsets start again at 0. */
    int64_t sd[] = {3, 2};
    const char *elems[] = {"a", "bb", "", "ccc", "dddd", "e"};
    const size_t lens[] = {1, 2, 0, 3, 4, 1};
    t = Tensor_NewStrings(sd, 2, elems, lens);
    s = Tensor_SliceRows(t, 1, 2);
    if (CHECK(s != NULL)) {
        CHECK_INT(s->len, 4);
        CHECK_INT(s->nbytes, 1 + 4 + 5 + 2);
        CHECK_INT(s->offsets[0], 0);
        CHECK_STR(Tensor_StringAt(s, 0, NULL), "");
        CHECK_STR(Tensor_StringAt(s, 1, NULL), "ccc");
        CHECK_STR(Tensor_StringAt(s, 2, NULL), "dddd");
        CHECK_STR(Tensor_StringAt(s, 3, NULL), "e");
        Tensor_Release(s);
    }
    s = Tensor_SliceRows(t, 3, 0);
    CHECK(s && s->len == 0 && s->nbytes == 0);
    Tensor_Release(s);
    Tensor_Release(t);
    CHECK_INT(UnitShim_Live(), 0);
}

static void testConcat(void) {
    int64_t d1[] = {1, 3}, d2[] = {2, 3}, d4[] = {2, 4}, d0[] = {0, 3};
    RAI_Tensor *a = ints(d1, 2, 0), *b = ints(d2, 2, 3), *z = ints(d0, 2, 0);
    RAI_Tensor *ts[] = {a, z, b};
    RAI_Tensor *c = Tensor_ConcatRows(ts, 3);
    if (CHECK(c != NULL)) {
        CHECK_INT(c->ndims, 2);
        CHECK_INT(c->dims[0], 3);
        CHECK_INT(c->dims[1], 3);
        CHECK_INT(c->len, 9);
        CHECK_INT(c->nbytes, 36);
        CHECK(isRange(c, 0));
        CHECK_INT(c->refcount, 1);
        Tensor_Release(c);
    }
    /* One tensor: a copy. */
    c = Tensor_ConcatRows(ts, 1);
    CHECK(c && c != a && c->len == 3 && isRange(c, 0));
    Tensor_Release(c);
    /* What does not fit together. */
    RAI_Tensor *wide = ints(d4, 2, 0);
    RAI_Tensor *other[] = {a, wide};
    CHECK(Tensor_ConcatRows(other, 2) == NULL);
    RAI_Tensor *f = Tensor_New(FLOAT, d1, 2, 1);
    RAI_Tensor *mixed[] = {a, f};
    CHECK(Tensor_ConcatRows(mixed, 2) == NULL);
    int64_t flat[] = {3};
    RAI_Tensor *v = ints(flat, 1, 0);
    RAI_Tensor *rank[] = {a, v};
    CHECK(Tensor_ConcatRows(rank, 2) == NULL);
    RAI_Tensor *withNull[] = {a, NULL};
    CHECK(Tensor_ConcatRows(withNull, 2) == NULL);
    CHECK(Tensor_ConcatRows(ts, 0) == NULL);
    CHECK(Tensor_ConcatRows(NULL, 1) == NULL);
    RAI_Tensor *scalar = Tensor_New(INT32, NULL, 0, 1);
    RAI_Tensor *scalars[] = {scalar, scalar};
    CHECK(Tensor_ConcatRows(scalars, 2) == NULL);
    Tensor_Release(scalar);
    Tensor_Release(v);
    Tensor_Release(f);
    Tensor_Release(wide);
    Tensor_Release(a);
    Tensor_Release(b);
    Tensor_Release(z);

    /* STRING: the offsets move with their elements. */
    int64_t s1[] = {1}, s2[] = {2};
    const char *e1[] = {"ab"}, *e2[] = {"", "cde"};
    const size_t l1[] = {2}, l2[] = {0, 3};
    RAI_Tensor *x = Tensor_NewStrings(s1, 1, e1, l1), *y = Tensor_NewStrings(s2, 1, e2, l2);
    RAI_Tensor *xy[] = {x, y};
    c = Tensor_ConcatRows(xy, 2);
    if (CHECK(c != NULL)) {
        CHECK_INT(c->len, 3);
        CHECK_INT(c->nbytes, 3 + 1 + 4);
        CHECK_STR(Tensor_StringAt(c, 0, NULL), "ab");
        CHECK_STR(Tensor_StringAt(c, 1, NULL), "");
        CHECK_STR(Tensor_StringAt(c, 2, NULL), "cde");
        CHECK_INT(c->offsets[2], 4);
        Tensor_Release(c);
    }
    Tensor_Release(x);
    Tensor_Release(y);
    CHECK_INT(UnitShim_Live(), 0);
}

int main(void) {
    UnitShim_Init();
    testDTypes();
    testInternalNames();
    testShapes();
    testStrings();
    testOwnership();
    testSlice();
    testConcat();
    return Unit_Done("tensor");
}
