/*
 * tfl_instance.c - a model's positional interface, and compiled instances
 * with 64-byte-aligned buffers of the model's shapes.
 */
#define _GNU_SOURCE
#include "tflite/tfl_instance.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tflite/tfl_memory.h"
#include "tflite/tfl_read.h"

static int indexOf(TflSignature sig, int input, TflTensor t, size_t n, size_t *out) {
    for (size_t k = 0; k < n; k++) {
        TflTensor s = NULL;
        TflStatus st = input ? tfl.GetSignatureInputTensorByIndex(sig, k, &s)
                             : tfl.GetSignatureOutputTensorByIndex(sig, k, &s);
        if (st == 0 && s == t) {
            *out = k;
            return 0;
        }
    }
    return -1;
}

/* Ports of one side: the subgraph's order, each found in the signature. */
static int readSide(TflSignature sig, TflSubgraph sg, int input, size_t *count, TflPort **ports,
                    char *why, size_t whylen) {
    const char *side = input ? "input" : "output";
    size_t n = 0, nsig = 0;
    TflStatus st = input ? tfl.GetNumSubgraphInputs(sg, &n) : tfl.GetNumSubgraphOutputs(sg, &n);
    if (st == 0) st = input ? tfl.GetNumSignatureInputs(sig, &nsig) : tfl.GetNumSignatureOutputs(sig, &nsig);
    if (st != 0) {
        snprintf(why, whylen, "cannot count the model's %ss (%s)", side, Tfl_StatusText(st));
        return -1;
    }
    if (n != nsig) {
        snprintf(why, whylen, "the model's signature has %zu %ss, its subgraph %zu", nsig, side, n);
        return -1;
    }
    TflPort *p = calloc(n ? n : 1, sizeof(*p));
    if (p == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        TflTensor t = NULL;
        st = input ? tfl.GetSubgraphInput(sg, i, &t) : tfl.GetSubgraphOutput(sg, i, &t);
        if (st != 0 || indexOf(sig, input, t, n, &p[i].sig) != 0) {
            snprintf(why, whylen, "%s %zu of the subgraph is not in the model's signature", side, i);
            free(p);
            return -1;
        }
        int type_id = -1;
        if (tfl.GetTensorTypeId(t, &type_id) != 0 || type_id != TFL_TENSOR_RANKED) {
            snprintf(why, whylen, "%s %zu has no fixed rank", side, i);
            free(p);
            return -1;
        }
        TflRankedType rt;
        st = Tfl_RankedType(t, &rt, why, whylen);
        if (st != 0) {
            if (st != -2) snprintf(why, whylen, "cannot read the type of %s %zu (%s)", side, i, Tfl_StatusText(st));
            free(p);
            return -1;
        }
        p[i].type = rt.element_type;
        const char *name = NULL;
        p[i].name = tfl.GetTensorName(t, &name) == 0 && name ? name : "";
    }
    *count = n;
    *ports = p;
    return 0;
}

int TflIface_Read(TflModel model, TflIface *io, char *why, size_t whylen) {
    memset(io, 0, sizeof(*io));
    size_t nsig = 0;
    TflSignature sig = NULL;
    TflSubgraph sg = NULL;
    TflStatus st = tfl.GetNumModelSignatures(model, &nsig);
    if (st == 0 && nsig == 0) {
        snprintf(why, whylen, "the model has no signature");
        return -1;
    }
    if (st == 0) st = tfl.GetModelSignature(model, 0, &sig);
    if (st == 0) st = tfl.GetSignatureSubgraph(sig, &sg);
    if (st != 0) {
        snprintf(why, whylen, "cannot read the model's signature (%s)", Tfl_StatusText(st));
        return -1;
    }
    if (readSide(sig, sg, 1, &io->nin, &io->in, why, whylen) != 0) return -1;
    if (readSide(sig, sg, 0, &io->nout, &io->out, why, whylen) != 0) {
        TflIface_Free(io);
        return -1;
    }
    return 0;
}

void TflIface_Free(TflIface *io) {
    free(io->in);
    free(io->out);
    memset(io, 0, sizeof(*io));
}

size_t Tfl_LayoutElements(const TflLayout *l) {
    size_t n = 1;
    for (int d = 0; d < TFL_LAYOUT_RANK(l); d++) n *= l->dims[d] > 0 ? (size_t)l->dims[d] : 0;
    return n;
}

static void freeBuffers(TflInstance *in) {
    for (size_t i = 0; i < in->nin; i++) {
        if (in->in_buf[i]) tfl.DestroyTensorBuffer(in->in_buf[i]);
        Tfl_BufferFree(in->in_mem[i], in->in_bytes[i]);
        in->in_buf[i] = NULL;
        in->in_mem[i] = NULL;
    }
    for (size_t i = 0; i < in->nout; i++) {
        if (in->out_buf[i]) tfl.DestroyTensorBuffer(in->out_buf[i]);
        Tfl_BufferFree(in->out_mem[i], in->out_bytes[i]);
        in->out_buf[i] = NULL;
        in->out_mem[i] = NULL;
    }
}

void TflInstance_Free(TflInstance *in) {
    if (in == NULL) return;
    if (in->in_buf) freeBuffers(in);
    if (in->cm) tfl.DestroyCompiledModel(in->cm);
    free(in->in_layout);
    free(in->out_layout);
    free(in->in_mem);
    free(in->out_mem);
    free(in->in_bytes);
    free(in->out_bytes);
    free(in->in_buf);
    free(in->out_buf);
    free(in);
}

static void freeText(void *p) {
    free(p);
}

/* CPU only, and XNNPACK's thread count as TOML text the library frees. */
static TflOptions compileOptions(int threads, char *why, size_t whylen) {
    TflOptions o = NULL;
    TflStatus st = tfl.CreateOptions(&o);
    if (st == 0) st = tfl.SetOptionsHardwareAccelerators(o, TFL_ACCELERATOR_CPU);
    if (st == 0 && threads > 1) {
        char *toml = malloc(32);
        TflOpaqueOptions x = NULL;
        if (toml == NULL) {
            st = 2;
        } else {
            snprintf(toml, 32, "num_threads = %d\n", threads);
            st = tfl.CreateOpaqueOptions("xnnpack", toml, freeText, &x);
            if (st != 0) free(toml);
        }
        if (st == 0) st = tfl.AddOpaqueOptions(o, x);
    }
    if (st != 0) {
        snprintf(why, whylen, "cannot set the compilation options (%s)", Tfl_StatusText(st));
        if (o) tfl.DestroyOptions(o);
        return NULL;
    }
    return o;
}

static int makeBuffers(TflInstance *in, const TflIface *io, char *why, size_t whylen);

TflInstance *TflInstance_Create(TflEnvironment env, TflModel model, const TflIface *io,
                                int threads, char *why, size_t whylen) {
    TflInstance *in = calloc(1, sizeof(*in));
    if (in == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    in->nin = io->nin;
    in->nout = io->nout;
    size_t ni = in->nin ? in->nin : 1, no = in->nout ? in->nout : 1;
    in->in_layout = calloc(ni, sizeof(TflLayout));
    in->out_layout = calloc(no, sizeof(TflLayout));
    in->in_mem = calloc(ni, sizeof(void *));
    in->out_mem = calloc(no, sizeof(void *));
    in->in_bytes = calloc(ni, sizeof(size_t));
    in->out_bytes = calloc(no, sizeof(size_t));
    in->in_buf = calloc(ni, sizeof(TflTensorBuffer));
    in->out_buf = calloc(no, sizeof(TflTensorBuffer));
    if (!in->in_layout || !in->out_layout || !in->in_mem || !in->out_mem || !in->in_bytes ||
        !in->out_bytes || !in->in_buf || !in->out_buf) {
        snprintf(why, whylen, "out of memory");
        TflInstance_Free(in);
        return NULL;
    }
    TflOptions o = compileOptions(threads, why, whylen);
    if (o == NULL) {
        TflInstance_Free(in);
        return NULL;
    }
    TflStatus st = Tfl_Compile(env, model, o, &in->cm, why, whylen);
    tfl.DestroyOptions(o);
    if (st != 0) {
        if (st != TFL_STATUS_THREW) snprintf(why, whylen, "%s", Tfl_StatusText(st));
        in->cm = NULL;
        TflInstance_Free(in);
        return NULL;
    }
    for (size_t i = 0; i < in->nin; i++) {
        st = Tfl_InputLayout(in->cm, i, &in->in_layout[i], why, whylen);
        if (st != 0) {
            if (st != -2 && st != TFL_STATUS_THREW)
                snprintf(why, whylen, "cannot read input %zu's layout (%s)", i, Tfl_StatusText(st));
            TflInstance_Free(in);
            return NULL;
        }
    }
    if (makeBuffers(in, io, why, whylen) != 0) {
        TflInstance_Free(in);
        return NULL;
    }
    return in;
}

static int makeBuffer(int type, const TflLayout *l, void **mem, size_t *bytes,
                      TflTensorBuffer *buf, char *why, size_t whylen) {
    size_t size = Tfl_ElementSize(type);
    for (int d = 0; d < TFL_LAYOUT_RANK(l); d++) {
        size_t dim = l->dims[d] > 0 ? (size_t)l->dims[d] : 0;
        if (__builtin_mul_overflow(size, dim, &size)) size = SIZE_MAX;
    }
    if (size > TFL_MAX_TENSOR_BYTES) {
        snprintf(why, whylen, "a tensor of %zu bytes, more than the %zu a TFLITE tensor may have",
                 size, TFL_MAX_TENSOR_BYTES);
        return -1;
    }
    *mem = Tfl_BufferAlloc(size);
    if (*mem == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    *bytes = size;
    TflRankedType rt;
    memset(&rt, 0, sizeof(rt));
    rt.element_type = type;
    rt.layout.rank_bits = (uint32_t)TFL_LAYOUT_RANK(l);
    memcpy(rt.layout.dims, l->dims, sizeof(l->dims));
    TflStatus st = tfl.CreateTensorBufferFromHostMemory(&rt, *mem, size, NULL, buf);
    if (st != 0) {
        *buf = NULL;
        snprintf(why, whylen, "cannot make a tensor buffer (%s)", Tfl_StatusText(st));
        return -1;
    }
    return 0;
}

static int makeBuffers(TflInstance *in, const TflIface *io, char *why, size_t whylen) {
    if (in->nout > 0) {
        TflStatus st = Tfl_OutputLayouts(in->cm, in->nout, in->out_layout, why, whylen);
        if (st != 0) {
            if (st != -2 && st != TFL_STATUS_THREW)
                snprintf(why, whylen, "cannot read the output layouts (%s)", Tfl_StatusText(st));
            return -1;
        }
    }
    for (size_t p = 0; p < io->nin; p++) {
        size_t i = io->in[p].sig;
        if (Tfl_ElementSize(io->in[p].type) == 0) {
            snprintf(why, whylen, "input %zu has a type this backend does not exchange", p);
            return -1;
        }
        if (makeBuffer(io->in[p].type, &in->in_layout[i], &in->in_mem[i], &in->in_bytes[i],
                       &in->in_buf[i], why, whylen) != 0)
            return -1;
    }
    for (size_t p = 0; p < io->nout; p++) {
        size_t i = io->out[p].sig;
        if (Tfl_ElementSize(io->out[p].type) == 0) {
            snprintf(why, whylen, "output %zu has a type this backend does not exchange", p);
            return -1;
        }
        if (makeBuffer(io->out[p].type, &in->out_layout[i], &in->out_mem[i], &in->out_bytes[i],
                       &in->out_buf[i], why, whylen) != 0)
            return -1;
    }
    return 0;
}

int TflInstance_Run(TflInstance *in, char *why, size_t whylen) {
    TflStatus st = Tfl_Run(in->cm, in->nin, in->in_buf, in->nout, in->out_buf, why, whylen);
    if (st != 0) {
        if (st != TFL_STATUS_THREW) snprintf(why, whylen, "%s", Tfl_StatusText(st));
        return -1;
    }
    return 0;
}
