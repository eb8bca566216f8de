"""Scans the AddressSanitizer logs of every server a ci/asan-tests.sh run started.

    python ci/asan_scan.py RUN_DIR

RUN_DIR/servers lists "<pid> <server dir>" per server start (written by
ci/asan/redis-server). RUN_DIR/asan.<pid> holds what ASan/LeakSanitizer reported
for that server (suppressed leaks are only counted in its "Suppressions used"
table); redis.log in the server dir, when the test left it, what Redis said.
A finding is any sanitizer ERROR, a LeakSanitizer fatal error, or a Redis crash
report. A server that exited at start because the module refused to load
(Redis logs "Can't load module" and calls exit(1) without freeing anything) is
expected to leak what Redis and the module had allocated: its LeakSanitizer
reports are counted apart, never its AddressSanitizer errors. Prints each finding's head and a summary; exit status 1 when there is one,
or when no server ran under the wrapper at all (the run would prove nothing).
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_ERROR = re.compile(r"^==\d+==ERROR: (AddressSanitizer|LeakSanitizer)\b(.*)$")
_FATAL = re.compile(r"^==\d+==(LeakSanitizer has encountered a fatal error|AddressSanitizer: CHECK failed.*)")
_SUPPRESSED = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s*$")
_SUMMARY = re.compile(r"^SUMMARY: (AddressSanitizer|LeakSanitizer): (.*)$")
_REDIS_CRASH = re.compile(r"(crashed by signal|ASSERTION FAILED|REDIS BUG REPORT START)")
_HEAD_LINES = 40


@dataclass
class Finding:
    where: Path
    title: str
    text: str


def _aborted_at_start(server_dir: Path | None) -> bool:
    log = server_dir / "redis.log" if server_dir else None
    return bool(log and log.is_file() and "Can't load module" in log.read_text(errors="replace"))


def _scan_asan_log(path: Path, findings: list[Finding], suppressed: Counter[str],
                   aborted: bool = False, aborted_leaks: list[Path] | None = None) -> None:
    lines = path.read_text(errors="replace").splitlines()
    in_supp = False
    for i, line in enumerate(lines):
        m = _ERROR.match(line) or _FATAL.match(line)
        if m and aborted and m.group(1) == "LeakSanitizer" and aborted_leaks is not None:
            aborted_leaks.append(path)
        elif m:
            summary = next((ln for ln in lines[i:] if _SUMMARY.match(ln)), line)
            findings.append(Finding(path, summary.strip(),
                                    "\n".join(lines[i:i + _HEAD_LINES])))
        if line.startswith("Suppressions used:"):
            in_supp = True
            continue
        if in_supp:
            s = _SUPPRESSED.match(line)
            if s and s.group(1).isdigit():
                suppressed[s.group(3)] += int(s.group(1))
            elif line.startswith("----") or "count" in line:
                continue
            else:
                in_supp = False


def _scan_redis_log(path: Path, findings: list[Finding]) -> None:
    lines = path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if _REDIS_CRASH.search(line):
            findings.append(Finding(path, line.strip(), "\n".join(lines[i:i + _HEAD_LINES])))
            return


def scan(run_dir: Path) -> int:
    listing = run_dir / "servers"
    starts = [ln.split(" ", 1) for ln in listing.read_text().splitlines()] if listing.is_file() else []
    dirs = list(dict.fromkeys(Path(d) for _, d in starts))
    findings: list[Finding] = []
    suppressed: Counter[str] = Counter()
    dir_of = {pid: Path(d) for pid, d in starts}
    aborted_leaks: list[Path] = []
    logs = sorted(run_dir.glob("asan.*"))
    for log in logs:
        server_dir = dir_of.get(log.name.split(".", 1)[1])
        _scan_asan_log(log, findings, suppressed, _aborted_at_start(server_dir), aborted_leaks)
    for d in dirs:
        if (d / "redis.log").is_file():
            _scan_redis_log(d / "redis.log", findings)
    for f in findings:
        print(f"[asan] FINDING in {f.where}: {f.title}\n{f.text}\n", flush=True)
    print(f"[asan] server starts under ASan: {len(starts)} (in {len(dirs)} dirs); "
          f"logs with output: {len(logs)}; findings: {len(findings)}")
    if aborted_leaks:
        print(f"[asan] leak reports of servers that exited because the module refused to load "
              f"(Redis exit(1) frees nothing; not findings): {len(aborted_leaks)}")
    for template, count in sorted(suppressed.items()):
        print(f"[asan] suppressed (ci/asan/lsan.supp) {template}: {count} leak report(s)")
    if not starts:
        print(f"[asan] no server ran under ci/asan/redis-server ({listing} is missing): "
              "the run proves nothing", file=sys.stderr)
        return 1
    return 1 if findings else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python ci/asan_scan.py RUN_DIR")
    sys.exit(scan(Path(sys.argv[1])))
