#!/usr/bin/env bash
# CI: set up the environment, build, check the install tree, run the tests.
# Idempotent. Exits non-zero on any failure; "no tests collected" is a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m build_tools setup
.venv/bin/python -m build_tools build
.venv/bin/python -m build_tools check

rc=0
.venv/bin/python -m pytest -v tests "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "ci: pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
