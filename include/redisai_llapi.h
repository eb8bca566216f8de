/* The LLAPI header moved to include/redisai/llapi.h; this path stays for existing clients. */
#include "redisai/llapi.h"
