/*
 * test_server.c - module/core/server.c (which servers the module runs on,
 * and the log line that refuses the others) and module/engine/noperm.c
 * (reading an ACL DRYRUN refusal in Redis 7.0's and in Redis 7.2+/Valkey's
 * words, and answering in the words learned). The DRYRUN texts are the ones
 * Redis 7.0.15 and Valkey 8.1.8 answer; the servers themselves are the
 * integration tests' (tests/compat/, tests/security/).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/messages.h"
#include "core/server.h"
#include "engine/noperm.h"
#include "unit.h"
#include "unit_shim.h"

/* --- the server: its version and its log --- */

static int version;
static char logged[1024];
static int log_lines;

static int stubVersion(void) {
    return version;
}

static void stubLog(RedisModuleCtx *ctx, const char *level, const char *fmt, ...) {
    (void)ctx, (void)level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logged, sizeof(logged), fmt, ap);
    va_end(ap);
    log_lines++;
}

/* Any non-NULL function will do for "the server has it". */
static void present(void) {}
#define HAVE(fn) fn = (__typeof__(fn))present

static void giveAclApi(void) {
    HAVE(RedisModule_GetClientUserNameById);
    HAVE(RedisModule_GetModuleUserFromUserName);
    HAVE(RedisModule_FreeModuleUser);
    HAVE(RedisModule_ACLCheckCommandPermissions);
    HAVE(RedisModule_ACLCheckKeyPermissions);
    HAVE(RedisModule_ACLAddLogEntry);
    HAVE(RedisModule_SetContextUser);
}

static int init(int v) {
    version = v;
    log_lines = 0;
    logged[0] = '\0';
    return Server_Init(NULL);
}

static void testServers(void) {
    RedisModule_Log = stubLog;
    RedisModule_GetServerVersion = stubVersion;

    /* Below 6.2: refused, one line naming the version and the reason. */
    CHECK(init(0x00060010) == REDISMODULE_ERR);
    CHECK_INT(log_lines, 1);
    CHECK_STR(logged, "RedisAI cannot run on this server (version 6.0.16): it needs Redis "
                           "6.2.0 or newer, or Valkey");
    CHECK_STR(Server_VersionText(), "6.0.16");
    /* A server too old to say (GetServerVersion arrived in 6.0.9). */
    RedisModule_GetServerVersion = NULL;
    CHECK(init(0) == REDISMODULE_ERR);
    CHECK(strstr(logged, "(version older than 6.0.9)") != NULL);
    RedisModule_GetServerVersion = stubVersion;

    /* 6.2 without the ACL API: loads, says once what it cannot do. */
    CHECK(init(0x0006020e) == REDISMODULE_OK);
    CHECK_STR(Server_VersionText(), "6.2.14");
    CHECK_INT(Server_HasAclApi(), 0);
    CHECK_INT(log_lines, 1);
    CHECK(strstr(logged, "server 6.2.14 has no module ACL API") != NULL);

    /* The API decides, not the number: Valkey says 7.2.4. One function
     * missing is no API. */
    giveAclApi();
    RedisModule_SetContextUser = NULL;
    CHECK(init(0x00070204) == REDISMODULE_OK);
    CHECK_INT(Server_HasAclApi(), 0);
    giveAclApi();
    CHECK(init(0x00070204) == REDISMODULE_OK);
    CHECK_INT(Server_HasAclApi(), 1);
    CHECK_INT(log_lines, 0);
}

/* --- ACL: the stubbed RedisModule_Call answers `queued` replies in turn,
 * then `reply` --- */

typedef struct Reply {
    int type;
    const char *text;
} Reply;

static Reply reply, queued[4];
static int nqueued, calls, replies_live;
static char called[512];

static RedisModuleCallReply *stubCall(RedisModuleCtx *ctx, const char *cmd, const char *fmt, ...) {
    (void)ctx;
    static Reply answer;
    /* The command and its C-string arguments, for the test to read. */
    size_t n = strlen(called);
    snprintf(called + n, sizeof(called) - n, "%s%s", n ? "; " : "", cmd);
    va_list ap;
    va_start(ap, fmt);
    for (const char *f = fmt; *f == 'c'; f++) {
        n = strlen(called);
        snprintf(called + n, sizeof(called) - n, " %s", va_arg(ap, const char *));
    }
    va_end(ap);
    answer = calls < nqueued ? queued[calls] : reply;
    calls++;
    replies_live++;
    return (RedisModuleCallReply *)&answer;
}

static int stubReplyType(RedisModuleCallReply *r) {
    return ((Reply *)r)->type;
}

static const char *stubReplyString(RedisModuleCallReply *r, size_t *len) {
    *len = strlen(((Reply *)r)->text);
    return ((Reply *)r)->text;
}

static void stubFreeReply(RedisModuleCallReply *r) {
    (void)r;
    replies_live--;
}

static RedisModuleString *stubCreateString(RedisModuleCtx *ctx, const char *p, size_t len) {
    (void)ctx;
    return UnitShim_String(p, len);
}

static NoPermKind dryrun(const char *text, char *object, size_t n) {
    reply = (Reply){REDISMODULE_REPLY_STRING, text};
    called[0] = '\0';
    NoPermVerdict v;
    NoPermKind kind = NoPerm_DryRun(NULL, NULL, NULL, 0, &v);
    object[0] = '\0';
    if (v.object != NULL) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(v.object, &len);
        snprintf(object, n, "%.*s", (int)len, p);
    }
    NoPerm_Clear(NULL, &v);
    return kind;
}

static void checkCommandText(RedisModuleString *user, const char *cmd, const char *want,
                             int line) {
    char *got = NoPerm_CommandText(user, cmd, strlen(cmd));
    Unit_CheckStr(got, want, __FILE__, line, cmd);
    RedisModule_Free(got);
}

static void testWords(void) {
    RedisModule_Call = stubCall;
    RedisModule_CallReplyType = stubReplyType;
    RedisModule_CallReplyStringPtr = stubReplyString;
    RedisModule_FreeCallReply = stubFreeReply;
    RedisModule_CreateString = stubCreateString;
    RedisModuleString *dev = UnitShim_String("dev", 3);
    char obj[128];

    /* Nothing learned yet: 7.0's words. */
    CHECK_STR(NoPerm_KeyText(), CALLER_NOPERM_KEY);
    checkCommandText(dev, "ai.config|list",
                     "NOPERM this user has no permissions to run the 'ai.config|list' command",
                     __LINE__);

    /* Redis 7.0.15's DRYRUN texts. */
    CHECK_INT(dryrun("This user has no permissions to run the 'acl|setuser' command", obj,
                          sizeof(obj)), NOPERM_COMMAND);
    CHECK_STR(obj, "acl|setuser");
    CHECK_STR(called, "ACL DRYRUN");
    CHECK_INT(dryrun("This user has no permissions to access the 'other' key", obj,
                          sizeof(obj)), NOPERM_KEY);
    CHECK_STR(obj, "other");
    CHECK_INT(dryrun("This user has no permissions to access the 'nochan' channel", obj,
                          sizeof(obj)), NOPERM_CHANNEL);
    CHECK_STR(obj, "nochan");
    CHECK_STR(NoPerm_KeyText(),
                   "NOPERM this user has no permissions to access one of the keys used as "
                   "arguments");
    CHECK_STR(NoPerm_ChannelText(), CALLER_NOPERM_CHANNEL);

    /* No verdict: allowed, an arity error, an error reply. Nothing learned. */
    CHECK_INT(dryrun("OK", obj, sizeof(obj)), NOPERM_NONE);
    CHECK_INT(dryrun("This user has no permissions", obj, sizeof(obj)), NOPERM_NONE);
    CHECK_INT(dryrun("Somebody has no permissions to run the 'x' command", obj, sizeof(obj)),
                   NOPERM_NONE);
    CHECK_INT(dryrun("This user has no permissions to run the 'x' thing", obj, sizeof(obj)),
                   NOPERM_NONE);
    reply = (Reply){REDISMODULE_REPLY_ERROR, "ERR wrong number of arguments for 'get' command"};
    NoPermVerdict v;
    CHECK_INT(NoPerm_DryRun(NULL, NULL, NULL, 0, &v), NOPERM_NONE);
    CHECK(v.object == NULL);
    CHECK_STR(NoPerm_KeyText(), CALLER_NOPERM_KEY);

    /* Valkey 8.1.8's (Redis 7.2+'s): learned, answered in them. */
    CHECK_INT(dryrun("User dev has no permissions to access the 'other' key", obj,
                          sizeof(obj)), NOPERM_KEY);
    CHECK_STR(obj, "other");
    CHECK_STR(NoPerm_KeyText(), "NOPERM No permissions to access a key");
    CHECK_STR(NoPerm_ChannelText(), "NOPERM No permissions to access a channel");
    checkCommandText(dev, "ai.config|loadbackend",
                     "NOPERM User dev has no permissions to run the 'ai.config|loadbackend' "
                     "command",
                     __LINE__);
    /* No user to name (Lua, a module's call): 7.0's words still. */
    checkCommandText(NULL, "ai.config|list",
                     "NOPERM this user has no permissions to run the 'ai.config|list' command",
                     __LINE__);
    CHECK_INT(dryrun("User dev has no permissions to run the 'set' command", obj,
                          sizeof(obj)), NOPERM_COMMAND);
    CHECK_STR(obj, "set");
    /* The object is read from both ends: quotes inside a key name stay. */
    CHECK_INT(dryrun("User dev has no permissions to access the 'it's' key", obj,
                          sizeof(obj)), NOPERM_KEY);
    CHECK_STR(obj, "it's");
    CHECK_INT(dryrun("User dev has no permissions to access the '' key", obj, sizeof(obj)),
                   NOPERM_KEY);
    CHECK_STR(obj, "");

    CHECK_INT(replies_live, 0);
    RedisModule_FreeString(NULL, dev);
}

/* NoPerm_Init: a probe user of its own, refused, deleted; one whose name is
 * taken is left alone. Run last: it changes the words learned. */
static void testInit(void) {
    char probe[64], want[256];
    snprintf(probe, sizeof(probe), "redisai-noperm-probe-%ld", (long)getpid());

    calls = 0, called[0] = '\0';
    queued[0] = (Reply){REDISMODULE_REPLY_ARRAY, ""}; /* GETUSER: taken */
    nqueued = 1;
    NoPerm_Init(NULL);
    snprintf(want, sizeof(want), "ACL GETUSER %s", probe);
    CHECK_STR(called, want);

    /* Redis 7.0's words at first (testWords learned 7.2's): the probe's
     * refusal teaches 7.2's again. */
    reply = (Reply){REDISMODULE_REPLY_STRING, "This user has no permissions to run the 'get' command"};
    CHECK_INT(dryrun(reply.text, want, sizeof(want)), NOPERM_COMMAND);
    CHECK_STR(NoPerm_KeyText(), CALLER_NOPERM_KEY);
    calls = 0, called[0] = '\0';
    queued[0] = (Reply){REDISMODULE_REPLY_NULL, ""};
    queued[1] = (Reply){REDISMODULE_REPLY_STRING, "OK"};
    queued[2] = (Reply){REDISMODULE_REPLY_STRING, ""};
    queued[3] = (Reply){REDISMODULE_REPLY_INTEGER, ""};
    nqueued = 4;
    snprintf(want, sizeof(want), "User %s has no permissions to run the 'get' command", probe);
    queued[2].text = want;
    NoPerm_Init(NULL);
    char seq[512];
    snprintf(seq, sizeof(seq), "ACL GETUSER %s; ACL SETUSER %s reset; ACL DRYRUN; ACL DELUSER %s",
             probe, probe, probe);
    CHECK_STR(called, seq);
    CHECK_STR(NoPerm_KeyText(), CALLER_NOPERM_KEY_72);
    nqueued = 0;
}

int main(void) {
    UnitShim_Init();
    testServers();
    testWords();
    testInit();
    CHECK_INT(replies_live, 0);
    CHECK_INT(UnitShim_Live(), 0);
    return Unit_Done("server");
}
