/*
 * zip_layout.h - the zip structure of a TorchScript archive as libtorch's
 * zip reader (its bundled miniz) will see it, read before that reader sees
 * the blob (zip_layout.cpp). No framework header: pure parsing.
 *
 * Only one layout is accepted, narrower than miniz's: the zip64 end record
 * (if any) sits right before its locator, the central directory ends where
 * the end records begin (nothing prepended), one disk, and the entries fill
 * the central directory exactly. So whenever miniz starts reading such a
 * blob, it lists the same members in the same order.
 */
#ifndef REDISAI_TORCH_ZIP_LAYOUT_H
#define REDISAI_TORCH_ZIP_LAYOUT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rai_torch {

/* A central directory entry, fields as written there (32-bit sizes). */
struct ZipMember {
    std::string name;
    uint32_t crc;
    size_t entry; /* offset of its central directory entry in the blob */
};

/* Throws std::runtime_error("ERR corrupt TorchScript archive: <why>"). */
[[noreturn]] void zip_corrupt(const std::string &why);

/* A member name as an error text may show it: control bytes as '?', at
 * most 100 bytes. */
std::string zip_printable(std::string_view name);

/* The members in central directory order. False, with nothing listed,
 * when no end of central directory signature is in the blob at all (then
 * miniz finds none either). Throws (zip_corrupt) on any other layout than
 * the one above. */
bool zip_members(const uint8_t *blob, size_t len, std::vector<ZipMember> *members);

/* The bytes of a member that libtorch's reader reads whole while it is
 * constructed (its version, its serialization id). Throws unless miniz
 * extracts it without an error: stored (not deflated, not encrypted, not a
 * patch, not a directory), sizes that agree, a local header in the blob
 * and the data after it too. */
std::string_view zip_stored_record(const uint8_t *blob, size_t len, const ZipMember &m);

}  // namespace rai_torch

#endif
