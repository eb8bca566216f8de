"""Command line: python -m build_tools {setup,headers,servers,build,build-variant,check,serve,
package,install-package,layers,examples}."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from . import paths, pins
from .errors import BuildError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=".venv/bin/python -m build_tools",
                                description=f"Build RedisAI {pins.VERSION}.")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")

    sub.add_parser("setup", help="install system packages, create .venv, pip-install the pins")

    h = sub.add_parser("headers", help="fetch redismodule.h (and ORT headers) into the cache")
    h.add_argument("--onnxruntime", action="store_true",
                   help="also fetch the ONNX Runtime C headers")

    sv = sub.add_parser("servers", help="fetch (or build) the other test servers into the cache (as setup "
                                        "does) and print where each is")
    sv.add_argument("--where", action="store_true",
                    help="only print the executables, fetching nothing")

    b = sub.add_parser("build", help="configure, compile and lay out the install tree")
    b.add_argument("--variant", default="cpu", help="backend variant name (default: cpu)")
    b.add_argument("-j", "--jobs", type=int, default=2, help="parallel compile jobs (default: 2)")
    b.add_argument("--sanitize", choices=sorted(paths.SANITIZERS), default="",
                   help="build the module and backends with a sanitizer into build-asan/ and "
                        "install-asan/redisai-<version>/ (frameworks as shipped; "
                        "see ci/asan-tests.sh)")

    b.add_argument("--with", dest="with_versions", action="append", default=[],
                   metavar="FRAMEWORK==VERSION",
                   help="also build this backend from another framework version's wheel, "
                        "side by side (e.g. onnxruntime==1.21.0; repeatable); side-by-side "
                        "folders already in the tree are rebuilt anyway")
    b.add_argument("--default", dest="defaults", action="append", default=[],
                   metavar="FRAMEWORK==VERSION",
                   help="point the backend's default link redisai_<name> at this version's "
                        "folder (default: the version in this environment)")

    v = sub.add_parser("build-variant",
                       help="build one backend from another framework version's wheel into "
                            "its own folder of the install tree (nothing else changes)",
                       description="Downloads the wheel of FRAMEWORK==VERSION into the cache "
                                   "(never installed), compiles the backend against it and "
                                   "lays out backends/redisai_<name>-<VERSION>-<variant>/.")
    v.add_argument("framework", metavar="FRAMEWORK==VERSION",
                   help="e.g. onnxruntime==1.21.0; with --variant gpu: torch==2.14.1, "
                        "onnxruntime-gpu==1.31.1")
    v.add_argument("--variant", default="cpu",
                   help="backend variant name (default: cpu); gpu builds from the framework's "
                        "CUDA build and carries its CUDA libraries (several GB; docs/gpu.md)")
    v.add_argument("--default", action="store_true",
                   help="also point the backend's default link redisai_<name> at it "
                        "(until the next `build`, which points it back unless given --default)")
    v.add_argument("-j", "--jobs", type=int, default=2, help="parallel compile jobs (default: 2)")
    v.add_argument("--install", type=Path,
                   help=f"install tree (default: {paths.install_dir().relative_to(paths.ROOT)})")

    c = sub.add_parser("check", help="verify an install tree's ELF files")
    c.add_argument("install", nargs="?", type=Path,
                   help="install tree (default: the newest install/redisai-*)")
    c.add_argument("--sanitize", choices=sorted(paths.SANITIZERS), default="",
                   help="check the sanitized tree (install-asan/redisai-<version>/)")

    s = sub.add_parser("serve", help="exec redis-server with the module and all backends",
                       usage="%(prog)s [--port P] [--install DIR] [redis-server arguments] "
                             "[-- module arguments]",
                       epilog="Other arguments go to redis-server before --loadmodule (it binds "
                              "127.0.0.1 unless given --bind); those after `--` are module "
                              "arguments, after the backends (e.g. -- THREADS_PER_QUEUE 4 "
                              "ISOLATE TORCH), as redisai-server's.")
    s.add_argument("--port", type=int, default=6380, help="port (default: 6380)")
    s.add_argument("--install", type=Path, help="install tree (default: the newest)")

    k = sub.add_parser("package", help="pack the core and each backend folder into dist/")
    k.add_argument("--install", type=Path, help="install tree (default: the newest)")
    k.add_argument("--dist", type=Path, default=paths.ROOT / "dist",
                   help="output folder (default: dist/ of this checkout)")
    k.add_argument("--level", type=int, default=None,
                   help="gzip level 0-9 (default: 1, the fastest; see the README)")

    i = sub.add_parser("install-package",
                       help="unpack an archive from `package`, verify its manifest, run check")
    i.add_argument("archive", type=Path)
    i.add_argument("dest", nargs="?", type=Path,
                   help="install tree (default: install/redisai-<version>/ for the core, "
                        "the newest install tree for a backend); a folder without "
                        "redisai.so takes a backend as a BACKENDSPATH folder")
    i.add_argument("--force", action="store_true",
                   help="replace files or a backend folder already there")
    e = sub.add_parser("examples", help="make the model files the docs' examples use "
                                        "(addmul.pt, graph.pb, add.onnx, mul.tflite)")
    e.add_argument("--out", type=Path, default=paths.ROOT / "examples",
                   help="folder (default: examples/ of this checkout)")
    sub.add_parser("layers", help="check the layer order of the C sources' includes, and of "
                                  "the calls of the last build (docs/architecture.md); print "
                                  "the include-graph figures")
    return p


def _install_or_newest(arg: Path | None) -> Path:
    if arg is not None:
        return arg
    found = paths.newest_install_dir()
    if found is None:
        raise BuildError(f"no {paths.INSTALL_ROOT}/redisai-*/redisai.so: "
                         "run `.venv/bin/python -m build_tools build` first")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    module_args: list[str] = []
    if "--" in argv:
        # Cut before argparse, which would drop the `--` and mix the module's words
        # with redis-server's.
        from .serve import command_line
        argv, module_args = command_line.split_arguments(argv)
    args, extra = parser.parse_known_args(argv)
    if (extra or module_args) and args.command != "serve":
        parser.error("unrecognized arguments: " + " ".join(extra + module_args))
    try:
        if args.command == "setup":
            from .setup_env import setup
            setup()
        elif args.command == "headers":
            from . import headers
            print(f"[headers] redismodule.h: {headers.redismodule_include_dir()}")
            if args.onnxruntime:
                print(f"[headers] onnxruntime: {headers.onnxruntime_include_dir()}")
        elif args.command == "servers":
            from . import servers, source_servers
            if not args.where:
                servers.ensure_servers()
                source_servers.ensure_source_servers()
            for name in servers.server_names():
                try:
                    print(f"{name} {servers.executable(name)}")
                except BuildError as exc:
                    print(f"{name} missing: {exc.message}")
        elif args.command == "build":
            from .build import build
            build(variant=args.variant, jobs=args.jobs, sanitize=args.sanitize,
                  with_versions=args.with_versions, defaults=args.defaults)
        elif args.command == "build-variant":
            from .build import build_variant
            build_variant(args.framework, variant=args.variant, jobs=args.jobs,
                          make_default=args.default, install=args.install)
        elif args.command == "check":
            from .check import check_tree
            if args.sanitize and args.install is None:
                tree = paths.sanitized_install_dir(args.sanitize)
            else:
                tree = _install_or_newest(args.install)
            return 0 if check_tree(tree) else 1
        elif args.command == "serve":
            from .serve import serve
            serve(_install_or_newest(args.install), args.port, extra, module_args)
        elif args.command == "package":
            from .package import DEFAULT_LEVEL, package_tree
            level = DEFAULT_LEVEL if args.level is None else args.level
            package_tree(_install_or_newest(args.install), args.dist, level)
        elif args.command == "install-package":
            from .install_package import install_package
            return 0 if install_package(args.archive, args.dest, args.force) else 1
        elif args.command == "examples":
            from .examples import make_examples
            make_examples(args.out)
        elif args.command == "layers":
            from . import layers
            problems = layers.check()
            # The calls too, when there is a build to read them from.
            if (paths.BUILD_DIR / "CMakeFiles").is_dir():
                problems += layers.check_calls()
            for line in problems:
                print(line)
            for name, value in layers.figures().items():
                print(f"[layers] {name}: {value}")
            print(f"[layers] {len(problems)} problem(s)")
            return 0 if not problems else 1
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
