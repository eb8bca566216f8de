"""What bench/bench_compare.py needs around the stacks: .venv-compare, wrk, the facts of the
machine, and the CPU time of a server's processes.

* .venv-compare/ (git-ignored): FastAPI, uvicorn, nvidia-pytriton and the project's ONNX
  Runtime pin (build_tools/pins.py), installed with pip as this machine configures it;
  created and completed only when an import or a version does not match.
* wrk: Debian's package, installed with apt-get when missing (as root).
* server CPU: utime + stime of a process and all its descendants, read from /proc
  (threads included; children that exited and were waited for through cutime/cstime).
"""
from __future__ import annotations

import os
import pathlib
import platform
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools import pins  # noqa: E402

VENV = ROOT / ".venv-compare"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _say(msg: str) -> None:
    print(f"setup: {msg}", flush=True)


def _ort_pin() -> str:
    return next(p for p in pins.PYPI_PINS if p.startswith("onnxruntime=="))


def venv_python() -> pathlib.Path:
    return VENV / "bin" / "python"


def _venv_ok() -> bool:
    want = {p.split("==")[0].split("[")[0]: p.split("==")[1]
            for p in (*pins.COMPARE_PYPI_PINS, _ort_pin())}
    probe = ("import json, importlib.metadata as m, fastapi, uvicorn, onnxruntime, pytriton, uvloop;"
             f"print(json.dumps({{n: m.version(n) for n in {sorted(want)!r}}}))")
    res = subprocess.run([str(venv_python()), "-c", probe], capture_output=True, text=True)
    if res.returncode != 0:
        return False
    import json  # noqa: PLC0415

    return json.loads(res.stdout) == want


def base_python() -> pathlib.Path:
    """The interpreter .venv-compare is made from: the system's python3 when there is one.
    Triton's python backend stub embeds the system's libpython (Debian's 3.11 here) and
    takes its standard library from the environment it runs in, so the two must match:
    a stub of 3.11.2 under pyenv's 3.11.7 library fails in multiprocessing (PyTriton)."""
    system = pathlib.Path("/usr/bin/python3")
    return system if system.exists() else pathlib.Path(sys.executable)


def _venv_base() -> str:
    cfg = VENV / "pyvenv.cfg"
    if not cfg.exists():
        return ""
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return value.strip()
    return ""


def ensure_venv() -> pathlib.Path:
    """.venv-compare with its pins; returns its python."""
    base = base_python()
    if _venv_base() != str(base.parent):
        if VENV.exists():
            _say(f"{VENV.name}: made from another interpreter than {base}: making it again")
            shutil.rmtree(VENV)
        _say(f"{VENV.name}: creating from {base}")
        subprocess.run([str(base), "-m", "venv", str(VENV)], check=True)
    elif _venv_ok():
        _say(f"{VENV.name}: packages match the pins")
        return venv_python()
    reqs = [*pins.COMPARE_PYPI_PINS, _ort_pin()]
    _say(f"{VENV.name}: pip install {' '.join(reqs)}")
    subprocess.run([str(venv_python()), "-m", "pip", "install", "-q", *reqs], check=True)
    if not _venv_ok():
        raise SystemExit(f"{VENV} does not match the pins after pip install")
    return venv_python()


def ensure_wrk() -> str:
    """The wrk executable; apt-get installs Debian's package when it is missing."""
    exe = shutil.which("wrk")
    if exe:
        _say(f"wrk: {exe}")
        return exe
    if os.geteuid() != 0:
        raise SystemExit("wrk is missing: install Debian's package (apt-get install -y wrk) as root")
    pkg = pins.COMPARE_APT_TOOLS["wrk"]
    _say(f"wrk: apt-get install -y {pkg}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(["apt-get", "install", "-y", "-q", pkg], env=env).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", "-q", pkg], env=env, check=True)
    exe = shutil.which("wrk")
    if not exe:
        raise SystemExit("apt-get installed wrk but it is not on PATH")
    return exe


# --- machine and versions -----------------------------------------------------------

def machine() -> dict[str, object]:
    model = ""
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = next(int(line.split()[1]) for line in pathlib.Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    os_name = ""
    osr = pathlib.Path("/etc/os-release")
    if osr.exists():
        for line in osr.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    return {"cores": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "os": os_name, "memory_gib": round(mem_kb / 1024 / 1024, 1),
            "python": platform.python_version()}


def venv_versions() -> dict[str, str]:
    names = ["fastapi", "uvicorn", "uvloop", "httptools", "onnxruntime", "nvidia-pytriton", "numpy"]
    probe = ("import json, importlib.metadata as m;"
             f"print(json.dumps({{n: m.version(n) for n in {names!r}}}))")
    out = subprocess.run([str(venv_python()), "-c", probe], capture_output=True, text=True, check=True)
    import json  # noqa: PLC0415

    return json.loads(out.stdout)


def tool_version(argv: list[str]) -> str:
    res = subprocess.run(argv, capture_output=True, text=True)
    text = (res.stdout + res.stderr).strip().splitlines()
    return text[0] if text else ""


def git_commit() -> str:
    res = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    return res.stdout.strip()


# --- server CPU -----------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, utime+stime+cutime+cstime in ticks) of pid, None once it is gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2:].split()
    # after the comm: state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds used so far by roots and all their descendants."""
    stats: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                stats[int(entry.name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total / CLK_TCK


def tree_pids(root: int) -> list[int]:
    """root and its descendants, now."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parent[int(entry.name)] = st[0]
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += [p for p, pp in parent.items() if pp == pid]
    return out
