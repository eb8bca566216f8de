/*
 * backend_manifest.h - checks a backend against the manifest build_tools
 * writes in its folder (RAI_MANIFEST_NAME beside the .so).
 *
 * Format, one record a line, fields separated by single spaces, the path
 * last (relative to the folder, no "..", never absolute):
 *
 *     # comment
 *     format 1
 *     framework onnxruntime
 *     version 1.20.1
 *     variant cpu
 *     kind ONNX
 *     abi 1.3
 *     file <sha256 hex> <size in bytes> <path>
 *     link <target> <path>
 *
 * Unknown keywords are ignored (later formats may add some); a malformed
 * `file` line refuses the load. The backend .so is hashed (SHA-256) and
 * sized; every other listed file only has its size checked (stat): the
 * framework libraries are hundreds of MB and hashing them on every load
 * would cost seconds. `python -m build_tools check` hashes everything.
 */
#ifndef REDISAI_BACKEND_MANIFEST_H
#define REDISAI_BACKEND_MANIFEST_H

#include "core/error.h"

#define RAI_MANIFEST_NAME "redisai_backend.manifest"

/* real_so: the backend's real path (symlinks resolved): the manifest is
 * looked for in its folder. shown: the path as the user gave it. Returns 1
 * when the folder has no manifest or everything matches; else 0 with the
 * file and the reason in err. *checked says whether a manifest was read. */
int BackendManifest_Verify(const char *real_so, const char *shown, int *checked, RAI_Error *err);

/* The header facts of a folder's manifest, for AI.CONFIG LIST and
 * load-by-name: read as text, nothing verified, nothing opened but the
 * manifest. A fact the manifest lacks stays "" (a value longer than its
 * field is cut). */
typedef struct RAI_ManifestFacts {
    char framework[64];
    char version[64];
    char variant[64];
    char kind[16];
    char abi[16];
} RAI_ManifestFacts;

/* Returns 1 when folder/RAI_MANIFEST_NAME was read into *facts, 0 when
 * there is none, -1 (reason in err) when it cannot be read or is not a
 * format-1 manifest. */
int BackendManifest_ReadFacts(const char *folder, RAI_ManifestFacts *facts, RAI_Error *err);

#endif
