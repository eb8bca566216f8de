#!/usr/bin/env bash
# Start the server: set up the environment, build, then exec redis-server with
# RedisAI and every built backend (arguments go to `build_tools serve`, e.g.
# --port 6380). Idempotent: a second run skips what is already done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m build_tools setup
.venv/bin/python -m build_tools build
exec .venv/bin/python -m build_tools serve "$@"
