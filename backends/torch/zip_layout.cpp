/*
 * zip_layout.cpp - reads a TorchScript archive's zip structure the way
 * miniz (libtorch's zip reader) does, refusing every layout where the two
 * readings could differ (zip_layout.h says which layout is accepted).
 *
 * The offsets and rules follow the zip format (APPNOTE.TXT 4.3) and what
 * miniz's reader checks; each length read from the blob is bounds-checked
 * before it is used. torch_archive.cpp decides from these members whether
 * libtorch's reader will open the blob.
 */
#include "torch/zip_layout.h"

#include <algorithm>
#include <stdexcept>

namespace rai_torch {
namespace {

constexpr uint32_t kEndSig = 0x06054b50u;       /* end of central directory */
constexpr uint32_t kEnd64Sig = 0x06064b50u;     /* zip64 end of central directory */
constexpr uint32_t kLocator64Sig = 0x07064b50u; /* zip64 end locator */
constexpr uint32_t kEntrySig = 0x02014b50u;     /* central directory entry */
constexpr uint32_t kLocalSig = 0x04034b50u;     /* local file header */
constexpr size_t kEndSize = 22, kEnd64Size = 56, kLocator64Size = 20;
constexpr size_t kEntrySize = 46, kLocalSize = 30;
constexpr uint64_t kMax32 = 0xFFFFFFFFu;

uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* Where the central directory lies, from the end records. */
struct Directory {
    uint64_t count;
    uint64_t offset;
    uint64_t size;
    size_t end; /* where the central directory must end */
};

/* miniz takes the last signature with a whole record after it (bytes after
 * that record, comment or not, it ignores; so does this check). */
size_t find_end(const uint8_t *b, size_t len) {
    for (size_t pos = len - kEndSize;; pos--) {
        if (le(b + pos, 4) == kEndSig) {
            return pos;
        }
        if (pos == 0) {
            return SIZE_MAX;
        }
    }
}

/* miniz reads the zip64 records whenever a locator signature precedes the
 * end record, whatever the 32-bit fields say, and looks for the zip64 end
 * record right before the locator first. */
void read_end64(const uint8_t *b, size_t eocd, Directory *dir) {
    const uint8_t *loc = b + eocd - kLocator64Size;
    size_t end64 = eocd - kLocator64Size - kEnd64Size;
    const uint8_t *e = b + end64;
    if (le(e, 4) != kEnd64Sig || le(loc + 8, 8) != end64 || le(e + 4, 8) != kEnd64Size - 12) {
        zip_corrupt("bad zip64 end of central directory");
    }
    if (le(loc + 4, 4) != 0 || le(loc + 16, 4) != 1 || le(e + 16, 4) != 0 || le(e + 20, 4) != 0 ||
        le(e + 24, 8) != le(e + 32, 8)) {
        zip_corrupt("archive split over several disks");
    }
    dir->count = le(e + 32, 8);
    dir->size = le(e + 40, 8);
    dir->offset = le(e + 48, 8);
    dir->end = end64;
    if (dir->count > kMax32 || dir->size > kMax32) {
        zip_corrupt("central directory too large");
    }
}

Directory read_end(const uint8_t *b, size_t eocd) {
    const uint8_t *e = b + eocd;
    Directory dir{le(e + 10, 2), le(e + 16, 4), le(e + 12, 4), eocd};
    if (le(e + 4, 2) != 0 || le(e + 6, 2) != 0 || le(e + 8, 2) != dir.count) {
        zip_corrupt("archive split over several disks");
    }
    if (eocd >= kLocator64Size + kEnd64Size && le(b + eocd - kLocator64Size, 4) == kLocator64Sig) {
        read_end64(b, eocd, &dir);
    }
    /* Nothing between the central directory and the end records: else
     * miniz takes the gap for data prepended to the archive. */
    if (dir.offset > dir.end || dir.end - dir.offset != dir.size) {
        zip_corrupt("central directory does not end where the end records begin");
    }
    return dir;
}

}  // namespace

[[noreturn]] void zip_corrupt(const std::string &why) {
    throw std::runtime_error("ERR corrupt TorchScript archive: " + why);
}

std::string zip_printable(std::string_view name) {
    std::string out(name.substr(0, 100));
    for (char &c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            c = '?';
        }
    }
    return out;
}

bool zip_members(const uint8_t *b, size_t len, std::vector<ZipMember> *members) {
    members->clear();
    size_t eocd = len < kEndSize ? SIZE_MAX : find_end(b, len);
    if (eocd == SIZE_MAX) {
        return false;
    }
    Directory dir = read_end(b, eocd);
    size_t pos = dir.offset;
    for (uint64_t i = 0; i < dir.count; i++) {
        if (dir.end - pos < kEntrySize || le(b + pos, 4) != kEntrySig) {
            zip_corrupt("bad central directory entry");
        }
        size_t name_len = le(b + pos + 28, 2);
        size_t rest = name_len + le(b + pos + 30, 2) + le(b + pos + 32, 2);
        if (dir.end - pos - kEntrySize < rest) {
            zip_corrupt("central directory entry runs past the central directory");
        }
        members->push_back(ZipMember{
            std::string(reinterpret_cast<const char *>(b + pos + kEntrySize), name_len),
            static_cast<uint32_t>(le(b + pos + 16, 4)), pos});
        pos += kEntrySize + rest;
    }
    if (pos != dir.end) {
        zip_corrupt("central directory holds more than its " + std::to_string(dir.count) +
                    " entries");
    }
    return true;
}

namespace {

struct Extent {
    uint64_t comp;
    uint64_t uncomp;
    uint64_t local;
};

/* The sizes and offset as miniz's file_stat gives them: a 32-bit field of
 * all ones is replaced from the zip64 extra field (uncompressed size,
 * compressed size, local header offset, each only if all ones). */
Extent record_extent(const uint8_t *b, const ZipMember &m) {
    const uint8_t *e = b + m.entry;
    Extent x{le(e + 20, 4), le(e + 24, 4), le(e + 42, 4)};
    if (std::max({x.comp, x.uncomp, x.local}) != kMax32) {
        return x;
    }
    const uint8_t *p = e + kEntrySize + le(e + 28, 2);
    uint64_t left = le(e + 30, 2);
    while (left > 0) {
        uint64_t size = left >= 4 ? le(p + 2, 2) : 0;
        if (left < 4 || size + 4 > left) {
            zip_corrupt(zip_printable(m.name) + " has a bad extra field");
        }
        if (le(p, 2) == 1) {
            const uint8_t *f = p + 4;
            for (uint64_t *v : {&x.uncomp, &x.comp, &x.local}) {
                if (*v == kMax32) {
                    if (size < 8) {
                        zip_corrupt(zip_printable(m.name) + " has a bad zip64 extra field");
                    }
                    *v = le(f, 8);
                    f += 8;
                    size -= 8;
                }
            }
            break;
        }
        p += 4 + size;
        left -= 4 + size;
    }
    return x;
}

}  // namespace

std::string_view zip_stored_record(const uint8_t *b, size_t len, const ZipMember &m) {
    const uint8_t *e = b + m.entry;
    const std::string name = zip_printable(m.name);
    /* encrypted, patch, strong encryption, masked local headers */
    if (le(e + 8, 2) & (0x0001 | 0x0020 | 0x0040 | 0x2000)) {
        zip_corrupt(name + " is encrypted or a patch");
    }
    if (le(e + 10, 2) != 0) {
        zip_corrupt(name + " is compressed (libtorch stores it uncompressed)");
    }
    if (le(e + 38, 4) & 0x10) { /* the DOS directory attribute */
        zip_corrupt(name + " is marked as a directory");
    }
    Extent x = record_extent(b, m);
    if (x.comp != x.uncomp) {
        zip_corrupt(name + " is stored with two different sizes");
    }
    if (len < kLocalSize || x.local > len - kLocalSize || le(b + x.local, 4) != kLocalSig) {
        zip_corrupt(name + " has no local header");
    }
    uint64_t start = x.local + kLocalSize + le(b + x.local + 26, 2) + le(b + x.local + 28, 2);
    if (start > len || len - start < x.comp) {
        zip_corrupt(name + " runs past the end of the archive");
    }
    return std::string_view(reinterpret_cast<const char *>(b + start), x.comp);
}

}  // namespace rai_torch
