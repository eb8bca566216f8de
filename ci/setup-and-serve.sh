#!/usr/bin/env bash
# Start the server: set up the environment, build, then exec redis-server with
# RedisAI and every built backend. Arguments go to `build_tools serve`: its
# --port (6380), redis-server options, then module arguments after `--`, e.g.
#   bash ci/setup-and-serve.sh --port 7000 -- THREADS_PER_QUEUE 4 ISOLATE TORCH
# It binds 127.0.0.1 unless given --bind. Idempotent: a second run skips what is
# already done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m build_tools setup
.venv/bin/python -m build_tools build
exec .venv/bin/python -m build_tools serve "$@"
