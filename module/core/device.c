/*
 * device.c - device string parsing, see device.h.
 */
#include "core/device.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int Device_ParseStrict(const char *s, RAI_DeviceKind *kind, int64_t *id) {
    size_t len = strlen(s);
    if (len >= 10 || len < 3) return 0;
    if (!strncasecmp(s, "CPU", 3)) {
        *kind = RAI_DEVICE_CPU;
    } else if (!strncasecmp(s, "GPU", 3)) {
        *kind = RAI_DEVICE_GPU;
    } else {
        return 0;
    }
    *id = -1;
    if (len == 3) return 1;
    if (s[3] != ':') return 0;
    for (size_t i = 4; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return 0;
    }
    if (len > 4) *id = strtoll(s + 4, NULL, 10);
    return 1;
}

int Device_ParseLoose(const char *s, RAI_DeviceKind *kind, int64_t *id) {
    *id = -1;
    if (!strncasecmp(s, "CPU", 3)) {
        *kind = RAI_DEVICE_CPU;
        return 1;
    }
    if (!strcasecmp(s, "GPU")) {
        *kind = RAI_DEVICE_GPU;
        return 1;
    }
    if (!strncasecmp(s, "GPU:", 4)) {
        *kind = RAI_DEVICE_GPU;
        *id = strtoll(s + 4, NULL, 10);
        return 1;
    }
    return 0;
}

void Device_QueueName(const char *s, char *buf, size_t len) {
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++) buf[i] = (char)toupper((unsigned char)s[i]);
    buf[i] = '\0';
}
