/*
 * torch_script.h - the script members of the PyTorch backend's descriptor
 * (torch_script.cpp).
 */
#ifndef REDISAI_TORCH_SCRIPT_H
#define REDISAI_TORCH_SCRIPT_H

#include "redisai/backend_abi.h"

namespace rai_torch {

void *script_create(const RAI_ScriptSpec *spec, RAI_Error *err);
void script_free(void *script);
int script_run(void *script, const RAI_RunInfo *info, const RAI_ScriptCall *call,
               RAI_Tensor **outputs, RAI_Error *err);

}  // namespace rai_torch

#endif
