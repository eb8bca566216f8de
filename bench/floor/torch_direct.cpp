/*
 * torch_direct.cpp - the framework's own cost of a TorchScript run: the
 * model loaded with torch::jit::load and its forward called in a loop by
 * libtorch directly. No backend, no ABI, no Redis: what rai_floor.c (the
 * backend through backend_abi.h) and the server add is measured against it
 * (bench/bench_torch_path.py).
 *
 * As the Torch backend (backends/torch/) and rai_floor do: the module is
 * loaded on the main thread, put in eval mode and run N times on the same
 * input tensors by one worker thread of its own; the thread settings are
 * the backend's (at::set_num_threads(--intra) and, if given,
 * at::set_num_interop_threads(--inter) on the main thread before any
 * parallel work; at::init_num_threads() once on the worker). Each run is
 * what a caller of libtorch writes for one request: a guard, forward, the
 * result's tensors, and nothing else (the inputs are made once, before the
 * loop; the outputs are dropped).
 *
 *   torch_direct --model FILE --input DTYPE:D1xD2x...:FILE [--input ...]
 *                [--iters N] [--warmup N] [--intra N] [--inter N]
 *                [--guard inference|nograd|none] [--threads-per-run]
 *                [--input-offset N] [--optimize none|freeze|inference]
 *                [--dump-output FILE] [--gap-us N] [--gap yield|pause|sleep]
 *                [--spinner yield|pause] [--other-caller]
 *
 * DTYPE is FLOAT, DOUBLE, INT32, INT64 or UINT8 (raw little-endian bytes,
 * as rai_floor reads them). --guard: c10::InferenceMode (the default, what
 * the backend uses), torch::NoGradGuard, or none. --threads-per-run calls
 * at::set_num_threads(--intra) before every run, to price what choosing the
 * intra-op count per run would cost. --input-offset puts each input's data
 * N bytes past a 64-byte boundary, as the bytes of a Redis string lie past
 * its header (the server's inputs: AI.TENSORSET BLOB keeps the string).
 * --optimize prices what the backend does not do: torch::jit::freeze (the
 * module's attributes folded into the graph) or optimize_for_inference
 * (frozen, then weights prepacked for oneDNN and conv/batch-norm folded).
 * --gap-us leaves N us between two timed runs, spent as a server's worker
 * spends the time between two requests: sched_yield in a loop (the
 * module's spin), a loop without system calls (pause), or asleep (a worker
 * that does not spin); each run is still timed alone. Whether a run costs
 * more after such a gap than back to back is what the gap prices.
 * --spinner starts a third thread that spins for the whole timed loop, as
 * Redis's main thread does while it polls for a lone client (main_spin.c:
 * sched_yield between looks) or a thread that never yields (pause): what a
 * run with --intra 2 loses when its pool thread has no core of its own.
 * --other-caller runs the model once on a second thread before the timed
 * loop and keeps that thread alive (parked), as the run queue's helper
 * worker does once it has run one request: libgomp gives every thread that
 * starts a parallel region a pool of its own, and counts all pools' threads
 * against the CPUs (its spin-wait shrinks once they outnumber them).
 * cpu_us is the process's CPU time per timed run, every thread's.
 * Prints one JSON object with the keys
 * rai_floor prints: p50/p90/p99/min/mean of one run in microseconds and
 * runs per second of the timed loop.
 */
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sched.h>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

namespace {

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, "torch_direct: %s\n", what.c_str());
    std::exit(2);
}

std::vector<char> read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        die("cannot read " + path);
    }
    return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

at::ScalarType parse_dtype(const std::string &s) {
    if (s == "FLOAT") return at::kFloat;
    if (s == "DOUBLE") return at::kDouble;
    if (s == "INT32") return at::kInt;
    if (s == "INT64") return at::kLong;
    if (s == "UINT8") return at::kByte;
    die("unknown dtype " + s);
}

/* DTYPE:D1xD2x...:FILE, the tensor owning a copy of the file's bytes, at
 * offset bytes past a 64-byte boundary (0: where at::empty puts it). */
at::Tensor parse_input(const std::string &spec, size_t offset) {
    size_t c1 = spec.find(':');
    size_t c2 = c1 == std::string::npos ? c1 : spec.find(':', c1 + 1);
    if (c2 == std::string::npos) {
        die("--input " + spec + ": expected DTYPE:DIMS:FILE");
    }
    at::ScalarType st = parse_dtype(spec.substr(0, c1));
    std::vector<int64_t> dims;
    std::string d = spec.substr(c1 + 1, c2 - c1 - 1);
    for (size_t pos = 0; pos < d.size();) {
        size_t x = d.find('x', pos);
        dims.push_back(std::stoll(d.substr(pos, x == std::string::npos ? x : x - pos)));
        pos = x == std::string::npos ? d.size() : x + 1;
    }
    std::vector<char> bytes = read_file(spec.substr(c2 + 1));
    at::Tensor t = at::empty(dims, at::TensorOptions().dtype(st));
    if (bytes.size() != t.nbytes()) {
        die("--input " + spec + ": the file's size is not the shape's");
    }
    if (offset > 0) {
        /* A view at an offset into a larger buffer: data where a Redis
         * string's bytes lie (past its header), not on a 64-byte line. */
        at::Tensor buf = at::empty({static_cast<int64_t>(bytes.size() + offset)}, at::kByte);
        t = at::from_blob(static_cast<char *>(buf.data_ptr()) + offset, dims,
                          [buf](void *) mutable { buf.reset(); },
                          at::TensorOptions().dtype(st));
    }
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    return t;
}

enum class Guard { Inference, NoGrad, None };

struct Options {
    std::string model;
    std::vector<std::string> inputs;
    long iters = 5000;
    long warmup = 200;
    int intra = 1;
    int inter = 0;
    size_t input_offset = 0;
    std::string optimize = "none";
    Guard guard = Guard::Inference;
    bool threads_per_run = false;
    std::string dump;
    long gap_us = 0;
    std::string gap = "yield";
    std::string spinner;
    bool other_caller = false;
};

Options parse_args(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--threads-per-run") {
            o.threads_per_run = true;
            continue;
        }
        if (a == "--other-caller") {
            o.other_caller = true;
            continue;
        }
        if (i + 1 >= argc) {
            die(a + " needs a value");
        }
        std::string v = argv[++i];
        if (a == "--model") {
            o.model = v;
        } else if (a == "--input") {
            o.inputs.push_back(v);
        } else if (a == "--iters") {
            o.iters = std::stol(v);
        } else if (a == "--warmup") {
            o.warmup = std::stol(v);
        } else if (a == "--intra") {
            o.intra = std::stoi(v);
        } else if (a == "--inter") {
            o.inter = std::stoi(v);
        } else if (a == "--guard") {
            o.guard = v == "inference" ? Guard::Inference
                      : v == "nograd"  ? Guard::NoGrad
                      : v == "none"    ? Guard::None
                                       : (die("--guard " + v + ": inference, nograd or none"),
                                          Guard::None);
        } else if (a == "--optimize") {
            if (v != "none" && v != "freeze" && v != "inference") {
                die("--optimize " + v + ": none, freeze or inference");
            }
            o.optimize = v;
        } else if (a == "--input-offset") {
            o.input_offset = static_cast<size_t>(std::stoul(v));
        } else if (a == "--gap-us") {
            o.gap_us = std::stol(v);
        } else if (a == "--gap") {
            if (v != "yield" && v != "pause" && v != "sleep") {
                die("--gap " + v + ": yield, pause or sleep");
            }
            o.gap = v;
        } else if (a == "--spinner") {
            if (v != "yield" && v != "pause") {
                die("--spinner " + v + ": yield or pause");
            }
            o.spinner = v;
        } else if (a == "--dump-output") {
            o.dump = v;
        } else {
            die("unknown option " + a);
        }
    }
    if (o.model.empty() || o.inputs.empty() || o.iters < 1 || o.warmup < 0 || o.intra < 1) {
        die("--model and at least one --input are required; --iters >= 1, --intra >= 1");
    }
    return o;
}

/* One request: the guard, forward, the result's first tensor. The
 * arguments are a fresh vector each run, as forward takes them by value. */
at::Tensor run_once(torch::jit::Module &m, const std::vector<at::Tensor> &inputs,
                    const Options &o) {
    if (o.threads_per_run) {
        at::set_num_threads(o.intra);
    }
    std::vector<c10::IValue> in(inputs.begin(), inputs.end());
    auto call = [&] {
        c10::IValue r = m.forward(std::move(in));
        return r.isTensor() ? r.toTensor() : r.toTupleRef().elements()[0].toTensor();
    };
    switch (o.guard) {
    case Guard::Inference: {
        c10::InferenceMode guard;
        return call();
    }
    case Guard::NoGrad: {
        torch::NoGradGuard guard;
        return call();
    }
    case Guard::None:
        break;
    }
    return call();
}

constexpr char kVersion[] = C10_STRINGIZE(TORCH_VERSION_MAJOR) "." C10_STRINGIZE(
    TORCH_VERSION_MINOR) "." C10_STRINGIZE(TORCH_VERSION_PATCH);

/* The time between two requests (--gap-us). */
void gap(const Options &o) {
    using clock = std::chrono::steady_clock;
    auto end = clock::now() + std::chrono::microseconds(o.gap_us);
    if (o.gap == "sleep") {
        std::this_thread::sleep_until(end);
        return;
    }
    while (clock::now() < end) {
        if (o.gap == "yield") {
            sched_yield();
        } else {
            __builtin_ia32_pause();
        }
    }
}

double pct(const std::vector<double> &sorted, double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(sorted.size()));
    return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse_args(argc, argv);
    /* The backend's settings, in its order: at its entry, before any
     * parallel work (apply_thread_config). */
    at::set_num_threads(o.intra);
    if (o.inter > 0) {
        at::set_num_interop_threads(o.inter);
    }
    torch::jit::Module m;
    std::vector<at::Tensor> inputs;
    try {
        m = torch::jit::load(o.model, c10::Device(c10::kCPU));
        m.eval();
        if (o.optimize == "freeze") {
            m = torch::jit::freeze(m);
        } else if (o.optimize == "inference") {
            m = torch::jit::optimize_for_inference(m);
        }
        for (const std::string &s : o.inputs) {
            inputs.push_back(parse_input(s, o.input_offset));
        }
    } catch (const std::exception &e) {
        die(std::string("loading: ") + e.what());
    }

    std::vector<double> lat(static_cast<size_t>(o.iters));
    double wall = 0;
    std::string error;
    std::atomic<bool> done{false};
    std::thread other;
    if (o.other_caller) {
        std::atomic<bool> ran{false};
        other = std::thread([&] {
            at::init_num_threads();
            try {
                run_once(m, inputs, o);
            } catch (const std::exception &) {
            }
            ran = true;
            while (!done.load()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        });
        while (!ran.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    double cpu_us = 0;
    std::thread spinner;
    if (!o.spinner.empty()) {
        spinner = std::thread([&] {
            while (!done.load(std::memory_order_relaxed)) {
                if (o.spinner == "yield") {
                    sched_yield();
                } else {
                    __builtin_ia32_pause();
                }
            }
        });
    }
    /* A worker thread of its own, as the module's run queue and rai_floor:
     * libtorch's intra-op setting is per thread. */
    std::thread worker([&] {
        try {
            at::init_num_threads(); /* the backend's prepare_worker_thread */
            for (long i = 0; i < o.warmup; i++) {
                run_once(m, inputs, o);
            }
            using clock = std::chrono::steady_clock;
            struct timespec c0, c1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
            auto start = clock::now();
            for (long i = 0; i < o.iters; i++) {
                if (o.gap_us > 0) {
                    gap(o);
                }
                auto t0 = clock::now();
                at::Tensor out = run_once(m, inputs, o);
                lat[static_cast<size_t>(i)] =
                    std::chrono::duration<double>(clock::now() - t0).count();
            }
            wall = std::chrono::duration<double>(clock::now() - start).count();
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
            cpu_us = ((c1.tv_sec - c0.tv_sec) * 1e6 + (c1.tv_nsec - c0.tv_nsec) / 1e3) /
                     static_cast<double>(o.iters);
            if (!o.dump.empty()) {
                at::Tensor out = run_once(m, inputs, o).contiguous();
                std::ofstream f(o.dump, std::ios::binary);
                f.write(static_cast<const char *>(out.const_data_ptr()),
                        static_cast<std::streamsize>(out.nbytes()));
                if (!f) {
                    error = "cannot write --dump-output";
                }
            }
        } catch (const std::exception &e) {
            error = e.what();
        }
    });
    worker.join();
    done = true;
    if (spinner.joinable()) {
        spinner.join();
    }
    if (other.joinable()) {
        other.join();
    }
    if (!error.empty()) {
        die("forward failed: " + error);
    }

    std::vector<double> sorted = lat;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double x : lat) {
        sum += x;
    }
    const char *guard = o.guard == Guard::Inference ? "inference"
                        : o.guard == Guard::NoGrad  ? "nograd"
                                                    : "none";
    std::printf("{\"kind\": \"TORCH\", \"framework\": \"PyTorch\", \"framework_version\": \"%s\", "
                "\"direct\": true, \"guard\": \"%s\", \"threads_per_run\": %s, "
                "\"input_offset\": %zu, \"optimize\": \"%s\", \"gap_us\": %ld, \"gap\": \"%s\", \"spinner\": \"%s\", \"other_caller\": %s, \"cpu_us\": %.1f, \"iters\": %ld, \"warmup\": %ld, \"intra\": %d, "
                "\"inter\": %d, "
                "\"p50_us\": %.2f, \"p90_us\": %.2f, \"p99_us\": %.2f, \"min_us\": %.2f, "
                "\"mean_us\": %.2f, \"rps\": %.1f}\n",
                kVersion, guard, o.threads_per_run ? "true" : "false", o.input_offset,
                o.optimize.c_str(), o.gap_us, o.gap.c_str(), o.spinner.empty() ? "none" : o.spinner.c_str(), o.other_caller ? "true" : "false", cpu_us, o.iters, o.warmup, o.intra, o.inter, pct(sorted, .5) * 1e6, pct(sorted, .9) * 1e6,
                pct(sorted, .99) * 1e6, sorted[0] * 1e6, sum / static_cast<double>(o.iters) * 1e6,
                static_cast<double>(o.iters) / wall);
    return 0;
}
