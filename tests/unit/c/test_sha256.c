/*
 * test_sha256.c - module/core/sha256.c against the FIPS 180-2 examples
 * (appendix B: "abc", the 448-bit message, one million 'a'), the empty
 * message and the padding edges (55, 56, 63, 64 bytes ...), hashed whole,
 * split in two at every byte and fed a byte at a time: the result must not
 * depend on how the caller cuts its buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "unit.h"

static void hexOf(const void *data, size_t len, char hex[65]) {
    Sha256 s;
    uint8_t digest[SHA256_DIGEST_LEN];
    Sha256_Init(&s);
    Sha256_Update(&s, data, len);
    Sha256_Final(&s, digest);
    Sha256_Hex(digest, hex);
}

/* Two updates, cut at `at`; the first may be empty. */
static void hexSplit(const uint8_t *data, size_t len, size_t at, char hex[65]) {
    Sha256 s;
    uint8_t digest[SHA256_DIGEST_LEN];
    Sha256_Init(&s);
    Sha256_Update(&s, data, at);
    Sha256_Update(&s, data + at, len - at);
    Sha256_Final(&s, digest);
    Sha256_Hex(digest, hex);
}

static void testVectors(void) {
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrl"
         "mnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
        char hex[65];
        hexOf(v[k].msg, strlen(v[k].msg), hex);
        CHECK_STR(hex, v[k].hex);
    }
}

static void testMillionA(void) {
    enum { N = 1000000 };
    char *a = malloc(N);
    memset(a, 'a', N);
    char hex[65];
    hexOf(a, N, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Again in uneven pieces that straddle block boundaries. */
    Sha256 s;
    uint8_t digest[SHA256_DIGEST_LEN];
    Sha256_Init(&s);
    for (size_t off = 0, step = 1; off < N; off += step, step = step % 97 + 13) {
        Sha256_Update(&s, a + off, off + step > N ? N - off : step);
    }
    Sha256_Final(&s, digest);
    Sha256_Hex(digest, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* 'a' * n around the padding edges: 55 bytes leave room for the length in
 * the last block, 56 do not; 64 is a whole block. */
static void testPaddingEdges(void) {
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {57, "f13b2d724659eb3bf47f2dd6af1accc87b81f09f59f2b75e5c0bed6589dfe8c6"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"},
    };
    char a[128];
    memset(a, 'a', sizeof(a));
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
        char hex[65];
        hexOf(a, v[k].n, hex);
        CHECK_STR(hex, v[k].hex);
    }
}

/* 130 bytes 0x00..0x81 (two blocks and a bit), cut at every byte: each
 * boundary of both blocks is met with data waiting and without. */
static void testSplitEverywhere(void) {
    static const char want[] = "8d39b60b9c767c58975b270c1d6b13c9b4507e5aee7ad496a3528e4c7f880721";
    uint8_t msg[130];
    for (size_t i = 0; i < sizeof(msg); i++) msg[i] = (uint8_t)i;
    char hex[65];
    hexOf(msg, sizeof(msg), hex);
    CHECK_STR(hex, want);
    for (size_t at = 0; at <= sizeof(msg); at++) {
        hexSplit(msg, sizeof(msg), at, hex);
        if (!CHECK_STR(hex, want)) fprintf(stderr, "    cut at byte %zu\n", at);
    }

    /* The 448-bit message split at every byte too. */
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t at = 0; at <= sizeof(m448) - 1; at++) {
        hexSplit((const uint8_t *)m448, sizeof(m448) - 1, at, hex);
        if (!CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")) {
            fprintf(stderr, "    cut at byte %zu\n", at);
        }
    }

    /* One byte per update. */
    Sha256 s;
    uint8_t digest[SHA256_DIGEST_LEN];
    Sha256_Init(&s);
    for (size_t i = 0; i < sizeof(msg); i++) Sha256_Update(&s, msg + i, 1);
    Sha256_Final(&s, digest);
    Sha256_Hex(digest, hex);
    CHECK_STR(hex, want);
    CHECK_INT(s.total, sizeof(msg));
}

/* Init starts over: a state reused after Final hashes as a new one. */
static void testReuse(void) {
    Sha256 s;
    uint8_t digest[SHA256_DIGEST_LEN];
    char hex[65];
    Sha256_Init(&s);
    Sha256_Update(&s, "something else entirely", 23);
    Sha256_Final(&s, digest);
    Sha256_Init(&s);
    Sha256_Update(&s, "abc", 3);
    Sha256_Final(&s, digest);
    Sha256_Hex(digest, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void testHex(void) {
    uint8_t digest[SHA256_DIGEST_LEN];
    for (int i = 0; i < SHA256_DIGEST_LEN; i++) digest[i] = (uint8_t)(i * 8 + 7);
    char hex[65];
    memset(hex, 'x', sizeof(hex));
    Sha256_Hex(digest, hex);
    CHECK_STR(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
    CHECK_INT(hex[64], '\0');
}

int main(void) {
    testVectors();
    testMillionA();
    testPaddingEdges();
    testSplitEverywhere();
    testReuse();
    testHex();
    return Unit_Done("sha256");
}
