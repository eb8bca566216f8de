/*
 * torch_archive.cpp - checks the CRC-32 of every member of a TorchScript
 * archive that libtorch parses (code, pickles, constants) before
 * torch::jit::load sees the archive.
 *
 * libtorch reads zip archives with miniz's CRC checks compiled out, so a
 * flipped bit inside a deflated code/ member reaches the TorchScript lexer
 * as garbage, and some garbage crashes it on the main thread (SIGSEGV in
 * torch::jit::StringCordView::find, found by tests/fuzz_ai.py). The CRCs of
 * the zip's central directory are compared with what libtorch's own reader
 * inflates. Tensor storages (data/N) are not parsed, only copied, and are
 * skipped: checking them would cost a pass over the weights.
 *
 * The code members are TorchScript source, compiled by the same recursive
 * parser as AI.SCRIPTSTORE's: they get the same nesting limit (see
 * script_depth.h), or a crafted archive with valid CRCs and code
 * 20,000 brackets deep would overflow the main thread's stack.
 */
#include "torch/torch_archive.h"

#include <caffe2/serialize/inline_container.h>

#include "torch/script_depth.h"

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rai_torch {
namespace {

[[noreturn]] void corrupt(const std::string &why) {
    throw std::runtime_error("ERR corrupt TorchScript archive: " + why);
}

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

uint64_t le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

struct Member {
    std::string name;
    uint32_t crc;
};

/* The central directory's names and CRCs, every offset bounds-checked. */
std::vector<Member> central_directory(const uint8_t *b, size_t len) {
    if (len < 22) {
        corrupt("too short for a zip archive");
    }
    size_t eocd = len - 22;
    size_t lowest = len > 22 + 65535 ? len - 22 - 65535 : 0;
    while (le(b + eocd, 4) != 0x06054b50u) {
        if (eocd == lowest) {
            corrupt("no end of central directory");
        }
        eocd--;
    }
    uint64_t count = le(b + eocd + 10, 2);
    uint64_t offset = le(b + eocd + 16, 4);
    if ((count == 0xFFFF || offset == 0xFFFFFFFFu) && eocd >= 20 &&
        le(b + eocd - 20, 4) == 0x07064b50u) {
        uint64_t z64 = le(b + eocd - 20 + 8, 8);
        if (z64 > len - 56 || le(b + z64, 4) != 0x06064b50u) {
            corrupt("bad zip64 end of central directory");
        }
        count = le(b + z64 + 32, 8);
        offset = le(b + z64 + 48, 8);
    }
    std::vector<Member> members;
    size_t pos = offset;
    for (uint64_t i = 0; i < count; i++) {
        if (pos > len || len - pos < 46 || le(b + pos, 4) != 0x02014b50u) {
            corrupt("bad central directory entry");
        }
        size_t name_len = le(b + pos + 28, 2);
        size_t extra_len = le(b + pos + 30, 2);
        size_t comment_len = le(b + pos + 32, 2);
        if (len - pos - 46 < name_len + extra_len + comment_len) {
            corrupt("central directory entry runs past the end");
        }
        members.push_back(Member{std::string(reinterpret_cast<const char *>(b + pos + 46), name_len),
                                 static_cast<uint32_t>(le(b + pos + 16, 4))});
        pos += 46 + name_len + extra_len + comment_len;
    }
    return members;
}

bool is_storage(const std::string &rel) {
    return rel.rfind("data/", 0) == 0 && rel.find('.') == std::string::npos;
}

}  // namespace

void verify_archive(const char *blob, size_t len,
                    std::shared_ptr<caffe2::serialize::ReadAdapterInterface> reader) {
    /* libtorch's reader first: a blob that is no archive at all gets
     * libtorch's own text, as RedisAI 1.2 replied (`PytorchStreamReader
     * failed reading zip archive: failed finding central directory`). Only
     * what it accepts is checked further. */
    caffe2::serialize::PyTorchStreamReader archive(reader);
    std::vector<Member> members = central_directory(reinterpret_cast<const uint8_t *>(blob), len);
    for (const Member &m : members) {
        size_t slash = m.name.find('/');
        std::string rel = slash == std::string::npos ? m.name : m.name.substr(slash + 1);
        if (rel.empty() || rel.back() == '/' || is_storage(rel) || !archive.hasRecord(rel)) {
            continue;
        }
        auto [data, size] = archive.getRecord(rel);
        const char *bytes = static_cast<const char *>(data.get());
        if (crc32(reinterpret_cast<const uint8_t *>(bytes), size) != m.crc) {
            corrupt(rel + " fails its CRC-32 check");
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
