/*
 * backend_manifest.c - see backend_manifest.h.
 */
#define _GNU_SOURCE /* pread, O_CLOEXEC, realpath under a strict -std */
#include "loader/backend_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sha256.h"
#include "redismodule.h"

/* A manifest lists a few files; anything larger is not ours. */
#define MAX_MANIFEST_BYTES (1u << 20)

typedef struct Entry {
    const char *sha; /* 64 hex digits */
    unsigned long long size;
    const char *path;
} Entry;

/* Whole file into a NUL-terminated buffer. NULL with errno ENOENT when
 * there is none; NULL with err set on other failures. */
static char *readManifest(const char *path, const char *shown, RAI_Error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno != ENOENT) {
            Error_SetFmt(err, "%s: manifest %s: cannot open: %s", shown, path, strerror(errno));
        }
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_MANIFEST_BYTES) {
        Error_SetFmt(err, "%s: manifest %s is not a regular file under %u bytes", shown, path,
                     MAX_MANIFEST_BYTES);
        goto done;
    }
    buf = RedisModule_Alloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    if (got != (size_t)st.st_size || strlen(buf) != got) {
        Error_SetFmt(err, "%s: manifest %s: cannot read it whole, or it holds a NUL byte", shown,
                     path);
        RedisModule_Free(buf);
        buf = NULL;
    }
done:
    close(fd);
    return buf;
}

static int isHex64(const char *s) {
    for (int i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    }
    return s[64] == '\0';
}

/* A path that stays inside the folder. */
static int safePath(const char *p) {
    if (p[0] == '\0' || p[0] == '/') return 0;
    for (const char *c = p; *c;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 0 || (n == 2 && c[0] == '.' && c[1] == '.')) return 0;
        c += n + (end ? 1 : 0);
    }
    return 1;
}

/* Parses "file <sha> <size> <path>" in place. */
static int parseFile(char *rest, Entry *e) {
    char *sp1 = strchr(rest, ' ');
    if (!sp1) return 0;
    *sp1 = '\0';
    char *sp2 = strchr(sp1 + 1, ' ');
    if (!sp2) return 0;
    *sp2 = '\0';
    char *end;
    errno = 0;
    e->size = strtoull(sp1 + 1, &end, 10);
    if (errno || *end != '\0' || end == sp1 + 1 || sp1[1] == '-') return 0;
    e->sha = rest;
    e->path = sp2 + 1;
    return isHex64(e->sha) && safePath(e->path);
}

/* SHA-256 and size of the backend itself, streamed. */
static int checkLibrary(const char *real_so, const char *shown, const Entry *e, RAI_Error *err) {
    int fd = open(real_so, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        Error_SetFmt(err, "%s: cannot open: %s", shown, strerror(errno));
        return 0;
    }
    int ok = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        Error_SetFmt(err, "%s: cannot stat: %s", shown, strerror(errno));
        goto done;
    }
    if ((unsigned long long)st.st_size != e->size) {
        Error_SetFmt(err, "%s: size %lld bytes, its manifest says %llu", shown,
                     (long long)st.st_size, e->size);
        goto done;
    }
    Sha256 h;
    Sha256_Init(&h);
    enum { CHUNK = 1 << 16 };
    unsigned char *buf = RedisModule_Alloc(CHUNK);
    ssize_t n;
    while ((n = read(fd, buf, CHUNK)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        Sha256_Update(&h, buf, (size_t)n);
    }
    RedisModule_Free(buf);
    if (n < 0) {
        Error_SetFmt(err, "%s: read failed: %s", shown, strerror(errno));
        goto done;
    }
    uint8_t digest[SHA256_DIGEST_LEN];
    char hex[2 * SHA256_DIGEST_LEN + 1];
    Sha256_Final(&h, digest);
    Sha256_Hex(digest, hex);
    if (strcmp(hex, e->sha) != 0) {
        Error_SetFmt(err, "%s: SHA-256 %s does not match its manifest's %s", shown, hex, e->sha);
        goto done;
    }
    ok = 1;
done:
    close(fd);
    return ok;
}

int BackendManifest_Verify(const char *real_so, const char *shown, int *checked, RAI_Error *err) {
    *checked = 0;
    const char *slash = strrchr(real_so, '/');
    if (slash == NULL) return 1; /* realpath() always gives a folder */
    size_t dirlen = (size_t)(slash - real_so);
    const char *base = slash + 1;
    char path[4096 + 256];
    snprintf(path, sizeof(path), "%.*s/%s", (int)dirlen, real_so, RAI_MANIFEST_NAME);
    char *text = readManifest(path, shown, err);
    if (text == NULL) return !Error_IsSet(err);
    *checked = 1;

    int ok = 0, lineno = 0;
    Entry self = {0};
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (line[0] == '#') continue;
        if (!strncmp(line, "file ", 5)) {
            Entry e;
            if (!parseFile(line + 5, &e)) {
                Error_SetFmt(err, "%s: manifest %s: malformed file line %d", shown, path, lineno);
                goto done;
            }
            if (!strcmp(e.path, base)) {
                self = e;
                continue;
            }
            char listed[4096 + 512];
            snprintf(listed, sizeof(listed), "%.*s/%s", (int)dirlen, real_so, e.path);
            struct stat st;
            if (stat(listed, &st) != 0) {
                Error_SetFmt(err, "%s: %s: listed in %s but missing: %s", shown, listed, path,
                             strerror(errno));
                goto done;
            }
            if (!S_ISREG(st.st_mode) || (unsigned long long)st.st_size != e.size) {
                Error_SetFmt(err, "%s: %s: size %lld bytes, its manifest %s says %llu", shown,
                             listed, S_ISREG(st.st_mode) ? (long long)st.st_size : -1LL, path,
                             e.size);
                goto done;
            }
        }
    }
    if (self.path == NULL) {
        Error_SetFmt(err, "%s: not listed in its folder's manifest %s", shown, path);
        goto done;
    }
    ok = checkLibrary(real_so, shown, &self, err);
done:
    RedisModule_Free(text);
    return ok;
}

static void copyFact(char *dst, size_t cap, const char *value) {
    snprintf(dst, cap, "%s", value);
}

int BackendManifest_ReadFacts(const char *folder, RAI_ManifestFacts *facts, RAI_Error *err) {
    *facts = (RAI_ManifestFacts){0};
    char path[4096 + 256];
    snprintf(path, sizeof(path), "%s/%s", folder, RAI_MANIFEST_NAME);
    char *text = readManifest(path, folder, err);
    if (text == NULL) return Error_IsSet(err) ? -1 : 0;
    int format = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *value = strchr(line, ' ');
        if (line[0] == '#' || value == NULL) continue;
        *value++ = '\0';
        if (!strcmp(line, "format")) {
            format = !strcmp(value, "1");
        } else if (!strcmp(line, "framework")) {
            copyFact(facts->framework, sizeof(facts->framework), value);
        } else if (!strcmp(line, "version")) {
            copyFact(facts->version, sizeof(facts->version), value);
        } else if (!strcmp(line, "variant")) {
            copyFact(facts->variant, sizeof(facts->variant), value);
        } else if (!strcmp(line, "kind")) {
            copyFact(facts->kind, sizeof(facts->kind), value);
        } else if (!strcmp(line, "abi")) {
            copyFact(facts->abi, sizeof(facts->abi), value);
        }
    }
    RedisModule_Free(text);
    if (!format) {
        *facts = (RAI_ManifestFacts){0};
        Error_SetFmt(err, "%s: manifest %s is not a format 1 manifest", folder, path);
        return -1;
    }
    return 1;
}
