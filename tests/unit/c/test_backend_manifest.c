/*
 * test_backend_manifest.c - module/loader/backend_manifest.c on folders the
 * test lays out in a temporary directory: a good manifest, each way a
 * manifest or a listed file can be wrong, and the header facts.
 */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/backend_manifest.h"
#include "unit.h"
#include "unit_shim.h"

/* The backend the folder holds: 3 bytes, "abc", whose SHA-256 is FIPS
 * 180-2's first example (written out here, not computed by the unit). */
#define SO_NAME "redisai_unit.so"
#define SO_SHA "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define OTHER_SHA "0000000000000000000000000000000000000000000000000000000000000000"

static char root[1024];
static int folders;

/* A new empty folder under root. */
static void newFolder(char *dir, size_t cap) {
    snprintf(dir, cap, "%s/f%d", root, folders++);
    if (mkdir(dir, 0755) != 0) {
        perror(dir);
        exit(2);
    }
}

static void writeFile(const char *dir, const char *name, const char *data, size_t len) {
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static void writeText(const char *dir, const char *name, const char *text) {
    writeFile(dir, name, text, strlen(text));
}

/* A folder with the backend, lib/libfw.so.1 (5 bytes) and this manifest;
 * *so gets the backend's path. */
static void layOut(const char *manifest, char *dir, size_t cap, char *so, size_t socap) {
    newFolder(dir, cap);
    writeText(dir, SO_NAME, "abc");
    char lib[8192];
    snprintf(lib, sizeof(lib), "%s/lib", dir);
    mkdir(lib, 0755);
    writeText(dir, "lib/libfw.so.1", "12345");
    if (manifest) writeText(dir, RAI_MANIFEST_NAME, manifest);
    snprintf(so, socap, "%s/%s", dir, SO_NAME);
}

/* Verify on a folder laid out with manifest; returns its result, the
 * reason (if any) into why. */
static int verify(const char *manifest, int *checked, char *why, size_t cap) {
    char dir[4096], so[8192];
    layOut(manifest, dir, sizeof(dir), so, sizeof(so));
    RAI_Error err;
    Error_Init(&err);
    int ok = BackendManifest_Verify(so, "shown.so", checked, &err);
    snprintf(why, cap, "%s", Error_IsSet(&err) ? Error_Message(&err) : "");
    Error_Clear(&err);
    return ok;
}

#define HEAD "# a comment\nformat 1\n"
#define SELF "file " SO_SHA " 3 " SO_NAME "\n"
#define LIB "file " OTHER_SHA " 5 lib/libfw.so.1\n"

static void testGood(void) {
    char why[8192];
    int checked = -1;
    CHECK(verify(HEAD "framework fw\nversion 1.0\nkind ONNX\nabi 1.5\n"
                 "link libfw.so.1 lib/libfw.so\n" SELF LIB,
                 &checked, why, sizeof(why)));
    CHECK_STR(why, "");
    CHECK_INT(checked, 1);
    /* Keywords a later format may add, and the order of the lines, do not
     * matter; listed files other than the backend are checked by size
     * only (OTHER_SHA is not their hash). */
    CHECK(verify(LIB "some-later-keyword with values\n" HEAD SELF "x\n", &checked, why,
                 sizeof(why)));
    CHECK_STR(why, "");
    /* Without a manifest nothing is checked, and that is no error. */
    checked = -1;
    CHECK(verify(NULL, &checked, why, sizeof(why)));
    CHECK_STR(why, "");
    CHECK_INT(checked, 0);
    /* A path with no folder (realpath() always gives one). */
    RAI_Error err;
    Error_Init(&err);
    checked = -1;
    CHECK(BackendManifest_Verify("relative.so", "relative.so", &checked, &err));
    CHECK(!Error_IsSet(&err));
    CHECK_INT(checked, 0);
}

static void testFileWrong(void) {
    char why[8192];
    int checked;
    /* The backend. */
    CHECK(!verify(HEAD "file " SO_SHA " 4 " SO_NAME "\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "shown.so: size 3 bytes, its manifest says 4");
    CHECK_INT(checked, 1);
    CHECK(!verify(HEAD "file " OTHER_SHA " 3 " SO_NAME "\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "shown.so: SHA-256 " SO_SHA " does not match its manifest's " OTHER_SHA);
    CHECK(!verify(HEAD LIB, &checked, why, sizeof(why)));
    CHECK_HAS(why, "shown.so: not listed in its folder's manifest");
    CHECK(!verify(HEAD "file " SO_SHA " 3 other.so\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "listed in");
    /* Another listed file: missing, another size, not a file. */
    CHECK(!verify(HEAD SELF "file " OTHER_SHA " 5 lib/gone.so\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "/lib/gone.so: listed in ");
    CHECK_HAS(why, "but missing");
    CHECK(!verify(HEAD SELF "file " OTHER_SHA " 6 lib/libfw.so.1\n", &checked, why,
                  sizeof(why)));
    CHECK_HAS(why, "/lib/libfw.so.1: size 5 bytes, its manifest ");
    CHECK_HAS(why, " says 6");
    CHECK(!verify(HEAD SELF "file " OTHER_SHA " 5 lib\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "/lib: size -1 bytes");
    /* ".." inside a name is no parent folder: the file is looked for. */
    CHECK(!verify(HEAD SELF "file " OTHER_SHA " 5 lib..so\n", &checked, why, sizeof(why)));
    CHECK_HAS(why, "but missing");
}

static void testMalformed(void) {
    static const char *lines[] = {
        "file " SO_SHA,
        "file " SO_SHA " 3",
        "file " SO_SHA " 3 ",
        "file " SO_SHA "  " SO_NAME,
        "file " SO_SHA " -3 " SO_NAME,
        "file " SO_SHA " 3x " SO_NAME,
        "file " SO_SHA " 0x3 " SO_NAME,
        "file " SO_SHA " 99999999999999999999999 " SO_NAME,
        "file BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD 3 " SO_NAME,
        "file ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a 3 " SO_NAME,
        "file ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0 3 " SO_NAME,
        "file ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad 3 " SO_NAME,
        "file " SO_SHA " 5 ../lib/libfw.so.1",
        "file " SO_SHA " 5 lib/../lib/libfw.so.1",
        "file " SO_SHA " 5 ..",
        "file " SO_SHA " 5 lib/..",
        "file " SO_SHA " 3 /tmp/" SO_NAME,
        "file " SO_SHA " 5 lib//libfw.so.1",
    };
    for (size_t k = 0; k < sizeof(lines) / sizeof(lines[0]); k++) {
        char manifest[1024], why[8192];
        int checked;
        /* The bad line third, after a good `file` line. */
        snprintf(manifest, sizeof(manifest), "format 1\n%s%s\n%s", SELF, lines[k], LIB);
        int ok = verify(manifest, &checked, why, sizeof(why));
        CHECK(!ok);
        if (!CHECK_HAS(why, RAI_MANIFEST_NAME ": malformed file line 3")) {
            fprintf(stderr, "    line \"%s\"\n", lines[k]);
        }
    }
}

static void testManifestUnreadable(void) {
    char dir[4096], so[8192], path[8192];
    int checked;
    RAI_Error err;
    Error_Init(&err);
    /* A folder where the manifest should be. */
    layOut(NULL, dir, sizeof(dir), so, sizeof(so));
    snprintf(path, sizeof(path), "%s/%s", dir, RAI_MANIFEST_NAME);
    mkdir(path, 0755);
    CHECK(!BackendManifest_Verify(so, "shown.so", &checked, &err));
    CHECK_HAS(Error_Message(&err), "is not a regular file under 1048576 bytes");
    Error_Clear(&err);
    /* A NUL byte inside. */
    layOut(NULL, dir, sizeof(dir), so, sizeof(so));
    writeFile(dir, RAI_MANIFEST_NAME, HEAD SELF "\0" LIB, sizeof(HEAD SELF "\0" LIB) - 1);
    CHECK(!BackendManifest_Verify(so, "shown.so", &checked, &err));
    CHECK_HAS(Error_Message(&err), "holds a NUL byte");
    Error_Clear(&err);
    /* Over 1 MiB. */
    layOut(NULL, dir, sizeof(dir), so, sizeof(so));
    size_t big = (1u << 20) + 1;
    char *text = malloc(big);
    memset(text, '#', big);
    memcpy(text, HEAD SELF, strlen(HEAD SELF));
    writeFile(dir, RAI_MANIFEST_NAME, text, big);
    free(text);
    CHECK(!BackendManifest_Verify(so, "shown.so", &checked, &err));
    CHECK_HAS(Error_Message(&err), "is not a regular file under 1048576 bytes");
    Error_Clear(&err);
}

/* ReadFacts on a folder holding only this manifest (NULL: none). */
static int facts(const char *manifest, RAI_ManifestFacts *f, char *why, size_t cap) {
    char dir[4096];
    newFolder(dir, sizeof(dir));
    if (manifest) writeText(dir, RAI_MANIFEST_NAME, manifest);
    RAI_Error err;
    Error_Init(&err);
    memset(f, 'x', sizeof(*f));
    int r = BackendManifest_ReadFacts(dir, f, &err);
    snprintf(why, cap, "%s", Error_IsSet(&err) ? Error_Message(&err) : "");
    Error_Clear(&err);
    return r;
}

static void testFacts(void) {
    RAI_ManifestFacts f;
    char why[8192];
    CHECK_INT(facts(HEAD "framework onnxruntime\nversion 1.20.1\nvariant cpu\nkind ONNX\n"
                         "abi 1.3\n" SELF "link a b\nnext-format-keyword 7\n",
                    &f, why, sizeof(why)),
              1);
    CHECK_STR(why, "");
    CHECK_STR(f.framework, "onnxruntime");
    CHECK_STR(f.version, "1.20.1");
    CHECK_STR(f.variant, "cpu");
    CHECK_STR(f.kind, "ONNX");
    CHECK_STR(f.abi, "1.3");
    /* Missing facts stay "", a value keeps its spaces, comments and lines
     * without a value are skipped. */
    CHECK_INT(facts("format 1\nframework my own framework\n# version 9\nversion\n", &f, why,
                    sizeof(why)),
              1);
    CHECK_STR(f.framework, "my own framework");
    CHECK_STR(f.version, "");
    CHECK_STR(f.variant, "");
    CHECK_STR(f.kind, "");
    CHECK_STR(f.abi, "");
    /* A value longer than its field is cut, terminated. */
    CHECK_INT(facts("format 1\nkind ABCDEFGHIJKLMNOPQRSTUVWXYZ\nabi 1.2.3.4.5.6.7.8.9\n"
                    "framework "
                    "0123456789012345678901234567890123456789012345678901234567890123456789\n",
                    &f, why, sizeof(why)),
              1);
    CHECK_STR(f.kind, "ABCDEFGHIJKLMNO");
    CHECK_STR(f.abi, "1.2.3.4.5.6.7.8");
    CHECK_STR(f.framework, "012345678901234567890123456789012345678901234567890123456789012");
    /* No manifest: 0, no error, facts empty. */
    CHECK_INT(facts(NULL, &f, why, sizeof(why)), 0);
    CHECK_STR(why, "");
    CHECK_STR(f.framework, "");
    /* Not format 1: -1, the reason, no facts. */
    static const char *notOne[] = {
        "framework fw\nkind ONNX\n",
        "format 2\nframework fw\n",
        "format 10\nframework fw\n",
        "format\nframework fw\n",
        "# format 1\nframework fw\n",
        "",
    };
    for (size_t k = 0; k < sizeof(notOne) / sizeof(notOne[0]); k++) {
        CHECK_INT(facts(notOne[k], &f, why, sizeof(why)), -1);
        CHECK_HAS(why, "is not a format 1 manifest");
        CHECK_STR(f.framework, "");
        CHECK_STR(f.kind, "");
    }
    /* Unreadable: a folder in its place. */
    char dir[4096], path[8192];
    newFolder(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/%s", dir, RAI_MANIFEST_NAME);
    mkdir(path, 0755);
    RAI_Error err;
    Error_Init(&err);
    CHECK_INT(BackendManifest_ReadFacts(dir, &f, &err), -1);
    CHECK_HAS(Error_Message(&err), "is not a regular file");
    Error_Clear(&err);
}

static int removeEntry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void) {
    UnitShim_Init();
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof(root), "%s/rai-unit-manifest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(root) == NULL) {
        perror(root);
        return 2;
    }
    testGood();
    testFileWrong();
    testMalformed();
    testManifestUnreadable();
    testFacts();
    CHECK_INT(UnitShim_Live(), 0);
    nftw(root, removeEntry, 16, FTW_DEPTH | FTW_PHYS);
    return Unit_Done("backend_manifest");
}
