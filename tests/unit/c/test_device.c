/*
 * test_device.c - module/core/device.c: the two parsing rules of device.h
 * (MODELSTORE's strict one, the backends' loose one) and the queue name.
 */
#include <string.h>

#include "core/device.h"
#include "unit.h"

/* Parses with rule and checks the outcome; kind and id only on success. */
static void expect(int (*rule)(const char *, RAI_DeviceKind *, int64_t *), const char *s,
                   int ok, RAI_DeviceKind kind, int64_t id, int line) {
    RAI_DeviceKind k = (RAI_DeviceKind)-7;
    int64_t i = -7;
    int got = rule(s, &k, &i);
    if (!Unit_CheckInt(got, ok, __FILE__, line, s)) return;
    if (!ok) return;
    Unit_CheckInt(k, kind, __FILE__, line, s);
    Unit_CheckInt(i, id, __FILE__, line, s);
}

#define STRICT(s, ok, kind, id) expect(Device_ParseStrict, (s), (ok), (kind), (id), __LINE__)
#define LOOSE(s, ok, kind, id) expect(Device_ParseLoose, (s), (ok), (kind), (id), __LINE__)

static void testStrict(void) {
    /* Both kinds, any case, with or without an id. */
    STRICT("CPU", 1, RAI_DEVICE_CPU, -1);
    STRICT("cpu", 1, RAI_DEVICE_CPU, -1);
    STRICT("GPU", 1, RAI_DEVICE_GPU, -1);
    STRICT("gPu", 1, RAI_DEVICE_GPU, -1);
    STRICT("CPU:0", 1, RAI_DEVICE_CPU, 0);
    STRICT("GPU:1", 1, RAI_DEVICE_GPU, 1);
    STRICT("gpu:12", 1, RAI_DEVICE_GPU, 12);
    STRICT("GPU:007", 1, RAI_DEVICE_GPU, 7);
    /* `GPU:` with no digits passes, as in 1.2: the default device. */
    STRICT("GPU:", 1, RAI_DEVICE_GPU, -1);
    STRICT("CPU:", 1, RAI_DEVICE_CPU, -1);
    /* Shorter than 10 characters: 9 pass, 10 do not. */
    STRICT("GPU:12345", 1, RAI_DEVICE_GPU, 12345);
    STRICT("GPU:123456", 0, 0, 0);
    STRICT("CPU:000000000000", 0, 0, 0);
    /* Refused forms. */
    STRICT("", 0, 0, 0);
    STRICT("CP", 0, 0, 0);
    STRICT("TPU", 0, 0, 0);
    STRICT("CPU0", 0, 0, 0);
    STRICT("CPUX", 0, 0, 0);
    STRICT("GPU1", 0, 0, 0);
    STRICT("CPU:-1", 0, 0, 0);
    STRICT("CPU:+1", 0, 0, 0);
    STRICT("CPU: 1", 0, 0, 0);
    STRICT("GPU:1a", 0, 0, 0);
    STRICT("GPU:0x1", 0, 0, 0);
    STRICT(" CPU", 0, 0, 0);
    STRICT("GPU::1", 0, 0, 0);
}

static void testLoose(void) {
    /* Anything starting with CPU is the CPU, its id ignored. */
    LOOSE("CPU", 1, RAI_DEVICE_CPU, -1);
    LOOSE("cpu", 1, RAI_DEVICE_CPU, -1);
    LOOSE("CPU:3", 1, RAI_DEVICE_CPU, -1);
    LOOSE("cpu-and-then-anything at all", 1, RAI_DEVICE_CPU, -1);
    /* GPU or GPU:<n>, any case, no length limit. */
    LOOSE("GPU", 1, RAI_DEVICE_GPU, -1);
    LOOSE("gpu", 1, RAI_DEVICE_GPU, -1);
    LOOSE("GPU:0", 1, RAI_DEVICE_GPU, 0);
    LOOSE("Gpu:5", 1, RAI_DEVICE_GPU, 5);
    LOOSE("GPU:1234567890", 1, RAI_DEVICE_GPU, 1234567890);
    /* Refused forms. */
    LOOSE("", 0, 0, 0);
    LOOSE("CP", 0, 0, 0);
    LOOSE("TPU", 0, 0, 0);
    LOOSE("GPU1", 0, 0, 0);
    LOOSE("GPUX", 0, 0, 0);
    LOOSE("GP", 0, 0, 0);
    LOOSE(" GPU", 0, 0, 0);
}

static void testQueueName(void) {
    char buf[16];
    Device_QueueName("cpu", buf, sizeof(buf));
    CHECK_STR(buf, "CPU");
    Device_QueueName("gPu:12", buf, sizeof(buf));
    CHECK_STR(buf, "GPU:12");
    /* CPU and CPU:0 stay different queues (docs/commands.md, "How commands run"). */
    char other[16];
    Device_QueueName("CPU:0", other, sizeof(other));
    Device_QueueName("CPU", buf, sizeof(buf));
    CHECK(strcmp(buf, other) != 0);
    /* Cut to the buffer, always terminated. */
    memset(buf, 'x', sizeof(buf));
    Device_QueueName("gpu:1234567890123456789", buf, 8);
    CHECK_STR(buf, "GPU:123");
    CHECK_INT(buf[8], 'x');
    Device_QueueName("cpu", buf, 1);
    CHECK_STR(buf, "");
    Device_QueueName("", buf, sizeof(buf));
    CHECK_STR(buf, "");
    /* Only ASCII letters change. */
    Device_QueueName("gpu:\xe9t\xc3", buf, sizeof(buf));
    CHECK_STR(buf, "GPU:\xe9T\xc3");
}

int main(void) {
    testStrict();
    testLoose();
    testQueueName();
    return Unit_Done("device");
}
