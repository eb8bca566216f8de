/*
 * test_script_depth.c - backends/torch/script_depth.c: each construct that
 * script_depth.h counts, at the limit (accepted) and one level over
 * (refused, with the line where it went over); strings and comments
 * skipped; the limit capped at RAI_SCRIPT_MAX_DEPTH.
 */
#include <stdlib.h>
#include <string.h>

#include "torch/script_depth.h"
#include "unit.h"

#define L 40 /* the limit most cases run under: small, even */

/* A growing source text. */
typedef struct Src {
    char *s;
    size_t len, cap;
} Src;

static void put(Src *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (b->s == NULL) abort();
    }
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

static void putN(Src *b, const char *s, size_t times) {
    for (size_t i = 0; i < times; i++) put(b, s);
}

static void reset(Src *b) {
    b->len = 0;
    if (b->s) b->s[0] = '\0';
}

/* Whether b nests at most limit deep; *line as the unit reports it, 0 when
 * within. */
static int within(const Src *b, size_t limit, size_t *line) {
    *line = 0;
    return ScriptDepth_Within(b->s ? b->s : "", b->len, limit, line);
}

/* b accepted under limit. */
#define OK(b, limit)                                                  \
    do {                                                              \
        size_t line_;                                                 \
        if (!CHECK(within((b), (limit), &line_))) {                   \
            fprintf(stderr, "    refused at line %zu\n", line_);      \
        }                                                             \
    } while (0)

/* b refused under limit, at line want_line. */
#define DEEP(b, limit, want_line)                                     \
    do {                                                              \
        size_t line_;                                                 \
        if (CHECK(!within((b), (limit), &line_))) CHECK_INT(line_, (want_line)); \
    } while (0)

/* A statement of n levels of ( [ or {, then closed: n deep. */
static void brackets(Src *b, const char *open, const char *close, size_t n) {
    reset(b);
    putN(b, open, n);
    put(b, "x");
    putN(b, close, n);
    put(b, "\n");
}

static void testBrackets(Src *b) {
    static const char *pairs[][2] = {{"(", ")"}, {"[", "]"}, {"{", "}"}};
    for (int k = 0; k < 3; k++) {
        brackets(b, pairs[k][0], pairs[k][1], L);
        OK(b, L);
        brackets(b, pairs[k][0], pairs[k][1], L + 1);
        DEEP(b, L, 1);
    }
    /* Mixed, and across lines: a newline inside brackets continues the
     * line; the line reported is the one of the bracket that went over. */
    reset(b);
    put(b, "y = 1\n");
    for (size_t i = 0; i < L + 1; i++) put(b, i % 3 == 0 ? "(\n" : i % 3 == 1 ? "[\n" : "{\n");
    put(b, "x\n");
    DEEP(b, L, 2 + L);
    /* Closing a bracket gives its levels back (the comma: a bracket right
     * after one would be a subscript, a level more). */
    reset(b);
    putN(b, "(", L);
    putN(b, ")", L);
    put(b, ", ");
    putN(b, "[", L);
    put(b, "x");
    putN(b, "]", L);
    put(b, "\n");
    OK(b, L);
    /* At the real limit. */
    brackets(b, "(", ")", RAI_SCRIPT_MAX_DEPTH);
    OK(b, RAI_SCRIPT_MAX_DEPTH);
    brackets(b, "(", ")", RAI_SCRIPT_MAX_DEPTH + 1);
    DEEP(b, RAI_SCRIPT_MAX_DEPTH, 1);
    /* Far deeper than the unit's own tables: refused, nothing overrun. */
    brackets(b, "[", "]", 20000);
    DEEP(b, RAI_SCRIPT_MAX_DEPTH, 1);
}

/* n nested blocks ("while x:" at indentation 0 .. n-1), then a statement
 * at indentation n: n deep, on line n + 1. */
static void blocks(Src *b, const char *indent, size_t n) {
    reset(b);
    for (size_t k = 0; k < n; k++) {
        putN(b, indent, k);
        put(b, "while x:\n");
    }
    putN(b, indent, n);
    put(b, "y\n");
}

static void testIndentation(Src *b) {
    blocks(b, " ", L);
    OK(b, L);
    blocks(b, " ", L + 1);
    DEEP(b, L, L + 2);
    /* A tab is a level as a space is. */
    blocks(b, "\t", L);
    OK(b, L);
    blocks(b, "\t", L + 1);
    DEEP(b, L, L + 2);
    /* Blank and comment lines, whatever their indentation, open no block. */
    reset(b);
    put(b, "while x:\n");
    putN(b, "                                        \n", 3);
    putN(b, "                                                  # deep comment\n", 3);
    put(b, " y\n");
    OK(b, 1);
    /* Leaving blocks gives their levels back. */
    blocks(b, " ", L);
    Src twice = {0};
    put(&twice, b->s);
    put(&twice, "z\n");
    put(&twice, b->s);
    OK(&twice, L);
    free(twice.s);
    /* At the real limit. */
    blocks(b, " ", RAI_SCRIPT_MAX_DEPTH);
    OK(b, RAI_SCRIPT_MAX_DEPTH);
    blocks(b, " ", RAI_SCRIPT_MAX_DEPTH + 1);
    DEEP(b, RAI_SCRIPT_MAX_DEPTH, RAI_SCRIPT_MAX_DEPTH + 2);
    blocks(b, " ", 2000);
    DEEP(b, RAI_SCRIPT_MAX_DEPTH, RAI_SCRIPT_MAX_DEPTH + 2);
}

/* "if a:" then m elifs, each with a body: the body after the k-th elif is
 * k + 1 deep (k elifs, one block), on line 2k + 2. */
static void elifs(Src *b, size_t m) {
    reset(b);
    put(b, "if a:\n x\n");
    for (size_t k = 0; k < m; k++) put(b, "elif b:\n x\n");
}

static void testElif(Src *b) {
    elifs(b, L - 1);
    OK(b, L);
    elifs(b, L);
    DEEP(b, L, 2 * L + 2);
    /* `else` continues the chain: its body in brackets is one deeper. */
    elifs(b, L - 1);
    put(b, "else:\n (x)\n");
    DEEP(b, L, 2 * L + 2);
    /* Any other statement ends it. */
    elifs(b, L - 1);
    put(b, "y\n (x)\n");
    OK(b, L);
    elifs(b, L - 1);
    put(b, "y\n");
    Src chain = {0};
    elifs(&chain, L - 1);
    put(b, chain.s);
    free(chain.s);
    OK(b, L);
}

/* "a" and n times "<op>a": n deep. */
static void chain(Src *b, const char *op, size_t n) {
    reset(b);
    put(b, "a");
    putN(b, op, n);
    put(b, "\n");
}

static void testOperators(Src *b) {
    static const char chars[] = "+-*/%@&|^~<>=!.";
    for (const char *c = chars; *c; c++) {
        char op[3] = {*c, 'a', '\0'};
        chain(b, op, L);
        if (!CHECK(within(b, L, &(size_t){0}))) fprintf(stderr, "    operator %c\n", *c);
        chain(b, op, L + 1);
        if (!CHECK(!within(b, L, &(size_t){0}))) fprintf(stderr, "    operator %c\n", *c);
    }
    static const char *words[] = {" and a", " or a", " in a", " is a", " if a", " else a"};
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
        chain(b, words[k], L);
        if (!CHECK(within(b, L, &(size_t){0}))) fprintf(stderr, "    \"%s\"\n", words[k]);
        chain(b, words[k], L + 1);
        if (!CHECK(!within(b, L, &(size_t){0}))) fprintf(stderr, "    \"%s\"\n", words[k]);
    }
    /* Prefix words. */
    static const char *prefixes[] = {"not ", "lambda: ", "- ", "~"};
    for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++) {
        reset(b);
        putN(b, prefixes[k], L);
        put(b, "x\n");
        if (!CHECK(within(b, L, &(size_t){0}))) fprintf(stderr, "    \"%s\"\n", prefixes[k]);
        reset(b);
        putN(b, prefixes[k], L + 1);
        put(b, "x\n");
        if (!CHECK(!within(b, L, &(size_t){0}))) fprintf(stderr, "    \"%s\"\n", prefixes[k]);
    }
    /* Words that only contain a keyword, keywords in another case, and
     * numbers with a point are operands. */
    chain(b, " android island iffy notable lambdas isle ors elsewhere", 100);
    OK(b, L);
    chain(b, " AND a", 100);
    OK(b, L);
    chain(b, " 1.5e3 0.25", 100);
    OK(b, L);
}

/* The chains script_depth.h names. */
static void testChains(Src *b) {
    /* x[0][0]...: each subscript a level, its bracket one more while open:
     * n subscripts are n + 1 deep. */
    chain(b, "[0]", L - 1);
    OK(b, L);
    chain(b, "[0]", L);
    DEEP(b, L, 1);
    /* x.t().t()...: a '.' and a call per step, the last call's bracket
     * open: n steps are 2n + 1 deep. */
    chain(b, ".t()", (L - 1) / 2);
    OK(b, L - 1);
    chain(b, ".t()", (L - 1) / 2 + 1);
    DEEP(b, L - 1, 1);
    /* a if c else b if c else ...: two levels per step. */
    chain(b, " if c else a", L / 2);
    OK(b, L);
    chain(b, " if c else a", L / 2);
    b->len--; /* the newline */
    put(b, " if c\n");
    DEEP(b, L, 1);
    /* A backslash continues the logical line: the line reported is the
     * physical line where it went over. */
    reset(b);
    put(b, "y = 0\n");
    put(b, "a");
    putN(b, " + \\\na", L);
    put(b, "\n");
    OK(b, L);
    reset(b);
    put(b, "y = 0\n");
    put(b, "a");
    putN(b, " + \\\na", L + 1);
    put(b, "\n");
    DEEP(b, L, L + 2);
}

/* Commas and semicolons end a run of operators; closing a bracket drops
 * the operators inside it. */
static void testSeparators(Src *b) {
    /* f(: a call (1) and its bracket (1); then L - 2 operators per
     * argument: L deep however many arguments. */
    reset(b);
    put(b, "f(");
    for (int k = 0; k < 10; k++) {
        put(b, k ? ", a" : "a");
        putN(b, "+a", L - 2);
    }
    put(b, ")\n");
    OK(b, L);
    /* The same with '+' for ',' is one long chain. */
    reset(b);
    put(b, "f(");
    for (int k = 0; k < 10; k++) {
        put(b, k ? "+a" : "a");
        putN(b, "+a", L - 2);
    }
    put(b, ")\n");
    DEEP(b, L, 1);
    /* One statement of L operators after another, on one line. */
    reset(b);
    for (int k = 0; k < 5; k++) {
        put(b, "a");
        putN(b, "+a", L);
        put(b, "; ");
    }
    put(b, "\n");
    OK(b, L);
    /* Bracketed groups of L - 1 operators, one after another. */
    reset(b);
    for (int k = 0; k < 5; k++) {
        put(b, "(a");
        putN(b, "+a", L - 1);
        put(b, "), ");
    }
    put(b, "\n");
    OK(b, L);
    /* A newline outside brackets ends the statement. */
    reset(b);
    for (int k = 0; k < 5; k++) {
        put(b, "a");
        putN(b, "+a", L);
        put(b, "\n");
    }
    OK(b, L);
}

static void testSkipped(Src *b) {
    static const char *quotes[] = {"'", "\""};
    for (int k = 0; k < 2; k++) {
        reset(b);
        put(b, "s = ");
        put(b, quotes[k]);
        putN(b, "(+[", 300);
        put(b, quotes[k]);
        put(b, "\n");
        OK(b, L);
        /* An escaped quote does not end the string. */
        reset(b);
        put(b, "s = ");
        put(b, quotes[k]);
        put(b, "\\");
        put(b, quotes[k]);
        putN(b, "(+[", 300);
        put(b, quotes[k]);
        put(b, "\n");
        OK(b, L);
    }
    /* Triple-quoted strings span lines, which still count. */
    reset(b);
    put(b, "s = '''\n");
    putN(b, "((((((((((\n", 5);
    put(b, "'''\nt = \"\"\"\n");
    putN(b, "))))[[[[((((\n", 5);
    put(b, "\"\"\"\n");
    OK(b, L);
    brackets(b, "(", ")", L + 1);
    Src deep = {0};
    put(&deep, "s = '''\n\n\n'''\n");
    put(&deep, b->s);
    DEEP(&deep, L, 5);
    free(deep.s);
    /* A string left open ends with its line. */
    reset(b);
    put(b, "s = 'open\n");
    putN(b, "(", L + 1);
    put(b, "\n");
    DEEP(b, L, 2);
    /* Comments. */
    reset(b);
    put(b, "x = 1 # ");
    putN(b, "(+[", 300);
    put(b, "\n# ");
    putN(b, "{-", 300);
    put(b, "\ny = 2\n");
    OK(b, L);
    reset(b);
    put(b, "# one\n# two\n");
    putN(b, "(", L + 1);
    put(b, "\n");
    DEEP(b, L, 3);
}

static void testLimit(Src *b) {
    /* Capped at RAI_SCRIPT_MAX_DEPTH whatever the caller asks. */
    brackets(b, "(", ")", RAI_SCRIPT_MAX_DEPTH);
    OK(b, 100000);
    brackets(b, "(", ")", RAI_SCRIPT_MAX_DEPTH + 1);
    DEEP(b, 100000, 1);
    DEEP(b, (size_t)-1, 1);
    /* Limit 0: only a flat source. */
    reset(b);
    put(b, "x\ny\n");
    OK(b, 0);
    brackets(b, "(", ")", 1);
    DEEP(b, 0, 1);
    /* Empty and all-blank sources. */
    reset(b);
    OK(b, 0);
    put(b, "\n\n   \n\t\n");
    OK(b, 0);
    /* line may be NULL. */
    brackets(b, "(", ")", L + 1);
    CHECK(!ScriptDepth_Within(b->s, b->len, L, NULL));
    /* Only len bytes are read: the deep tail past len is not seen. */
    reset(b);
    put(b, "x\n");
    putN(b, "(", L + 1);
    CHECK(ScriptDepth_Within(b->s, 2, L, NULL));
}

/* A real script of the test suite's kind comes nowhere near. */
static void testRealScript(Src *b) {
    reset(b);
    put(b,
        "def add_list(a: Tensor, rest: List[Tensor]):\n"
        "    s = a\n"
        "    for t in rest:\n"
        "        s = s + t\n"
        "    return s\n"
        "\n"
        "def pick(tensors: List[Tensor], keys: List[str], args: List[str]):\n"
        "    if len(args) == 0:\n"
        "        return tensors[0]\n"
        "    elif args[0] == 'neg':\n"
        "        return -tensors[0]\n"
        "    else:\n"
        "        return tensors[0].reshape([1, -1]).t() * 2 + 1  # a comment (((\n"
        "\n"
        "def redis_calls(key: str):\n"
        "    redis.execute(\"SET\", key, \"1\")\n"
        "    return redis.asList(redis.execute(\"GET\", key))\n");
    OK(b, 16);
}

int main(void) {
    Src b = {0};
    testBrackets(&b);
    testIndentation(&b);
    testElif(&b);
    testOperators(&b);
    testChains(&b);
    testSeparators(&b);
    testSkipped(&b);
    testLimit(&b);
    testRealScript(&b);
    free(b.s);
    return Unit_Done("script_depth");
}
