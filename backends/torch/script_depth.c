/*
 * script_depth.c - see script_depth.h. A small lexer over Python's surface
 * syntax: strings, comments, line continuations, indentation, brackets,
 * operators and a few keywords. It never rejects what it does not
 * understand (libtorch does that); it only measures. Plain C with no Redis
 * calls: the TORCH backend links it too, to measure the code inside model
 * archives.
 */
#include "torch/script_depth.h"

#include <string.h>

typedef struct Scan {
    const char *s;
    size_t len;
    size_t i;
    size_t line;
    size_t limit;
    /* Indentation: one entry per open block, with the elifs seen so far in
     * the if-chain at that level. */
    size_t widths[RAI_SCRIPT_MAX_DEPTH + 2];
    size_t elifs[RAI_SCRIPT_MAX_DEPTH + 2];
    size_t nblocks;
    size_t base; /* blocks + elifs enclosing the current logical line */
    /* Brackets: operators seen at each level since it opened or since its
     * last comma; level 0 is outside any bracket. */
    size_t ops[RAI_SCRIPT_MAX_DEPTH + 2];
    size_t nbrackets;
    size_t expr; /* open brackets + every ops[] entry */
    int prev_operand;
} Scan;

static int tooDeep(const Scan *sc) {
    return sc->base + sc->expr > sc->limit;
}

static int isIdentStart(unsigned char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static int isIdentChar(unsigned char c) {
    return isIdentStart(c) || (c >= '0' && c <= '9');
}

static int isOperatorChar(char c) {
    return c && strchr("+-*/%@&|^~<>=!.", c) != NULL;
}

static int isOperatorWord(const char *w, size_t n) {
    static const char *const words[] = {"and", "or", "not", "if", "else", "in", "is", "lambda"};
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
        if (strlen(words[k]) == n && !memcmp(words[k], w, n)) return 1;
    }
    return 0;
}

/* Skips a string literal starting at the quote at sc->i. */
static void skipString(Scan *sc) {
    char q = sc->s[sc->i];
    int triple = sc->i + 2 < sc->len && sc->s[sc->i + 1] == q && sc->s[sc->i + 2] == q;
    sc->i += triple ? 3 : 1;
    while (sc->i < sc->len) {
        char c = sc->s[sc->i];
        if (c == '\\') {
            if (sc->i + 1 < sc->len && sc->s[sc->i + 1] == '\n') sc->line++;
            sc->i += 2;
            continue;
        }
        if (c == '\n') {
            if (!triple) return; /* unterminated: libtorch will say so */
            sc->line++;
        }
        if (c == q && (!triple || (sc->i + 2 < sc->len && sc->s[sc->i + 1] == q &&
                                   sc->s[sc->i + 2] == q))) {
            sc->i += triple ? 3 : 1;
            return;
        }
        sc->i++;
    }
}

/* At the start of a logical line: measures its indentation and its first
 * word, and sets sc->base. Returns 0 when the blocks alone are too deep. */
static int startLine(Scan *sc) {
    size_t width = 0, j = sc->i;
    while (j < sc->len && (sc->s[j] == ' ' || sc->s[j] == '\t' || sc->s[j] == '\f')) {
        width = sc->s[j] == '\t' ? (width / 8 + 1) * 8 : sc->s[j] == '\f' ? 0 : width + 1;
        j++;
    }
    sc->i = j;
    if (j >= sc->len || sc->s[j] == '\n' || sc->s[j] == '\r' || sc->s[j] == '#') return 1;
    while (sc->nblocks > 1 && width < sc->widths[sc->nblocks - 1]) sc->nblocks--;
    if (width > sc->widths[sc->nblocks - 1]) {
        if (sc->nblocks > sc->limit) return 0;
        sc->widths[sc->nblocks] = width;
        sc->elifs[sc->nblocks] = 0;
        sc->nblocks++;
    }
    size_t n = 0;
    while (j + n < sc->len && isIdentChar((unsigned char)sc->s[j + n])) n++;
    size_t *chain = &sc->elifs[sc->nblocks - 1];
    if (n == 4 && !memcmp(sc->s + j, "elif", 4)) {
        (*chain)++;
    } else if (!(n == 4 && !memcmp(sc->s + j, "else", 4))) {
        *chain = 0;
    }
    sc->base = sc->nblocks - 1;
    for (size_t k = 0; k < sc->nblocks; k++) sc->base += sc->elifs[k];
    return !tooDeep(sc);
}

static void endLogicalLine(Scan *sc) {
    sc->nbrackets = 0;
    sc->ops[0] = 0;
    sc->expr = 0;
    sc->prev_operand = 0;
}

static void addOp(Scan *sc) {
    sc->ops[sc->nbrackets]++;
    sc->expr++;
}

int ScriptDepth_Within(const char *src, size_t len, size_t limit, size_t *line) {
    if (limit > RAI_SCRIPT_MAX_DEPTH) limit = RAI_SCRIPT_MAX_DEPTH;
    Scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.s = src;
    sc.len = len;
    sc.line = 1;
    sc.limit = limit;
    sc.nblocks = 1;
    int ok = startLine(&sc);
    while (ok && sc.i < sc.len) {
        unsigned char c = (unsigned char)sc.s[sc.i];
        if (c == '\n') {
            sc.line++;
            sc.i++;
            if (sc.nbrackets == 0) {
                endLogicalLine(&sc);
                ok = startLine(&sc);
            }
        } else if (c == '#') {
            while (sc.i < sc.len && sc.s[sc.i] != '\n') sc.i++;
        } else if (c == '\\') {
            if (sc.i + 1 < sc.len && sc.s[sc.i + 1] == '\n') sc.line++;
            sc.i += 2; /* a continuation, or a stray escape libtorch refuses */
        } else if (c == '\'' || c == '"') {
            skipString(&sc);
            sc.prev_operand = 1;
        } else if (isIdentStart(c)) {
            size_t n = 0;
            while (sc.i + n < sc.len && isIdentChar((unsigned char)sc.s[sc.i + n])) n++;
            if (isOperatorWord(sc.s + sc.i, n)) {
                addOp(&sc);
                sc.prev_operand = 0;
            } else {
                sc.prev_operand = 1;
            }
            sc.i += n;
        } else if (c >= '0' && c <= '9') {
            while (sc.i < sc.len && (isIdentChar((unsigned char)sc.s[sc.i]) || sc.s[sc.i] == '.')) {
                sc.i++;
            }
            sc.prev_operand = 1;
        } else if (c == '(' || c == '[' || c == '{') {
            if (sc.prev_operand) addOp(&sc); /* a call or subscript of what came before */
            if (sc.nbrackets + 1 > sc.limit) {
                ok = 0;
                break;
            }
            sc.nbrackets++;
            sc.ops[sc.nbrackets] = 0;
            sc.expr++;
            sc.prev_operand = 0;
            sc.i++;
        } else if (c == ')' || c == ']' || c == '}') {
            if (sc.nbrackets > 0) {
                sc.expr -= sc.ops[sc.nbrackets] + 1;
                sc.nbrackets--;
            }
            sc.prev_operand = 1;
            sc.i++;
        } else if (c == ',' || c == ';') {
            sc.expr -= sc.ops[sc.nbrackets];
            sc.ops[sc.nbrackets] = 0;
            sc.prev_operand = 0;
            sc.i++;
        } else if (isOperatorChar((char)c)) {
            addOp(&sc);
            sc.prev_operand = 0;
            sc.i++;
        } else {
            sc.i++; /* spaces, ':' and anything libtorch will judge */
        }
        if (tooDeep(&sc)) ok = 0;
    }
    if (!ok && line) *line = sc.line;
    return ok;
}
