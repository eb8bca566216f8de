/*
 * host_api.h - the table of core functions lent to every backend
 * (RAI_HostApi of backend_abi.h).
 */
#ifndef REDISAI_HOST_API_H
#define REDISAI_HOST_API_H

#include "redisai/backend_abi.h"

const RAI_HostApi *HostApi_Get(void);

#endif
