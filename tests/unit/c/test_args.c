/*
 * test_args.c - module/commands/args.h: keywords match case-insensitively
 * and whole (docs/commands.md, "Conventions"). The module strings are the shim's.
 */
#include <string.h>

#include "commands/args.h"
#include "unit.h"
#include "unit_shim.h"

static int tokenIs(const char *arg, const char *word) {
    RedisModuleString *s = UnitShim_String(arg, strlen(arg));
    int is = Args_TokenIs(s, word);
    RedisModule_FreeString(NULL, s);
    return is;
}

int main(void) {
    UnitShim_Init();
    CHECK(tokenIs("BLOB", "BLOB"));
    CHECK(tokenIs("blob", "BLOB"));
    CHECK(tokenIs("bLoB", "BLOB"));
    CHECK(tokenIs("values", "VALUES"));
    CHECK(tokenIs("BLOB", "blob"));
    CHECK(!tokenIs("BLO", "BLOB"));
    CHECK(!tokenIs("BLOBS", "BLOB"));
    CHECK(!tokenIs("", "BLOB"));
    CHECK(!tokenIs("BLOB", ""));
    CHECK(tokenIs("", ""));
    CHECK(!tokenIs(" BLOB", "BLOB"));
    CHECK(!tokenIs("VALUES", "BLOB"));
    CHECK(!tokenIs("INPUTS", "OUTPUTS"));
    CHECK(tokenIs("|>", "|>"));
    CHECK(tokenIs("KEYS", "keys"));
    return Unit_Done("args");
}
