/*
 * torch_archive.cpp - the checks of a TorchScript archive before libtorch
 * reads it: that libtorch's reader opens it cleanly, then the CRC-32 and
 * the nesting of every member that libtorch parses.
 *
 * Opening. caffe2::serialize::PyTorchStreamReader's constructor (which
 * torch::jit::load builds too) starts miniz's zip reader, whose state it
 * allocates (mz_zip_reader_init), and then reads records of its own. When
 * one of those steps throws, the constructor leaves that state allocated:
 * the object was never constructed, so its destructor does not run. Every
 * such blob leaked 150 to 800 bytes (200 bit-flipped copies of a small
 * model, 4,921 bytes), which any client allowed to store models could
 * repeat. So the blob reaches libtorch's reader only when it has no end of
 * central directory at all (miniz stops before it allocates, and the client
 * gets libtorch's text, as from RedisAI 1.2) or when every step after
 * mz_zip_reader_init is sure to succeed (check_reader_records).
 *
 * CRC. libtorch reads zip archives with miniz's CRC checks compiled out,
 * so a flipped bit inside a deflated code/ member reaches the TorchScript
 * lexer as garbage, and some garbage crashes it on the main thread (SIGSEGV
 * in torch::jit::StringCordView::find, found by tests/fuzz_ai.py). The CRCs
 * of the zip's central directory are compared with what libtorch's own
 * reader inflates. Tensor storages (data/N) are not parsed, only copied,
 * and are skipped: checking them would cost a pass over the weights.
 *
 * The code members are TorchScript source, compiled by the same recursive
 * parser as AI.SCRIPTSTORE's: they get the same nesting limit (see
 * script_depth.h), or a crafted archive with valid CRCs and code
 * 20,000 brackets deep would overflow the main thread's stack.
 */
#include "torch/torch_archive.h"

#include <caffe2/serialize/inline_container.h>

#include "torch/script_depth.h"
#include "torch/zip_layout.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rai_torch {
namespace {

uint32_t crc32(const uint8_t *p, size_t n) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) {
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            }
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

bool is_storage(const std::string &rel) {
    return rel.rfind("data/", 0) == 0 && rel.find('.') == std::string::npos;
}

/* ASCII letters folded to lower case: miniz looks names up that way. */
std::string folded(std::string_view name) {
    std::string out(name);
    for (char &c : out) {
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
    }
    return out;
}

/* The members' names, folded. Unique, so that miniz's binary search finds
 * the member this check read, and without NUL bytes, which would cut the
 * names libtorch builds from the first one. */
std::vector<std::string> folded_names(const std::vector<ZipMember> &members) {
    std::vector<std::string> names;
    for (const ZipMember &m : members) {
        if (m.name.find('\0') != std::string::npos) {
            zip_corrupt("a member name holds a NUL byte");
        }
        names.push_back(folded(m.name));
    }
    std::vector<std::string_view> sorted(names.begin(), names.end());
    std::sort(sorted.begin(), sorted.end());
    auto twin = std::adjacent_find(sorted.begin(), sorted.end());
    if (twin != sorted.end()) {
        zip_corrupt("two members named " + zip_printable(*twin) + " (letter case aside)");
    }
    return names;
}

/* std::stoull reads leading digits; libtorch reads versions kMin..kMax. */
void check_version(std::string_view text, const ZipMember &m) {
    using caffe2::serialize::kMaxSupportedFileFormatVersion;
    using caffe2::serialize::kMinSupportedFileFormatVersion;
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        digits++;
    }
    if (digits == 0) {
        zip_corrupt(zip_printable(m.name) + " is not a number");
    }
    uint64_t v = 0;
    for (size_t i = 0; i < digits && v <= kMaxSupportedFileFormatVersion; i++) {
        v = v * 10 + static_cast<uint64_t>(text[i] - '0');
    }
    if (v < kMinSupportedFileFormatVersion || v > kMaxSupportedFileFormatVersion) {
        std::string shown(text.substr(0, std::min<size_t>(digits, 32)));
        shown += digits > 32 ? "..." : "";
        zip_corrupt("unsupported version " + shown + " in " + zip_printable(m.name) +
                    " (libtorch reads " + std::to_string(kMinSupportedFileFormatVersion) +
                    " to " + std::to_string(kMaxSupportedFileFormatVersion) + ")");
    }
}

/* What PyTorchStreamReader's constructor reads once miniz's reader has
 * started: at least one member; the first one's folder, the archive's
 * name; <name>/.data/serialization_id whole if there is one; then
 * <name>/.data/version, or else <name>/version, whole, as a number. */
void check_reader_records(const uint8_t *b, size_t len, const std::vector<ZipMember> &members) {
    if (members.empty()) {
        zip_corrupt("no members");
    }
    std::vector<std::string> names = folded_names(members);
    size_t slash = names[0].find('/');
    if (slash == std::string::npos) {
        zip_corrupt("the first member, " + zip_printable(members[0].name) + ", is not in a folder");
    }
    std::string folder = names[0].substr(0, slash + 1);
    auto find = [&](const char *rel) -> const ZipMember * {
        auto it = std::find(names.begin(), names.end(), folder + rel);
        return it == names.end() ? nullptr : &members[static_cast<size_t>(it - names.begin())];
    };
    if (const ZipMember *id = find(".data/serialization_id")) {
        zip_stored_record(b, len, *id);
    }
    const ZipMember *version = find(".data/version");
    if (!version) {
        version = find("version");
    }
    if (!version) {
        zip_corrupt("no version record");
    }
    check_version(zip_stored_record(b, len, *version), *version);
}

}  // namespace

void verify_archive(const char *blob, size_t len,
                    std::shared_ptr<caffe2::serialize::ReadAdapterInterface> reader) {
    const uint8_t *b = reinterpret_cast<const uint8_t *>(blob);
    std::vector<ZipMember> members;
    if (!zip_members(b, len, &members)) {
        /* No archive at all: libtorch's own text, as RedisAI 1.2 replied
         * (`PytorchStreamReader failed reading zip archive: failed finding
         * central directory`); miniz refuses it before allocating. */
        caffe2::serialize::PyTorchStreamReader refused(reader);
        zip_corrupt("no end of central directory");
    }
    check_reader_records(b, len, members);
    caffe2::serialize::PyTorchStreamReader archive(reader);
    for (const ZipMember &m : members) {
        size_t slash = m.name.find('/');
        std::string rel = slash == std::string::npos ? m.name : m.name.substr(slash + 1);
        if (rel.empty() || rel.back() == '/' || is_storage(rel) || !archive.hasRecord(rel)) {
            continue;
        }
        auto [data, size] = archive.getRecord(rel);
        const char *bytes = static_cast<const char *>(data.get());
        if (crc32(reinterpret_cast<const uint8_t *>(bytes), size) != m.crc) {
            zip_corrupt(rel + " fails its CRC-32 check");
        }
        size_t line = 0;
        if (rel.size() > 3 && rel.compare(rel.size() - 3, 3, ".py") == 0 &&
            !ScriptDepth_Within(bytes, size, RAI_SCRIPT_MAX_DEPTH, &line)) {
            throw std::runtime_error("ERR TorchScript model code nests deeper than " +
                                     std::to_string(RAI_SCRIPT_MAX_DEPTH) + " levels (" + rel +
                                     " line " + std::to_string(line) + ")");
        }
    }
}

}  // namespace rai_torch
