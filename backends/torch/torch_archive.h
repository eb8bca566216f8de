/*
 * torch_archive.h - the checks of a TorchScript model archive before
 * libtorch reads it (torch_archive.cpp).
 */
#ifndef REDISAI_TORCH_ARCHIVE_H
#define REDISAI_TORCH_ARCHIVE_H

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstddef>
#include <memory>

namespace rai_torch {

/* Throws unless libtorch's reader opens the blob cleanly (a blob with no
 * end of central directory at all gets that reader's own error), every
 * parsed member matches its CRC-32 and the code in it nests no deeper than
 * the scripts' limit (script_depth.h). */
void verify_archive(const char *blob, size_t len,
                    std::shared_ptr<caffe2::serialize::ReadAdapterInterface> reader);

}  // namespace rai_torch

#endif
