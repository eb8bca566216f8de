#!/usr/bin/env bash
# The core's tests with redisai.so and its backends built with AddressSanitizer.
#
#   ci/asan-tests.sh                          the default subset (below)
#   ci/asan-tests.sh tests/<area>/test_x.py   these test files instead (pytest args
#                                             welcome: -k EXPR, -x, ...; the first that
#                                             is not a test file keeps the default subset
#                                             and is passed on)
#
# 1. builds build-asan/ and install-asan/redisai-<version>/ (incremental; the normal
#    build/ and install/ are not touched) and checks the tree;
# 2. runs pytest with REDISAI_INSTALL_DIR on that tree and REDISAI_TEST_SERVER_EXE on
#    ci/asan/redis-server (libasan preloaded into redis-server only, never into pytest);
# 3. scans every server's asan.<pid> and redis.log (ci/asan_scan.py): any report not
#    covered by ci/asan/lsan.supp fails the run, as does any failed test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

py=.venv/bin/python
files=()
args=()
for a in "$@"; do
    if [[ "$a" == tests/*.py || "$a" == tests/*.py::* ]]; then files+=("$a"); else args+=("$a"); fi
done
if [ "${#files[@]}" -eq 0 ]; then
    files=(tests/tensors/test_tensors.py tests/execution/test_dag.py
           tests/persistence/test_persistence.py tests/persistence/test_rdb_legacy.py
           tests/persistence/test_dump_restore.py)
    # The fuzz tests (issue 10), whatever they are called, once they exist.
    for f in tests/*/test_*fuzz*.py; do [ -e "$f" ] && files+=("$f"); done
fi

start=$(date +%s)
"$py" -m build_tools build --sanitize address
"$py" -m build_tools check --sanitize address
echo "asan: build+check took $(( $(date +%s) - start ))s"

version=$("$py" -c 'from build_tools import pins; print(pins.VERSION)')
run_dir=$(mktemp -d -t redisai-asan-XXXXXX)
export REDISAI_INSTALL_DIR="$PWD/install-asan/redisai-$version"
export REDISAI_TEST_SERVER_EXE="$PWD/ci/asan/redis-server"
export REDISAI_ASAN_RUN_DIR="$run_dir"
echo "asan: server logs listed in $run_dir/servers"

rc=0
start=$(date +%s)
"$py" -m pytest -q -p no:cacheprovider "${files[@]}" ${args[@]+"${args[@]}"} || rc=$?
echo "asan: pytest took $(( $(date +%s) - start ))s (exit $rc)"
scan=0
"$py" ci/asan_scan.py "$run_dir" || scan=$?
if [ "$rc" -eq 5 ]; then
    echo "asan: pytest collected no tests: failing" >&2
    exit 1
fi
[ "$rc" -ne 0 ] && exit "$rc"
exit "$scan"
