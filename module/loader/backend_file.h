/*
 * backend_file.h - reads a backend .so as data, before anything of it runs.
 *
 * dlopen() runs a file's constructors before the loader can look at what it
 * exports, so every check that can be made on the bytes is made first:
 * a regular file; an ELF shared object of this machine's class, byte order
 * and architecture; headers and loaded segments inside the file (a
 * truncated copy is refused here instead of faulting in the dynamic
 * loader); RAI_BackendEntry exported as a default-visibility global
 * function; and the RedisAI ABI note of backend_abi.h with our ABI major
 * and the kind asked for. These checks refuse wrong files, not hostile
 * ones: a crafted file can pass them, which is why loading is limited to
 * users who may MODULE LOAD (commands/config_commands.c).
 */
#ifndef REDISAI_BACKEND_FILE_H
#define REDISAI_BACKEND_FILE_H

#include <stdint.h>

#include "core/error.h"
#include "redisai/backend_abi.h"

typedef struct BackendFileNote {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t kind;
} BackendFileNote;

/* Checks the file at path as a backend of kind; the note read goes to
 * *note. Returns 1, or 0 with a reason naming `shown` (the path as the
 * user gave it) in err. */
int BackendFile_Inspect(const char *path, const char *shown, RAI_BackendKind kind,
                        BackendFileNote *note, RAI_Error *err);

#endif
