/*
 * tfl_guard.cpp - LiteRT's calls that can throw, each inside a try/catch.
 *
 * LiteRT is C++ behind a C API; a corrupted model has let a std::logic_error
 * out of a run (shared facts in docs/backends.md). Out of a C caller that
 * is std::terminate and the server gone; caught here it is an error reply.
 */
#include <cstdio>
#include <exception>

#include "tflite/tfl_api.h"

namespace {

template <typename Call>
TflStatus guarded(Call call, char *why, size_t whylen) {
    try {
        return call();
    } catch (const std::exception &e) {
        std::snprintf(why, whylen, "LiteRT threw: %s", e.what());
    } catch (...) {
        std::snprintf(why, whylen, "LiteRT threw an exception that is not a std::exception");
    }
    return TFL_STATUS_THREW;
}

} // namespace

extern "C" TflStatus Tfl_Compile(TflEnvironment env, TflModel model, TflOptions o,
                                 TflCompiledModel *cm, char *why, size_t whylen) {
    return guarded([&] { return tfl.CreateCompiledModel(env, model, o, cm); }, why, whylen);
}

extern "C" TflStatus Tfl_Run(TflCompiledModel cm, size_t nin, TflTensorBuffer *in, size_t nout,
                             TflTensorBuffer *out, char *why, size_t whylen) {
    return guarded([&] { return tfl.RunCompiledModel(cm, 0, nin, in, nout, out); }, why, whylen);
}

extern "C" TflStatus Tfl_CallOutputLayouts(TflCompiledModel cm, size_t n, TflLayout *layouts,
                                           char *why, size_t whylen) {
    return guarded([&] { return tfl.GetCompiledModelOutputTensorLayouts(cm, 0, n, layouts, false); },
                   why, whylen);
}

extern "C" TflStatus Tfl_CallInputLayout(TflCompiledModel cm, size_t i, TflLayout *layout,
                                         char *why, size_t whylen) {
    return guarded([&] { return tfl.GetCompiledModelInputTensorLayout(cm, 0, i, layout); }, why, whylen);
}
