/*
 * ort_external.h - finding tensors with external data in a serialized ONNX
 * ModelProto, before ONNX Runtime sees it.
 *
 * ORT resolves external data against the current directory when a model
 * comes from memory: it would stat and read files of the server's host on a
 * client's say-so. RedisAI refuses such models, so the backend scans the
 * bytes itself and never lets ORT open anything.
 */
#ifndef REDISAI_ORT_EXTERNAL_H
#define REDISAI_ORT_EXTERNAL_H

#include <stddef.h>

/* 1 if some tensor reachable from the model (graph and subgraph
 * initializers, sparse initializers, tensor attributes of nodes, functions,
 * training graphs) has data_location EXTERNAL or an external_data entry.
 * 0 otherwise, including for bytes that are not a valid protobuf: ORT's
 * parser rejects those with its own message. */
int ort_has_external_data(const void *blob, size_t len);

#endif
