/*
 * test_backend_file.c - module/loader/backend_file.c on files the test
 * writes: the good backend CMake builds (fixture_backend.c, its path the
 * first argument), and copies of it with one thing wrong each: the ELF
 * identity, the headers, the segments and sections, the entry symbol, the
 * ABI note. Each wrong file must be refused with the reason of its own
 * check, never read out of bounds (run it under AddressSanitizer too).
 */
#define _GNU_SOURCE /* mkdtemp, nftw */
#include <elf.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/backend_file.h"
#include "unit.h"
#include "unit_shim.h"

#define FIXTURE_KIND RAI_BACKEND_TORCH

typedef struct Image {
    uint8_t *b;
    size_t len;
} Image;

static Image good;
static char root[1024];
static int files;

static Image copyOf(const Image *im) {
    Image c = {.b = malloc(im->len ? im->len : 1), .len = im->len};
    if (c.b == NULL) abort();
    memcpy(c.b, im->b, im->len);
    return c;
}

/* ----------------------- finding things in the image ---------------------- */

static Elf64_Ehdr *ehdr(Image *im) {
    return (Elf64_Ehdr *)im->b;
}

static Elf64_Shdr *sections(Image *im) {
    return (Elf64_Shdr *)(im->b + ehdr(im)->e_shoff);
}

static Elf64_Phdr *segments(Image *im) {
    return (Elf64_Phdr *)(im->b + ehdr(im)->e_phoff);
}

static Elf64_Shdr *sectionOfType(Image *im, uint32_t type) {
    for (unsigned i = 0; i < ehdr(im)->e_shnum; i++) {
        if (sections(im)[i].sh_type == type) return &sections(im)[i];
    }
    return NULL;
}

static Elf64_Shdr *sectionNamed(Image *im, const char *name) {
    const Elf64_Shdr *names = &sections(im)[ehdr(im)->e_shstrndx];
    for (unsigned i = 0; i < ehdr(im)->e_shnum; i++) {
        const char *n = (const char *)im->b + names->sh_offset + sections(im)[i].sh_name;
        if (!strcmp(n, name)) return &sections(im)[i];
    }
    return NULL;
}

static Elf64_Sym *entrySymbol(Image *im) {
    Elf64_Shdr *dynsym = sectionOfType(im, SHT_DYNSYM);
    if (dynsym == NULL) return NULL;
    const char *strs = (const char *)im->b + sections(im)[dynsym->sh_link].sh_offset;
    Elf64_Sym *syms = (Elf64_Sym *)(im->b + dynsym->sh_offset);
    for (size_t i = 0; i < dynsym->sh_size / sizeof(Elf64_Sym); i++) {
        if (!strcmp(strs + syms[i].st_name, RAI_BACKEND_ENTRY_SYMBOL)) return &syms[i];
    }
    return NULL;
}

static RAI_BackendAbiNote *abiNote(Image *im) {
    Elf64_Shdr *sh = sectionNamed(im, ".note.redisai");
    return sh ? (RAI_BackendAbiNote *)(im->b + sh->sh_offset) : NULL;
}

/* The end of the loaded segment that ends last in the file. */
static uint64_t lastLoadEnd(Image *im) {
    uint64_t end = 0;
    for (unsigned i = 0; i < ehdr(im)->e_phnum; i++) {
        const Elf64_Phdr *ph = &segments(im)[i];
        if (ph->p_type == PT_LOAD && ph->p_offset + ph->p_filesz > end) {
            end = ph->p_offset + ph->p_filesz;
        }
    }
    return end;
}

/* ------------------------------ inspecting -------------------------------- */

static void writeAt(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

typedef struct Outcome {
    int ok;
    BackendFileNote note;
    char why[2048];
} Outcome;

static Outcome inspectPath(const char *path, RAI_BackendKind kind) {
    Outcome o = {0};
    RAI_Error err;
    Error_Init(&err);
    o.ok = BackendFile_Inspect(path, "shown.so", kind, &o.note, &err);
    snprintf(o.why, sizeof(o.why), "%s", Error_IsSet(&err) ? Error_Message(&err) : "");
    Error_Clear(&err);
    return o;
}

/* Writes the first len bytes of im to a new file and inspects it. */
static Outcome inspectBytes(const Image *im, size_t len, RAI_BackendKind kind) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/b%d.so", root, files++);
    writeAt(path, im->b, len);
    return inspectPath(path, kind);
}

static Outcome inspect(const Image *im) {
    return inspectBytes(im, im->len, FIXTURE_KIND);
}

/* Refused, with a reason that names the file and holds `reason`. */
#define REFUSED(o, reason)                                   \
    do {                                                     \
        Outcome o_ = (o);                                    \
        CHECK(!o_.ok);                                       \
        CHECK_HAS(o_.why, "shown.so: ");                     \
        CHECK_HAS(o_.why, (reason));                         \
    } while (0)

/* -------------------------------- the cases ------------------------------- */

static void testGood(void) {
    Outcome o = inspect(&good);
    CHECK(o.ok);
    CHECK_STR(o.why, "");
    CHECK_INT(o.note.abi_major, RAI_ABI_MAJOR);
    CHECK_INT(o.note.abi_minor, RAI_ABI_MINOR);
    CHECK_INT(o.note.kind, FIXTURE_KIND);
    /* Another minor is no reason to refuse. */
    Image im = copyOf(&good);
    abiNote(&im)->abi_minor = RAI_ABI_MINOR + 40;
    o = inspect(&im);
    CHECK(o.ok);
    CHECK_INT(o.note.abi_minor, RAI_ABI_MINOR + 40);
    free(im.b);
    /* A section that takes no room in the file may say any size. */
    im = copyOf(&good);
    Elf64_Shdr *bss = sectionOfType(&im, SHT_NOBITS);
    if (CHECK(bss != NULL)) bss->sh_size = UINT64_MAX;
    CHECK(inspect(&im).ok);
    free(im.b);
}

static void testNotRegular(void) {
    REFUSED(inspectPath(root, FIXTURE_KIND), "not a regular file (a directory)");
    char fifo[2048];
    snprintf(fifo, sizeof(fifo), "%s/fifo.so", root);
    if (CHECK(mkfifo(fifo, 0600) == 0)) {
        /* Returns at once: no writer is waited for. */
        REFUSED(inspectPath(fifo, FIXTURE_KIND), "not a regular file (a device, FIFO or socket)");
    }
    REFUSED(inspectPath("/dev/null", FIXTURE_KIND), "not a regular file (a device");
    char gone[2048];
    snprintf(gone, sizeof(gone), "%s/gone.so", root);
    REFUSED(inspectPath(gone, FIXTURE_KIND), "cannot open: No such file or directory");
}

static void testNotElf(void) {
    static const char text[] = "#!/bin/sh\necho this is not a shared object at all, no, not at all\n";
    Image t = {.b = (uint8_t *)text, .len = sizeof(text) - 1};
    REFUSED(inspect(&t), "not an ELF file (no ELF magic number)");
    REFUSED(inspectBytes(&t, 20, FIXTURE_KIND), "not an ELF file (20 bytes, no ELF header)");
    REFUSED(inspectBytes(&t, 0, FIXTURE_KIND), "not an ELF file (0 bytes, no ELF header)");
    /* The magic alone, or part of it. */
    REFUSED(inspectBytes(&good, 3, FIXTURE_KIND), "not an ELF file (3 bytes");
    REFUSED(inspectBytes(&good, SELFMAG, FIXTURE_KIND), "truncated: 4 bytes, shorter than an ELF header");
    REFUSED(inspectBytes(&good, sizeof(Elf64_Ehdr) - 1, FIXTURE_KIND),
            "truncated: 63 bytes, shorter than an ELF header");
    Image im = copyOf(&good);
    im.b[EI_MAG3] = 'G';
    REFUSED(inspect(&im), "not an ELF file (no ELF magic number)");
    free(im.b);
}

static void testIdentity(void) {
    Image im = copyOf(&good);
    im.b[EI_CLASS] = ELFCLASS32;
    REFUSED(inspect(&im), "wrong ELF class 1, this server needs 64-bit");
    free(im.b);
    im = copyOf(&good);
    im.b[EI_DATA] = im.b[EI_DATA] == ELFDATA2LSB ? ELFDATA2MSB : ELFDATA2LSB;
    REFUSED(inspect(&im), "wrong byte order");
    free(im.b);
    im = copyOf(&good);
    uint16_t other = ehdr(&im)->e_machine == EM_X86_64 ? EM_AARCH64 : EM_X86_64;
    ehdr(&im)->e_machine = other;
    char want[64];
    snprintf(want, sizeof(want), "wrong machine: ELF machine %u, this server is ", other);
    REFUSED(inspect(&im), want);
    free(im.b);
    im = copyOf(&good);
    ehdr(&im)->e_type = ET_EXEC;
    REFUSED(inspect(&im), "not a shared object (ELF type 2, expected ET_DYN)");
    free(im.b);
    im = copyOf(&good);
    ehdr(&im)->e_type = ET_REL;
    REFUSED(inspect(&im), "not a shared object (ELF type 1");
    free(im.b);
}

static void testSegments(void) {
    Image im = copyOf(&good);
    ehdr(&im)->e_phnum = 0;
    REFUSED(inspect(&im), "no usable program headers (0 of 56 bytes)");
    free(im.b);
    im = copyOf(&good);
    ehdr(&im)->e_phentsize = sizeof(Elf32_Phdr);
    REFUSED(inspect(&im), "no usable program headers");
    free(im.b);
    /* Program headers past the end, also where offset + size wraps. */
    im = copyOf(&good);
    ehdr(&im)->e_phoff = im.len - 8;
    REFUSED(inspect(&im), "truncated: program headers end at");
    ehdr(&im)->e_phoff = UINT64_MAX - 8;
    REFUSED(inspect(&im), "truncated: program headers end at");
    free(im.b);
    /* A copy cut short inside its last loaded segment. */
    uint64_t end = lastLoadEnd(&good);
    CHECK(end > sizeof(Elf64_Ehdr) && end <= good.len);
    REFUSED(inspectBytes(&good, end - 1, FIXTURE_KIND), "truncated: loaded segment ");
    REFUSED(inspectBytes(&good, sizeof(Elf64_Ehdr) + 1, FIXTURE_KIND), "truncated: ");
    /* Another segment that says it reaches past the end. */
    im = copyOf(&good);
    int patched = 0;
    for (unsigned i = 0; i < ehdr(&im)->e_phnum && !patched; i++) {
        Elf64_Phdr *ph = &segments(&im)[i];
        if (ph->p_type == PT_LOAD || ph->p_type == PT_GNU_STACK) continue;
        ph->p_filesz = UINT64_MAX - ph->p_offset + 2; /* wraps */
        patched = 1;
        char want[64];
        snprintf(want, sizeof(want), "truncated: segment %u ends at", i);
        REFUSED(inspect(&im), want);
    }
    CHECK(patched);
    free(im.b);
}

static void testSections(void) {
    /* The section headers are last in the file: one byte less cuts them. */
    REFUSED(inspectBytes(&good, good.len - 1, FIXTURE_KIND), "truncated: section headers end at");
    Image im = copyOf(&good);
    ehdr(&im)->e_shnum = 0;
    REFUSED(inspect(&im), "no usable section headers (0 of 64 bytes)");
    free(im.b);
    im = copyOf(&good);
    ehdr(&im)->e_shentsize = sizeof(Elf32_Shdr);
    REFUSED(inspect(&im), "no usable section headers");
    free(im.b);
    im = copyOf(&good);
    ehdr(&im)->e_shoff = UINT64_MAX - 16;
    REFUSED(inspect(&im), "truncated: section headers end at");
    free(im.b);
    /* One section past the end. */
    im = copyOf(&good);
    Elf64_Shdr *comment = sectionNamed(&im, ".comment");
    if (CHECK(comment != NULL)) {
        comment->sh_size = im.len;
        char want[64];
        snprintf(want, sizeof(want), "truncated: section %u ends at",
                 (unsigned)(comment - sections(&im)));
        REFUSED(inspect(&im), want);
    }
    free(im.b);
}

static void testEntry(void) {
    static const char noEntry[] = "does not export the entry symbol RAI_BackendEntry";
    CHECK(entrySymbol(&good) != NULL);
    /* No dynamic symbol table, or one whose string table is not one. */
    Image im = copyOf(&good);
    sectionOfType(&im, SHT_DYNSYM)->sh_type = SHT_PROGBITS;
    REFUSED(inspect(&im), "no dynamic symbol table");
    free(im.b);
    im = copyOf(&good);
    sectionOfType(&im, SHT_DYNSYM)->sh_link = ehdr(&im)->e_shnum;
    REFUSED(inspect(&im), "no dynamic symbol table");
    free(im.b);
    im = copyOf(&good);
    sectionOfType(&im, SHT_DYNSYM)->sh_entsize = sizeof(Elf32_Sym);
    REFUSED(inspect(&im), "no dynamic symbol table");
    free(im.b);
    /* Another name: one letter off, or the name cut short. */
    im = copyOf(&good);
    Elf64_Sym *sym = entrySymbol(&im);
    Elf64_Shdr *dynsym = sectionOfType(&im, SHT_DYNSYM);
    char *name = (char *)im.b + sections(&im)[dynsym->sh_link].sh_offset + sym->st_name;
    name[strlen(name) - 1] = 'X';
    REFUSED(inspect(&im), noEntry);
    name[strlen(name) - 1] = '\0';
    REFUSED(inspect(&im), noEntry);
    free(im.b);
    /* A longer name that starts with it: its NUL overwritten. */
    im = copyOf(&good);
    sym = entrySymbol(&im);
    dynsym = sectionOfType(&im, SHT_DYNSYM);
    name = (char *)im.b + sections(&im)[dynsym->sh_link].sh_offset + sym->st_name;
    name[strlen(RAI_BACKEND_ENTRY_SYMBOL)] = 'X';
    REFUSED(inspect(&im), noEntry);
    free(im.b);
    /* A name offset outside the string table. */
    im = copyOf(&good);
    entrySymbol(&im)->st_name = 0xfffffff0u;
    REFUSED(inspect(&im), noEntry);
    free(im.b);
    /* Not a default-visibility, defined, global function. */
    static const struct {
        const char *what;
        unsigned char info, other;
        int undefined;
    } wrong[] = {
        {"hidden", 0, STV_HIDDEN, 0},
        {"protected", 0, STV_PROTECTED, 0},
        {"internal", 0, STV_INTERNAL, 0},
        {"local", ELF64_ST_INFO(STB_LOCAL, STT_FUNC), STV_DEFAULT, 0},
        {"weak", ELF64_ST_INFO(STB_WEAK, STT_FUNC), STV_DEFAULT, 0},
        {"object", ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), STV_DEFAULT, 0},
        {"undefined", 0, STV_DEFAULT, 1},
    };
    for (size_t k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
        im = copyOf(&good);
        sym = entrySymbol(&im);
        if (wrong[k].info) sym->st_info = wrong[k].info;
        sym->st_other = wrong[k].other;
        if (wrong[k].undefined) sym->st_shndx = SHN_UNDEF;
        Outcome o = inspect(&im);
        if (!CHECK(!o.ok)) fprintf(stderr, "    a %s entry symbol passed\n", wrong[k].what);
        CHECK_HAS(o.why, noEntry);
        free(im.b);
    }
}

static void testNote(void) {
    static const char noNote[] = "no RedisAI ABI note (section .note.redisai)";
    CHECK(abiNote(&good) != NULL);
    /* Not a note section any more. */
    Image im = copyOf(&good);
    sectionNamed(&im, ".note.redisai")->sh_type = SHT_PROGBITS;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    /* A note, but not ours: another name, another type, too short a
     * descriptor. */
    im = copyOf(&good);
    abiNote(&im)->name[6] = 'J';
    REFUSED(inspect(&im), noNote);
    free(im.b);
    im = copyOf(&good);
    abiNote(&im)->type = RAI_BACKEND_NOTE_TYPE + 1;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    im = copyOf(&good);
    abiNote(&im)->descsz = 8;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    /* Sizes that point past the section are no note, not a read past it. */
    im = copyOf(&good);
    abiNote(&im)->namesz = 0xffffffffu;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    im = copyOf(&good);
    abiNote(&im)->descsz = 0xfffffffdu;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    im = copyOf(&good);
    sectionNamed(&im, ".note.redisai")->sh_size = 11;
    REFUSED(inspect(&im), noNote);
    free(im.b);
    /* Another major. */
    im = copyOf(&good);
    abiNote(&im)->abi_major = RAI_ABI_MAJOR + 1;
    abiNote(&im)->abi_minor = 0;
    char want[128];
    snprintf(want, sizeof(want), "backend ABI major %u (note says %u.0) does not match the "
             "core's ABI major %u", RAI_ABI_MAJOR + 1, RAI_ABI_MAJOR + 1, RAI_ABI_MAJOR);
    REFUSED(inspect(&im), want);
    abiNote(&im)->abi_major = 0;
    REFUSED(inspect(&im), "backend ABI major 0");
    free(im.b);
    /* Another kind in the note, or another kind asked for. */
    im = copyOf(&good);
    abiNote(&im)->kind = RAI_BACKEND_ONNX;
    REFUSED(inspect(&im), "file is a ONNX backend, not TORCH");
    abiNote(&im)->kind = 9;
    REFUSED(inspect(&im), "file is a backend of unknown kind 9, not TORCH");
    free(im.b);
    REFUSED(inspectBytes(&good, good.len, RAI_BACKEND_TF), "file is a TORCH backend, not TF");
    REFUSED(inspectBytes(&good, good.len, RAI_BACKEND_TFLITE), "file is a TORCH backend, not TFLITE");
}

/* -------------------------------------------------------------------------- */

static int removeEntry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int readGood(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        fclose(f);
        return 0;
    }
    good.len = (size_t)st.st_size;
    good.b = malloc(good.len);
    int ok = good.b && fread(good.b, 1, good.len, f) == good.len;
    fclose(f);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2 || !readGood(argv[1])) {
        fprintf(stderr, "usage: %s <fixture backend .so> (built by the unit_tests target)\n",
                argv[0]);
        return 2;
    }
    UnitShim_Init();
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof(root), "%s/rai-unit-elf-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(root) == NULL) {
        perror(root);
        return 2;
    }
    testGood();
    testNotRegular();
    testNotElf();
    testIdentity();
    testSegments();
    testSections();
    testEntry();
    testNote();
    CHECK_INT(UnitShim_Live(), 0);
    nftw(root, removeEntry, 16, FTW_DEPTH | FTW_PHYS);
    free(good.b);
    return Unit_Done("backend_file");
}
