/*
 * script_depth.h - how deeply a TorchScript source nests, measured before
 * libtorch sees it.
 *
 * libtorch's parser and IR emitter recurse once per level of nesting, on
 * the thread that compiles: the main thread for SCRIPTSTORE, SCRIPTSET,
 * RDB load and RESTORE. A source a few thousand levels deep (5 KB of
 * brackets) overflows its 8 MB stack and kills the server. The Torch backend
 * refuses anything deeper than RAI_SCRIPT_MAX_DEPTH instead: a script's
 * source in script_create, before anything else, and the code inside model
 * archives (torch_archive.cpp). Pure C, no framework: unit-tested alone.
 *
 * The depth at a point of the source is a conservative sum of everything
 * that makes libtorch recurse there (measured on the main thread of a
 * redis-server with an 8 MB stack; the lowest crash was an unclosed-list
 * chain `[[[...` between 2,500 and 5,000 levels):
 *   - each indented block enclosing the line;
 *   - each `elif` before it in the same if-chain (an elif is a nested if);
 *   - each open bracket ( [ { around the point;
 *   - each operator character (+ - * / % @ & | ^ ~ < > = ! .) and each of
 *     the keywords and, or, not, if, else, in, is, lambda, seen since the
 *     enclosing bracket opened or the last comma inside it: chains such as
 *     `a+a+...`, `- - -x`, `x.t().t()...`, `x[0][0]...` and `a if c else
 *     b if c else ...` build trees that deep.
 * Strings and comments are skipped. RAI_SCRIPT_MAX_DEPTH = 256 stays under
 * a tenth of the lowest crash depth; no real script comes near it.
 */
#ifndef REDISAI_SCRIPT_DEPTH_H
#define REDISAI_SCRIPT_DEPTH_H

#include <stddef.h>

#define RAI_SCRIPT_MAX_DEPTH 256

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when src nests at most `limit` (at most RAI_SCRIPT_MAX_DEPTH) levels
 * deep; otherwise 0 with *line the 1-based line where it first went deeper. */
int ScriptDepth_Within(const char *src, size_t len, size_t limit, size_t *line);

#ifdef __cplusplus
}
#endif

#endif
