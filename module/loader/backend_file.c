/*
 * backend_file.c - the pre-dlopen inspection of a backend file (see
 * backend_file.h). Everything is read with pread() into our own buffers and
 * every offset and size from the file is checked against the file's size
 * before use: the file is untrusted data here.
 */
#define _GNU_SOURCE /* pread, O_CLOEXEC, realpath under a strict -std */
#include "loader/backend_file.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend_kind.h"
#include "redismodule.h"

/* The ELF identity of the machine the core was compiled for: a backend
 * must have been built for the same. */
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#define HOST_MACHINE_NAME "x86-64"
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#define HOST_MACHINE_NAME "AArch64"
#else
#error "backend_file.c: add this architecture's ELF machine number"
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif
_Static_assert(sizeof(void *) == 8, "backend_file.c reads 64-bit ELF only");

/* Symbol and string tables beyond this are not a backend's (ours export
 * one symbol; a framework library loaded by mistake has ~10^5). */
#define MAX_TABLE_BYTES (256u << 20)

typedef struct Reader {
    int fd;
    uint64_t size;
    const char *shown;
    RAI_Error *err;
} Reader;

/* off + len within the file, without overflow. */
static int inFile(const Reader *r, uint64_t off, uint64_t len) {
    return off <= r->size && len <= r->size - off;
}

static int readAt(Reader *r, uint64_t off, void *buf, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(r->fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            Error_SetFmt(r->err, "%s: read failed at offset %llu: %s", r->shown,
                         (unsigned long long)(off + done), n < 0 ? strerror(errno) : "file shrank");
            return 0;
        }
        done += (size_t)n;
    }
    return 1;
}

/* A whole table (section) into a new buffer; NULL after an error. */
static void *readTable(Reader *r, const Elf64_Shdr *sh, const char *what) {
    if (sh->sh_size > MAX_TABLE_BYTES) {
        Error_SetFmt(r->err, "%s: %s of %llu bytes is larger than a backend's", r->shown, what,
                     (unsigned long long)sh->sh_size);
        return NULL;
    }
    void *buf = RedisModule_Alloc(sh->sh_size ? sh->sh_size : 1);
    if (!readAt(r, sh->sh_offset, buf, sh->sh_size)) {
        RedisModule_Free(buf);
        return NULL;
    }
    return buf;
}

static int checkHeader(Reader *r, const Elf64_Ehdr *eh) {
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
        Error_SetFmt(r->err, "%s: not an ELF file (no ELF magic number)", r->shown);
        return 0;
    }
    if (eh->e_ident[EI_CLASS] != ELFCLASS64) {
        Error_SetFmt(r->err, "%s: wrong ELF class %u, this server needs 64-bit (ELFCLASS64)",
                     r->shown, eh->e_ident[EI_CLASS]);
        return 0;
    }
    if (eh->e_ident[EI_DATA] != HOST_DATA) {
        Error_SetFmt(r->err, "%s: wrong byte order (ELF data encoding %u)", r->shown,
                     eh->e_ident[EI_DATA]);
        return 0;
    }
    if (eh->e_machine != HOST_MACHINE) {
        Error_SetFmt(r->err, "%s: wrong machine: ELF machine %u, this server is %s (%u)",
                     r->shown, eh->e_machine, HOST_MACHINE_NAME, HOST_MACHINE);
        return 0;
    }
    if (eh->e_type != ET_DYN) {
        Error_SetFmt(r->err, "%s: not a shared object (ELF type %u, expected ET_DYN)", r->shown,
                     eh->e_type);
        return 0;
    }
    return 1;
}

/* Program headers, then every segment's file range: a copy cut short
 * inside its code or its last loaded segment stops here. */
static int checkSegments(Reader *r, const Elf64_Ehdr *eh) {
    if (eh->e_phnum == 0 || eh->e_phentsize != sizeof(Elf64_Phdr)) {
        Error_SetFmt(r->err, "%s: no usable program headers (%u of %u bytes)", r->shown,
                     eh->e_phnum, eh->e_phentsize);
        return 0;
    }
    uint64_t bytes = (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr);
    if (!inFile(r, eh->e_phoff, bytes)) {
        Error_SetFmt(r->err, "%s: truncated: program headers end at %llu past the file size %llu",
                     r->shown, (unsigned long long)(eh->e_phoff + bytes),
                     (unsigned long long)r->size);
        return 0;
    }
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        if (!readAt(r, eh->e_phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph))) return 0;
        if (!inFile(r, ph.p_offset, ph.p_filesz)) {
            Error_SetFmt(r->err, "%s: truncated: %ssegment %u ends at %llu past the file size %llu",
                         r->shown, ph.p_type == PT_LOAD ? "loaded " : "", i,
                         (unsigned long long)(ph.p_offset + ph.p_filesz),
                         (unsigned long long)r->size);
            return 0;
        }
    }
    return 1;
}

/* The section headers, each section's range checked. Caller frees. */
static Elf64_Shdr *readSections(Reader *r, const Elf64_Ehdr *eh) {
    if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(Elf64_Shdr)) {
        Error_SetFmt(r->err, "%s: no usable section headers (%u of %u bytes)", r->shown,
                     eh->e_shnum, eh->e_shentsize);
        return NULL;
    }
    uint64_t bytes = (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr);
    if (!inFile(r, eh->e_shoff, bytes)) {
        Error_SetFmt(r->err, "%s: truncated: section headers end at %llu past the file size %llu",
                     r->shown, (unsigned long long)(eh->e_shoff + bytes),
                     (unsigned long long)r->size);
        return NULL;
    }
    Elf64_Shdr *sh = RedisModule_Alloc(bytes);
    if (!readAt(r, eh->e_shoff, sh, bytes)) goto fail;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_type == SHT_NULL) continue;
        if (!inFile(r, sh[i].sh_offset, sh[i].sh_size)) {
            Error_SetFmt(r->err, "%s: truncated: section %u ends at %llu past the file size %llu",
                         r->shown, i, (unsigned long long)(sh[i].sh_offset + sh[i].sh_size),
                         (unsigned long long)r->size);
            goto fail;
        }
    }
    return sh;
fail:
    RedisModule_Free(sh);
    return NULL;
}

static int exportsEntry(Reader *r, const Elf64_Shdr *sh, unsigned shnum) {
    const Elf64_Shdr *dynsym = NULL;
    for (unsigned i = 0; i < shnum; i++) {
        if (sh[i].sh_type == SHT_DYNSYM) dynsym = &sh[i];
    }
    if (dynsym == NULL || dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link >= shnum ||
        sh[dynsym->sh_link].sh_type != SHT_STRTAB) {
        Error_SetFmt(r->err, "%s: no dynamic symbol table: does not export the entry symbol %s",
                     r->shown, RAI_BACKEND_ENTRY_SYMBOL);
        return 0;
    }
    const Elf64_Shdr *strtab = &sh[dynsym->sh_link];
    Elf64_Sym *syms = readTable(r, dynsym, "dynamic symbol table");
    if (syms == NULL) return 0;
    char *strs = readTable(r, strtab, "dynamic string table");
    if (strs == NULL) {
        RedisModule_Free(syms);
        return 0;
    }
    static const char want[] = RAI_BACKEND_ENTRY_SYMBOL;
    int found = 0;
    size_t n = dynsym->sh_size / sizeof(Elf64_Sym);
    for (size_t i = 0; i < n && !found; i++) {
        const Elf64_Sym *s = &syms[i];
        if (s->st_name >= strtab->sh_size || strtab->sh_size - s->st_name < sizeof(want)) continue;
        if (memcmp(strs + s->st_name, want, sizeof(want)) != 0) continue;
        found = ELF64_ST_BIND(s->st_info) == STB_GLOBAL &&
                ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
                ELF64_ST_VISIBILITY(s->st_other) == STV_DEFAULT && s->st_shndx != SHN_UNDEF;
    }
    RedisModule_Free(syms);
    RedisModule_Free(strs);
    if (!found) {
        Error_SetFmt(r->err, "%s: does not export the entry symbol %s (a defined global function)",
                     r->shown, RAI_BACKEND_ENTRY_SYMBOL);
    }
    return found;
}

static uint32_t align4(uint32_t n) { return (n + 3u) & ~3u; }

/* Finds the RedisAI note among the SHT_NOTE sections. 1 found, 0 not
 * found, -1 error (set). */
static int findNote(Reader *r, const Elf64_Shdr *sh, unsigned shnum, BackendFileNote *note) {
    static const char name[] = RAI_BACKEND_NOTE_NAME;
    for (unsigned i = 0; i < shnum; i++) {
        if (sh[i].sh_type != SHT_NOTE) continue;
        uint8_t *buf = readTable(r, &sh[i], "note section");
        if (buf == NULL) return -1;
        uint64_t off = 0, len = sh[i].sh_size;
        int found = 0;
        while (!found && len - off >= 12) {
            uint32_t h[3];
            memcpy(h, buf + off, sizeof(h));
            uint64_t namesz = align4(h[0]), descsz = align4(h[1]);
            if (h[0] > len || h[1] > len || len - off - 12 < namesz + descsz) break;
            const uint8_t *nm = buf + off + 12, *desc = nm + namesz;
            if (h[2] == RAI_BACKEND_NOTE_TYPE && h[0] == sizeof(name) &&
                !memcmp(nm, name, sizeof(name)) && h[1] >= 3 * sizeof(uint32_t)) {
                uint32_t d[3];
                memcpy(d, desc, sizeof(d));
                *note = (BackendFileNote){.abi_major = d[0], .abi_minor = d[1], .kind = d[2]};
                found = 1;
            }
            off += 12 + namesz + descsz;
        }
        RedisModule_Free(buf);
        if (found) return 1;
    }
    return 0;
}

static int checkNote(Reader *r, const BackendFileNote *note, RAI_BackendKind kind) {
    if (note->abi_major != RAI_ABI_MAJOR) {
        Error_SetFmt(r->err, "%s: backend ABI major %u (note says %u.%u) does not match the "
                     "core's ABI major %u", r->shown, note->abi_major, note->abi_major,
                     note->abi_minor, RAI_ABI_MAJOR);
        return 0;
    }
    if (note->kind >= RAI_BACKEND_KINDS) {
        Error_SetFmt(r->err, "%s: file is a backend of unknown kind %u, not %s", r->shown,
                     note->kind, Backend_KindName(kind));
        return 0;
    }
    if (note->kind != (uint32_t)kind) {
        Error_SetFmt(r->err, "%s: file is a %s backend, not %s", r->shown,
                     Backend_KindName((RAI_BackendKind)note->kind), Backend_KindName(kind));
        return 0;
    }
    return 1;
}

int BackendFile_Inspect(const char *path, const char *shown, RAI_BackendKind kind,
                        BackendFileNote *note, RAI_Error *err) {
    Reader r = {.fd = -1, .shown = shown, .err = err};
    Elf64_Shdr *sh = NULL;
    int ok = 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    r.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r.fd < 0) {
        Error_SetFmt(err, "%s: cannot open: %s", shown, strerror(errno));
        return 0;
    }
    struct stat st;
    if (fstat(r.fd, &st) != 0) {
        Error_SetFmt(err, "%s: cannot stat: %s", shown, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        Error_SetFmt(err, "%s: not a regular file (%s)", shown,
                     S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
        goto done;
    }
    r.size = (uint64_t)st.st_size;
    Elf64_Ehdr eh;
    if (r.size < sizeof(eh)) {
        /* Too short for a 64-bit header: tell "not ELF" from "cut short". */
        unsigned char magic[SELFMAG] = {0};
        int elf = r.size >= SELFMAG && readAt(&r, 0, magic, SELFMAG) &&
                  !memcmp(magic, ELFMAG, SELFMAG);
        if (!Error_IsSet(err)) {
            Error_SetFmt(err, elf ? "%s: truncated: %llu bytes, shorter than an ELF header"
                                  : "%s: not an ELF file (%llu bytes, no ELF header)",
                         shown, (unsigned long long)r.size);
        }
        goto done;
    }
    if (!readAt(&r, 0, &eh, sizeof(eh)) || !checkHeader(&r, &eh) || !checkSegments(&r, &eh)) {
        goto done;
    }
    sh = readSections(&r, &eh);
    if (sh == NULL || !exportsEntry(&r, sh, eh.e_shnum)) goto done;
    int found = findNote(&r, sh, eh.e_shnum, note);
    if (found < 0) goto done;
    if (found == 0) {
        Error_SetFmt(err, "%s: no RedisAI ABI note (section .note.redisai): not a backend, or "
                     "built before ABI %d.3; rebuild it with RAI_BACKEND_ABI_NOTE()", shown,
                     RAI_ABI_MAJOR);
        goto done;
    }
    ok = checkNote(&r, note, kind);
done:
    if (sh) RedisModule_Free(sh);
    close(r.fd);
    return ok;
}
