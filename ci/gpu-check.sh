#!/usr/bin/env bash
# The device run of docs/gpu.md, on a machine with an NVIDIA GPU whose python3 holds a
# CUDA build of torch (the lent machine: no Redis, no registry). Builds redisai.so and
# the Torch backend with CMake directly against that torch, as variant gpu, then runs
# ci/gpu_check.py: results against CPU, a DAG across devices, batching, INFO per device,
# a model deleted while queued, and a CNN benchmark, written as JSON into OUT_DIR.
#
#   bash ci/gpu-prepare.sh                       # here: fills .gpu-carry/
#   bash ci/gpu-check.sh OUT_DIR                 # there (carry .gpu-carry)
#
# Environment: PYTHON (python3: makes the models, finds torch), TORCH_DIR (that torch's
# package folder by default), DEVICE (GPU:0; CPU:1 checks the script without a GPU, as
# tests/repo/test_gpu_check_script.py does with .venv's CPU torch), CARRY (.gpu-carry),
# BUILD_DIR (build-gpu), SECONDS_PER_CELL (3), REPS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash ci/gpu-check.sh OUT_DIR}
py=${PYTHON:-python3}
carry=${CARRY:-.gpu-carry}
device=${DEVICE:-GPU:0}
say() { echo "[gpu-check] $*"; }
[ -x "$carry/bin/redis-server" ] || { echo "no $carry/bin/redis-server: run ci/gpu-prepare.sh here and carry $carry" >&2; exit 1; }
carry_abs=$(cd "$carry" && pwd)

torch_dir=${TORCH_DIR:-$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
site=$(dirname "$torch_dir")
torch_version=$(cd "$site" && ls -d torch-*.dist-info | head -1 \
    | sed -E 's/^torch-([0-9]+(\.[0-9]+)*)(\+[^/]*)?\.dist-info$/\1/')
# A CPU build of torch (how CI runs this script) builds variant cpu: never a CPU backend
# under a GPU name.
extra="" variant=cpu
if [ -f "$torch_dir/lib/libtorch_cuda.so" ]; then
    extra="-Wl,--no-as-needed;-l:libtorch_cuda.so;-l:libc10_cuda.so;-Wl,--as-needed" variant=gpu
fi
version=$("$py" -c 'import sys; sys.path.insert(0, "."); from build_tools import pins; print(pins.VERSION)')
say "torch $torch_version in $torch_dir (variant $variant), device $device"
mkdir -p "$out"

build=${BUILD_DIR:-build-gpu}
generator="Unix Makefiles"; command -v ninja >/dev/null && generator=Ninja
cmake -S . -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
    -DREDISAI_VERSION="$version" -DREDISAI_GIT_SHA="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    -DREDISMODULE_INCLUDE_DIR="$carry_abs/include" -DREDISAI_BACKEND_VARIANT="$variant" \
    -DTORCH_INCLUDE_DIR="$torch_dir/include;$torch_dir/include/torch/csrc/api/include" \
    -DTORCH_LIB_DIR="$torch_dir/lib" -DTORCH_VERSION="$torch_version" -DTORCH_EXTRA_LIBS="$extra" \
    -DTF_INCLUDE_DIR= -DORT_INCLUDE_DIR= >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
say "building redisai.so and redisai_torch.so ($generator)"
cmake --build "$build" --target redisai redisai_torch -j "$(nproc)" 2>&1 | tail -3

# The backend in a folder named as the install tree names it; its RUNPATH $ORIGIN/lib
# finds libtorch through a link, the CUDA libraries through LD_LIBRARY_PATH (torch's
# Python loader finds them that way; a tree from build-variant carries them in lib/).
folder="$build/backends/redisai_torch-$torch_version-$variant"
rm -rf "$folder"; mkdir -p "$folder"
cp "$build/redisai_torch.so" "$folder/"
ln -s "$torch_dir/lib" "$folder/lib"
ldp="$carry_abs/lib:$torch_dir/lib"
for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && ldp="$ldp:$d"; done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

build_abs=$(cd "$build" && pwd)
PYTHONUNBUFFERED=1 "$py" ci/gpu_check.py --server "$carry_abs/bin/redis-server" \
    --module "$build_abs/redisai.so" --backend "$build_abs/${folder#"$build"/}/redisai_torch.so" \
    --variant "$variant" \
    --server-libs "$ldp" --device "$device" --out "$out" --seconds "${SECONDS_PER_CELL:-3}" --reps "${REPS:-3}"
