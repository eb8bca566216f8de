#!/usr/bin/env bash
# Run HERE, before ci/gpu-check.sh is run on a lent GPU machine (docs/gpu.md): that
# machine has no Redis and reaches no registry, so this gathers into .gpu-carry/ (git
# ignores it; name it in the device call's carry) what the check needs from outside the
# repository: Debian's redis-server with the libraries it needs beyond glibc and the C++
# runtime, and redismodule.h as the build fetched it. About 12 MB.
# Usage: bash ci/gpu-prepare.sh [FOLDER]   (default .gpu-carry)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-carry}
py=${PYTHON:-.venv/bin/python}
server=$(command -v redis-server) || { echo "no redis-server: run bash ci/setup-and-test.sh or apt-get install redis-server" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/include"
cp -L "$server" "$out/bin/redis-server"
ldd "$server" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*) ;;
        *) cp -L "$lib" "$out/lib/" ;;
    esac
done
inc=$("$py" -c 'from build_tools import headers; print(headers.redismodule_include_dir())')
cp "$inc/redismodule.h" "$out/include/"
echo "[gpu-prepare] $out: $(du -sh "$out" | cut -f1): $(ls "$out/lib" | tr '\n' ' ')"
