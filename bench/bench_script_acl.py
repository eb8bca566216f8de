"""What checking a script's redis.execute against the caller's ACL costs per call.

One AI.SCRIPTEXECUTE whose script calls redis.execute("SET", key, "v") N times; the
figure is the script's wall time divided by N (median of R runs), so it holds the whole
call: the GIL round trip, the ACL check (GetCommandKeys, ACLCheckCommandPermissions on a
user looked up by name), the "C" call as that user. Callers:

* `default` (no password, `~* +@all`): every key pattern matches at once;
* `app` (`+@all -@admin -@dangerous ~app:*`): the key is matched against a pattern.

Run it against this tree and against a build without the checks (`--install DIR`) to see
what the checks add. The benchmark starts its own redis-server and stops it.

    bench/run script_acl [--install DIR] [--calls N] [--runs R]
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench as base  # noqa: E402  (bench/bench.py: Client, find_install; puts tests/support/ on sys.path)

from redis_server import RedisServer  # noqa: E402

SCRIPT = '''
def loop(tensors: List[Tensor], keys: List[str], args: List[str]):
    n = int(args[0])
    for i in range(n):
        redis.execute("SET", keys[0], "v")
    return torch.tensor([n])
'''


def per_call_us(c: base.Client, key: str, calls: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        reply = c.call("AI.SCRIPTEXECUTE", "app:s", "loop", "KEYS", 1, key, "ARGS", 1, calls,
                       "OUTPUTS", 1, "app:o")
        times.append(time.perf_counter() - t0)
        if reply not in ("OK", b"OK"):
            raise RuntimeError(f"SCRIPTEXECUTE replied {reply!r}")
    return statistics.median(times) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", help="install/redisai-<version> folder (default: newest)")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    install = base.find_install(args.install)
    torch_so = install / "backends" / "redisai_torch" / "redisai_torch.so"
    srv = RedisServer(install / "redisai.so", ["TORCH", str(torch_so)])
    try:
        admin = base.Client(srv.port)
        admin.call("ACL", "SETUSER", "app", "on", ">pw", "+@all", "-@admin", "-@dangerous",
                   "~app:*")
        admin.call("AI.SCRIPTSTORE", "app:s", "CPU", "ENTRY_POINTS", 1, "loop", "SOURCE", SCRIPT)
        app = base.Client(srv.port)
        app.call("AUTH", "app", "pw")
        per_call_us(admin, "app:k", 1000, 1)  # warm-up: the script's first run compiles
        default_us = per_call_us(admin, "app:k", args.calls, args.runs)
        app_us = per_call_us(app, "app:k", args.calls, args.runs)
        print(f"install: {install}")
        print(f"redis.execute SET, {args.calls} calls per run, median of {args.runs} runs:")
        print(f"  as default (~*):     {default_us:7.2f} us per call")
        print(f"  as app (~app:*):     {app_us:7.2f} us per call")
        print(f"  ratio app/default:   {app_us / default_us:7.2f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
