/*
 * sha256.h - SHA-256 (FIPS 180-4), for checking backend files against their
 * folder's manifest. Streaming: init, update any number of times, final.
 */
#ifndef REDISAI_SHA256_H
#define REDISAI_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32

typedef struct Sha256 {
    uint32_t state[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes waiting in block */
} Sha256;

void Sha256_Init(Sha256 *s);
void Sha256_Update(Sha256 *s, const void *data, size_t len);
void Sha256_Final(Sha256 *s, uint8_t out[SHA256_DIGEST_LEN]);
/* Lower-case hex of a digest into hex[65]. */
void Sha256_Hex(const uint8_t digest[SHA256_DIGEST_LEN], char hex[2 * SHA256_DIGEST_LEN + 1]);

#endif
