/*
 * config_list.h - AI.CONFIG LIST: what backends BACKENDSPATH holds and
 * which are loaded, read from folders and manifests, never by opening a
 * backend.
 */
#ifndef REDISAI_CONFIG_LIST_H
#define REDISAI_CONFIG_LIST_H

#include "redismodule.h"

/* Replies an array with one map per backend (RESP2: flat field/value
 * arrays): every folder under BACKENDSPATH sorted by name, then every
 * loaded backend that lies outside them. Fields, in this order:
 *   name       folder name after "redisai_" (what LOADBACKEND takes); null
 *              for a backend loaded from outside those folders (its other
 *              facts then come from the manifest beside its real file)
 *   kind       TF | TFLITE | TORCH | ONNX | unknown
 *   framework, version, variant, abi
 *              from the folder's manifest; what it lacks, when loaded, from
 *              the backend's descriptor and ABI note; else "unknown"
 *   path       the backend's .so (the folder when its kind is unknown)
 *   link       the folder's symlink target (default links), else null
 *   manifest   "present", "missing", or why it cannot be read
 *   loaded     1 when this file is the loaded backend of its kind (a
 *              default link and its target both show it)
 *   loaded_at  Unix seconds of the load, null when not loaded
 *   load_seconds  how long the load took, null when not loaded
 *   models, scripts  how many live on it (0 when not loaded) */
int BackendList_Reply(RedisModuleCtx *ctx);

#endif
