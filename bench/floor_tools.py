"""The C tools of bench/bench_floor.py: build them, encode commands, run them, read their JSON.

* rai_floor (bench/floor/rai_floor.c): a backend .so through backend_abi.h, no Redis:
  the in-process floor of one model run;
* rai_load (bench/floor/rai_load.c): a closed-loop RESP client, N connections, one
  thread, commands interleaved per connection;
* tflite_floor (bench/floor/tflite_floor.c): a .tflite model run by LiteRT in a C loop
  (bench/bench_tflite.py builds it with build_targets).

Both are CMake targets of the build folder (EXCLUDE_FROM_ALL, same flags as the module).
"""
from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent


def build_targets(build_dir: pathlib.Path, *targets: str) -> list[pathlib.Path]:
    """Builds the named tools in build_dir (configured by `python -m build_tools build`)."""
    if not (build_dir / "CMakeCache.txt").is_file():
        raise SystemExit(f"{build_dir} is not configured: run `python -m build_tools build` first")
    # Re-run the configure step: a build folder made before the targets existed lacks them.
    subprocess.run(["cmake", str(build_dir)], check=True, capture_output=True)
    res = subprocess.run(["cmake", "--build", str(build_dir), "--target", *targets],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"building {'/'.join(targets)} failed:\n{res.stdout}\n{res.stderr}")
    return [build_dir / t for t in targets]


def build(build_dir: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Builds rai_floor and rai_load in build_dir."""
    floor, load = build_targets(build_dir, "rai_floor", "rai_load")
    return floor, load


def resp(*args: bytes | str | int) -> bytes:
    """One command in RESP2."""
    enc = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    out = [b"*%d\r\n" % len(enc)]
    for a in enc:
        out += [b"$%d\r\n" % len(a), a, b"\r\n"]
    return b"".join(out)


def _run_json(cmd: Sequence[str], timeout: float) -> dict[str, Any]:
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {res.returncode}:\n{res.stderr.strip()}")
    return json.loads(res.stdout)


class Load:
    """rai_load against one server; command files live in workdir."""

    def __init__(self, exe: pathlib.Path, port: int, workdir: pathlib.Path) -> None:
        self.exe = exe
        self.port = port
        self.workdir = workdir
        self._files: dict[bytes, pathlib.Path] = {}

    def _file(self, cmd: bytes) -> pathlib.Path:
        path = self._files.get(cmd)
        if path is None:
            path = self.workdir / f"cmd{len(self._files)}.resp"
            path.write_bytes(cmd)
            self._files[cmd] = path
        return path

    def forget(self) -> None:
        """Deletes the command files (the 64 MB ones are large)."""
        for path in self._files.values():
            path.unlink(missing_ok=True)
        self._files.clear()

    def run(self, cmds: Sequence[bytes], clients: int = 1, requests: int = 0,
            seconds: float = 0.0, warmup: int = 20) -> list[dict[str, Any]]:
        """Per command: count, p50_us, p90_us, p99_us, mean_us, rps."""
        argv = [str(self.exe), "--port", str(self.port), "--clients", str(clients),
                "--warmup", str(warmup)]
        argv += ["--requests", str(requests)] if requests else ["--seconds", str(seconds)]
        for c in cmds:
            argv += ["--cmd", str(self._file(c))]
        out = _run_json(argv, timeout=120 + seconds + requests * 0.05)
        for entry in out["commands"]:
            entry["clients"] = out["clients"]
        return out["commands"]


class Floor:
    """rai_floor of one backend .so and one model of the manifest (floor_models.py)."""

    def __init__(self, exe: pathlib.Path, so: pathlib.Path, kind: str, entry: dict[str, Any],
                 intra: int = 0, inter: int = 0) -> None:
        self.argv = [str(exe), "--so", str(so), "--kind", kind, "--model", entry["blob"],
                     "--intra", str(intra), "--inter", str(inter)]
        for i in entry["inputs"]:
            dims = "x".join(str(d) for d in i["shape"])
            self.argv += ["--input", f"{i['dtype']}:{dims}:{i['file']}"]
        if entry["named"]:
            for i in entry["inputs"]:
                self.argv += ["--in-name", i["name"]]
            for o in entry["outputs"]:
                self.argv += ["--out-name", o]
        self.argv += ["--noutputs", str(len(entry["outputs"]))]

    def run(self, iters: int, warmup: int = 200, dump: pathlib.Path | None = None) -> dict[str, Any]:
        argv = self.argv + ["--iters", str(iters), "--warmup", str(warmup)]
        if dump is not None:
            argv += ["--dump-output", str(dump)]
        return _run_json(argv, timeout=300)
