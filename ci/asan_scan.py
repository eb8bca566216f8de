"""Scans the AddressSanitizer logs of every server a ci/asan-tests.sh run started.

    python ci/asan_scan.py RUN_DIR

RUN_DIR/servers lists "<pid> <server dir>" per server start (written by
ci/asan/redis-server). RUN_DIR/asan.<pid> holds what ASan/LeakSanitizer reported
for that server (suppressed leaks are only counted in its "Suppressions used"
table); redis.log in the server dir, when the test left it, what Redis said.
A finding is any sanitizer ERROR, a LeakSanitizer fatal error, or a Redis crash
report. Prints each finding's head and a summary; exit status 1 when there is one,
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


def _scan_asan_log(path: Path, findings: list[Finding], suppressed: Counter[str]) -> None:
    lines = path.read_text(errors="replace").splitlines()
    in_supp = False
    for i, line in enumerate(lines):
        m = _ERROR.match(line) or _FATAL.match(line)
        if m:
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
    logs = sorted(run_dir.glob("asan.*"))
    for log in logs:
        _scan_asan_log(log, findings, suppressed)
    for d in dirs:
        if (d / "redis.log").is_file():
            _scan_redis_log(d / "redis.log", findings)
    for f in findings:
        print(f"[asan] FINDING in {f.where}: {f.title}\n{f.text}\n", flush=True)
    print(f"[asan] server starts under ASan: {len(starts)} (in {len(dirs)} dirs); "
          f"logs with output: {len(logs)}; findings: {len(findings)}")
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
