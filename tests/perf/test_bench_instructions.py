"""bench/bench_instructions.py reads callgrind's dumps right (pure logic: no valgrind, no server).

The figures of docs/performance.md ("Instructions per request") are sums of a dump's self
costs by ELF object; a parser that counted a call's inclusive cost as well, or lost a
compressed name, would still print plausible numbers.
"""
from __future__ import annotations

import sys
from collections import Counter

import pytest

from paths import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bench_instructions as bi  # noqa: E402

# The shape callgrind 3.19 writes: names compressed to "(id) name" the first time and "(id)"
# after, ob/cob sharing one id space and fn/cfn another; relative positions (+n, -n); the cost
# line after `calls=` is that call's inclusive cost.
DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 185

ob=(1) /usr/bin/redis-check-rdb
fl=(1) ???
fn=(1) processCommand
0 50
cob=(2) /opt/install/redisai.so
cfi=(2) ???
cfn=(2) RAI_TensorSetCommand
calls=2 0
0 100
+3 5
fn=(3) readQueryFromClient
0 10
ob=(2)
fl=(2)
fn=(2)
0 90
cob=(3) /usr/lib/x86_64-linux-gnu/libc.so.6
cfn=(4) memcpy
calls=1 0
0 10
ob=(3)
fl=(3) ???
fn=(4)
0 10
ob=(1)
fl=(1)
fn=(1)
cfn=(3)
calls=3 0
0 10
ob=(4) /opt/install/backends/redisai_onnxruntime-1.32.0-cpu/redisai_onnxruntime.so
fl=(4) ???
fn=(5) ort_run
0 7
ob=(5) /opt/install/backends/redisai_onnxruntime-1.32.0-cpu/lib/libonnxruntime.so.1.32.0
fn=(6) 0x0000000000001234
0 13

totals: 185
"""


def test_self_cost_by_object_skips_inclusive_costs() -> None:
    dump = bi.parse_dump(DUMP)
    assert dump.by_object == Counter({
        "/usr/bin/redis-check-rdb": 65,
        "/opt/install/redisai.so": 90,
        "/usr/lib/x86_64-linux-gnu/libc.so.6": 10,
        "/opt/install/backends/redisai_onnxruntime-1.32.0-cpu/redisai_onnxruntime.so": 7,
        "/opt/install/backends/redisai_onnxruntime-1.32.0-cpu/lib/libonnxruntime.so.1.32.0": 13,
    })
    assert dump.totals == 185
    assert dump.calls == Counter({"RAI_TensorSetCommand": 2, "memcpy": 1,
                                  "readQueryFromClient": 3})


def test_totals_that_do_not_add_up_are_refused() -> None:
    with pytest.raises(ValueError, match="totals"):
        bi.parse_dump(DUMP.replace("totals: 185", "totals: 285"))


def test_other_events_are_refused() -> None:
    with pytest.raises(ValueError, match="Ir"):
        bi.parse_dump(DUMP.replace("events: Ir", "events: Ir Dr Dw"))


def test_groups(tmp_path) -> None:
    # Debian's redis-server is a link to redis-check-rdb: callgrind names the target.
    target = tmp_path / "redis-check-rdb"
    target.write_text("")
    link = tmp_path / "redis-server"
    link.symlink_to(target)
    dump = bi.parse_dump(DUMP.replace("/usr/bin/redis-check-rdb", str(target)))
    got = bi.group(dump.by_object, str(link))
    assert got == {"redisai.so": 90, "redis-server": 65, "backend": 7, "onnxruntime": 13,
                   "libc": 10, "jemalloc": 0, "other": 0}


def test_per_request_and_ratios() -> None:
    def row(name: str, core: int, total: int) -> dict:
        groups = dict.fromkeys(bi.GROUPS, 0)
        groups["redis-server"] = core
        return {"name": name, "requests": 10, "total": total, "by_group": groups}

    run = {"workloads": [row("SET 1KB", 1000, 2000), row("AI.TENSORSET 1KB", 1500, 3000)]}
    assert bi.per_request(run["workloads"][0])["core"] == 100
    (ratio,) = bi.ratios(run)
    assert ratio == {"ours": "AI.TENSORSET 1KB", "plain": "SET 1KB", "core": 1.5, "total": 1.5}
