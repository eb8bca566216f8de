"""Foundation benchmark (not a test): prints figures and the ratios against the targets.

* AI.TENSORSET / AI.TENSORGET with BLOB, 1 KB .. 64 MB, against plain SET / GET of the
  same bytes (target: at 16 MB, TENSORSET/TENSORGET throughput >= 0.9x SET/GET);
* the AI.MODELEXECUTE round trip of the 2x2 TF mul model against PING
  (target: MODELEXECUTE p50 <= 2x PING p50).

One client, one connection, commands interleaved (SET, TENSORSET, GET, TENSORGET, ...) so
drift affects both sides alike; medians of bounded loop counts. The benchmark starts its
own redis-server on a free port (tests/support/redis_server.py's RedisServer) and stops it.

    python bench/bench.py [--install DIR] [--quick] [--strict]

--strict exits 1 when a target is missed (for CI use); by default it only reports.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
# The repository root too: tests/support/redis_server.py imports build_tools (the server by name).
sys.path.insert(1, str(ROOT))

from redis_server import RedisServer  # noqa: E402  (tests/support/ on sys.path)

KB = 1024
MB = 1024 * KB
SIZES = [1 * KB, 16 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB]


class Client:
    """A lean RESP2 client: the last argument is sent without a copy, bulk replies are
    received straight into a preallocated buffer. Errors raise."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send(self, *args: bytes | str | int) -> None:
        enc = [a if isinstance(a, (bytes, bytearray, memoryview)) else str(a).encode() for a in args]
        head = [b"*%d\r\n" % len(enc)]
        for a in enc[:-1]:
            head += [b"$%d\r\n" % len(a), a, b"\r\n"]
        last = enc[-1]
        head.append(b"$%d\r\n" % len(last))
        if len(last) > 64 * KB:
            self.sock.sendall(b"".join(head))
            self.sock.sendall(last)
            self.sock.sendall(b"\r\n")
        else:
            self.sock.sendall(b"".join(head) + bytes(last) + b"\r\n")

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def read(self):
        line = self._line()
        t, body = line[:1], line[1:]
        if t in (b"+", b":"):
            return body
        if t == b"-":
            raise RuntimeError(body.decode(errors="replace"))
        if t == b"$":
            n = int(body)
            if n < 0:
                return None
            out = bytearray(n + 2)
            view = memoryview(out)
            have = min(len(self.buf), n + 2)
            view[:have] = self.buf[:have]
            del self.buf[:have]
            while have < n + 2:
                got = self.sock.recv_into(view[have:], min(n + 2 - have, 4 * MB))
                if not got:
                    raise ConnectionError("closed")
                have += got
            return view[:n]
        if t == b"*":
            return [self.read() for _ in range(int(body))]
        raise ConnectionError(f"bad reply {line!r}")

    def call(self, *args):
        self.send(*args)
        return self.read()


def find_install(explicit: str | None) -> pathlib.Path:
    if explicit:
        return pathlib.Path(explicit)
    env = os.environ.get("REDISAI_INSTALL_DIR")
    if env:
        return pathlib.Path(env)
    trees = sorted((ROOT / "install").glob("redisai-*/redisai.so"))
    if not trees:
        sys.exit("no install/redisai-*/redisai.so: build first (python -m build_tools build)")
    return trees[-1].parent


def parse_installs(values: list[str]) -> list[tuple[str, pathlib.Path]]:
    """--install DIR or --install LABEL=DIR, repeatable; none: the newest install tree."""
    if not values:
        return [("", find_install(None))]
    out = []
    for v in values:
        label, sep, path = v.partition("=")
        if not sep:
            label, path = "", v
        out.append((label, pathlib.Path(path).resolve()))
    return out


def med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def stop_checked(client: Client, srv: RedisServer, label: str) -> None:
    """Closes client and stops srv; fails with the server's log if it had died meanwhile."""
    client.sock.close()
    alive = srv.alive()
    log = srv.log() if not alive else ""
    srv.stop()
    assert alive, f"{label} server died:\n{log}"


def write_result(out: str | pathlib.Path, name: str, doc: dict) -> pathlib.Path:
    """doc as <out>/<name>.json (the folder made if needed): a benchmark's result file."""
    folder = pathlib.Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def iterations(size: int, quick: bool) -> int:
    n = max(10, min(1000, (48 * MB) // size))
    return max(3, n // 4) if quick else n


def bench_blobs(c: Client, quick: bool) -> dict[int, dict[str, float]]:
    results = {}
    for size in SIZES:
        data = os.urandom(size) if size <= MB else (os.urandom(MB) * (size // MB))
        n = iterations(size, quick)
        lat = {"SET": [], "TENSORSET": [], "GET": [], "TENSORGET": []}
        ops = {
            "SET": lambda: c.call("SET", "s", data),
            "TENSORSET": lambda: c.call("AI.TENSORSET", "t", "UINT8", size, "BLOB", data),
            "GET": lambda: c.call("GET", "s"),
            "TENSORGET": lambda: c.call("AI.TENSORGET", "t", "BLOB"),
        }
        for i in range(n):
            # alternate which of each pair goes first, so order effects cancel out
            order = ("SET", "TENSORSET", "GET", "TENSORGET") if i % 2 == 0 else \
                    ("TENSORSET", "SET", "TENSORGET", "GET")
            for name in order:
                lat[name].append(timed(ops[name]))
        got = c.call("AI.TENSORGET", "t", "BLOB")
        assert len(got) == size and bytes(got[:64]) == data[:64], "TENSORGET BLOB returned other bytes"
        results[size] = {k: statistics.median(v) for k, v in lat.items()}
        results[size]["n"] = n
        c.call("DEL", "s", "t")
    return results


def bench_modelexecute(c: Client, quick: bool) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import tf_graphs  # imports tensorflow: a few seconds

    c.call("AI.MODELSTORE", "m", "TF", "CPU", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "mul", "BLOB",
           tf_graphs.mul_graph())
    c.call("AI.TENSORSET", "a", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3)
    c.call("AI.TENSORSET", "b", "FLOAT", 2, 2, "VALUES", 2, 3, 2, 3)
    cmd = ("AI.MODELEXECUTE", "m", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c")
    for _ in range(50):  # warm-up (first TF session run, thread start)
        c.call(*cmd)
        c.call("PING")
    n = 500 if quick else 3000
    ping, run = [], []
    for _ in range(n):
        ping.append(timed(lambda: c.call("PING")))
        run.append(timed(lambda: c.call(*cmd)))
    vals = [bytes(v) for v in c.call("AI.TENSORGET", "c", "VALUES")]
    assert vals == [b"4", b"9", b"4", b"9"], vals

    def pct(xs: list[float], q: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    return {"n": n, "ping_p50": pct(ping, 0.5), "ping_p99": pct(ping, 0.99),
            "run_p50": pct(run, 0.5), "run_p99": pct(run, 0.99)}


def human(size: int) -> str:
    return f"{size // MB} MB" if size >= MB else f"{size // KB} KB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", help="install tree (default: newest install/redisai-*/)")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    opts = ap.parse_args()

    install = find_install(opts.install)
    tf = install / "backends" / "redisai_tensorflow" / "redisai_tensorflow.so"
    t_start = time.perf_counter()
    srv = RedisServer(install / "redisai.so", ["TF", str(tf)])
    ok = True
    try:
        c = Client(srv.port)
        print(f"redisai: {install}  server port {srv.port}")
        print()
        print("BLOB throughput, one client (median latency per op; MB/s = size / median)")
        print(f"{'size':>7} {'n':>5} | {'SET MB/s':>9} {'TSET MB/s':>9} {'ratio':>6} | "
              f"{'GET MB/s':>9} {'TGET MB/s':>9} {'ratio':>6}")
        blobs = bench_blobs(c, opts.quick)
        for size, m in blobs.items():
            mbps = {k: (size / MB) / m[k] for k in ("SET", "TENSORSET", "GET", "TENSORGET")}
            print(f"{human(size):>7} {int(m['n']):>5} | {mbps['SET']:9.1f} {mbps['TENSORSET']:9.1f} "
                  f"{mbps['TENSORSET'] / mbps['SET']:6.2f} | {mbps['GET']:9.1f} "
                  f"{mbps['TENSORGET']:9.1f} {mbps['TENSORGET'] / mbps['GET']:6.2f}")
        m16 = blobs[16 * MB]
        set_ratio = m16["SET"] / m16["TENSORSET"]
        get_ratio = m16["GET"] / m16["TENSORGET"]
        print()
        print("MODELEXECUTE (2x2 TF mul) round trip vs PING, one client")
        me = bench_modelexecute(c, opts.quick)
        print(f"  n={me['n']}  PING p50 {me['ping_p50'] * 1e6:8.1f} us  p99 {me['ping_p99'] * 1e6:8.1f} us")
        print(f"  {'':>{len(str(me['n'])) + 2}}  EXEC p50 {me['run_p50'] * 1e6:8.1f} us  "
              f"p99 {me['run_p99'] * 1e6:8.1f} us")
        exec_ratio = me["run_p50"] / me["ping_p50"]
        print()
        print("Targets")
        checks = [
            ("TENSORSET BLOB 16 MB throughput / SET", set_ratio, ">=", 0.9, set_ratio >= 0.9),
            ("TENSORGET BLOB 16 MB throughput / GET", get_ratio, ">=", 0.9, get_ratio >= 0.9),
            ("MODELEXECUTE p50 / PING p50", exec_ratio, "<=", 2.0, exec_ratio <= 2.0),
        ]
        for name, val, op, target, passed in checks:
            print(f"  {name:<40} {val:6.2f}x  (target {op} {target}x)  {'PASS' if passed else 'MISS'}")
            ok &= passed
        c.sock.close()
    finally:
        srv.stop()
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s")
    return 0 if ok or not opts.strict else 1


if __name__ == "__main__":
    sys.exit(main())
