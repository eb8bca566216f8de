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
[ "$rc" -eq 0 ] || exit "$rc"

# The engine's own tests again with every backend kind in a backend host process
# (docs/isolation.md): models, scripts and their callbacks, DAGs, batching, persistence,
# replication, timeouts and the script ACL must not know the difference.
echo "ci: the engine's tests again, with TF, TORCH and ONNX isolated (--isolate all)"
if [ "$#" -eq 0 ]; then
    .venv/bin/python -m pytest -v --isolate all tests/models/test_models.py \
        tests/scripts/test_scripts.py tests/execution/test_dag.py \
        tests/execution/test_batching.py tests/persistence/test_persistence.py \
        tests/persistence/test_replication.py tests/execution/test_timeouts.py \
        tests/security/test_script_acl.py || rc=$?
fi
exit "$rc"
