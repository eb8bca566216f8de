"""The layering of the C sources is checked, not hoped for (build_tools/layers.py,
docs/architecture.md "The layers"): every `#include "..."` under module/, backends/,
include/, the test backends and modules and bench/floor/ is resolved as the compiler
resolves it and must point down the layer order (or into the folders a separate
program may use), be spelled from an include directory, and take part in no cycle
between units. The checker itself is tested on small trees made here, so that it is
known to fail when it should. Reads sources (and build/compile_commands.json); starts
no server."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from build_tools import layers, paths


def test_the_tree_keeps_the_layer_order() -> None:
    problems = layers.check()
    assert not problems, "layer violations:\n" + "\n".join(problems)


def test_calls_keep_the_layer_order() -> None:
    """The objects of the last build (build/): what each refers to in another file of
    its program goes down the layer order, and the core's units call in no cycle."""
    graphs = layers.call_graph()
    assert "redisai" in graphs and len(graphs["redisai"]) > 50, sorted(graphs)
    problems = layers.check_calls()
    assert not problems, "call violations:\n" + "\n".join(problems)


def test_figures_of_the_include_graph() -> None:
    figures = layers.figures()
    assert figures == {"module_root_files": 1, "units_in_cycles": 0,
                       "backend_includes_of_core_headers": 0}, figures


def test_every_program_folder_exists() -> None:
    missing = [f for prog in layers.PROGRAMS for f in prog.folders
               if not (paths.ROOT / f).is_dir()]
    assert not missing, missing


def test_include_directories_are_cmakes() -> None:
    """The checker resolves with the include directories CMake gives each target: the
    `-I` flags of every compiled source (build/compile_commands.json, written by the
    build) must be its program's, in order."""
    db = paths.BUILD_DIR / "compile_commands.json"
    assert db.is_file(), f"{db} missing: run `.venv/bin/python -m build_tools build` first"
    root = paths.ROOT.resolve()
    checked = 0
    wrong = []
    for entry in json.loads(db.read_text()):
        src = Path(entry["file"]).resolve()
        try:
            rel = src.relative_to(root).as_posix()
        except ValueError:
            continue
        prog = layers.program_of(rel)
        if prog is None:
            continue
        words = entry.get("arguments") or shlex.split(entry["command"])
        # The C unit tests compile leaf files again, with include directories of
        # their own: the file's own program is the one that counts.
        out = words[words.index("-o") + 1] if "-o" in words else ""
        if "/unit_" in out or out.startswith("CMakeFiles/unit_"):
            continue
        dirs = []
        for i, w in enumerate(words):
            d = words[i + 1] if w == "-I" else w[2:] if w.startswith("-I") else None
            if d is not None:
                dirs.append(Path(d).resolve().relative_to(root).as_posix())
        checked += 1
        # CMake may give a target fewer directories (rai_load.c needs none), never
        # another one or another order: then both resolve every include alike.
        ranks = [prog.include_dirs.index(d) if d in prog.include_dirs else -1 for d in dirs]
        if -1 in ranks or ranks != sorted(ranks):
            wrong.append(f"{rel}: CMake gives -I {dirs}, layers.py says {list(prog.include_dirs)}")
    assert checked > 40, f"only {checked} sources of the programs in {db}"
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------------------
# The checker on trees made here
# --------------------------------------------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "include/redisai/backend_abi.h": "",
        "module/core/error.h": '#include "redisai/backend_abi.h"\n',
        "module/core/error.c": '#include "core/error.h"\n',
        "module/engine/dag.c": '#include "core/error.h"\n#include "redismodule.h"\n',
        "module/redisai.c": '#include "engine/dag.h"\n',
        "module/engine/dag.h": "",
        "backends/torch/torch_backend.cpp": '#include "redisai/backend_abi.h"\n'
                                            '#include "torch/torch_backend.h"\n',
        "backends/torch/torch_backend.h": "",
    })
    assert layers.check(root) == []
    assert layers.figures(root) == {"module_root_files": 1, "units_in_cycles": 0,
                                    "backend_includes_of_core_headers": 0}


def test_an_upward_include_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/core/config.c": '#include "loader/backend_loader.h"\n',
        "module/loader/backend_loader.h": "",
    })
    problems = layers.check(root)
    assert len(problems) == 1 and "module/core/ may not use module/loader/" in problems[0]


def test_an_unqualified_include_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/engine/dag.c": '#include "dag.h"\n',
        "module/engine/dag.h": "",
    })
    problems = layers.check(root)
    assert len(problems) == 1 and "folder-qualified" in problems[0], problems


def test_a_header_spelled_from_nowhere_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/engine/run_queue.c": '#include "dag.h"\n',
        "module/engine/dag.h": "",
        "module/types/model.c": '#include "engine/dag.h"\n',
    })
    problems = layers.check(root)
    assert any("module/engine/run_queue.c:1" in p for p in problems), problems


def test_a_backend_including_the_core_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/core/tensor.h": "",
        "backends/onnxruntime/ort_tensor.c": '#include "../../module/core/tensor.h"\n',
    })
    problems = layers.check(root)
    assert any("backends/onnxruntime/ may not use module/core/" in p for p in problems), problems
    assert layers.figures(root)["backend_includes_of_core_headers"] == 1


def test_a_cycle_inside_one_folder_fails(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/engine/dag.h": "",
        "module/engine/dag.c": '#include "engine/run_queue.h"\n',
        "module/engine/run_queue.h": "",
        "module/engine/run_queue.c": '#include "engine/dag.h"\n',
    })
    problems = layers.check(root)
    assert problems == ["include cycle between units: module/engine/dag <-> "
                        "module/engine/run_queue"], problems
    assert layers.figures(root)["units_in_cycles"] == 2


def test_the_host_uses_only_what_it_compiles_in(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "module/isolation/host/host_load.c": '#include "loader/backend_file.h"\n'
                                             '#include "loader/backend_loader.h"\n',
        "module/loader/backend_file.h": "",
        "module/loader/backend_loader.h": "",
    })
    problems = layers.check(root)
    assert len(problems) == 1 and "backend_loader.h" in problems[0], problems


@pytest.mark.parametrize("spelled,ok", [("marker.h", True), ("redisai/backend_abi.h", True),
                                        ("../../module/core/error.h", False)])
def test_test_backends_may_use_their_own_headers(tmp_path: Path, spelled: str, ok: bool) -> None:
    root = _tree(tmp_path, {
        "include/redisai/backend_abi.h": "",
        "module/core/error.h": "",
        "tests/fixtures/backends/marker.h": "",
        "tests/fixtures/backends/onnx_kind.c": f'#include "{spelled}"\n',
    })
    assert (layers.check(root) == []) == ok


def _objects(build: Path, target: str, files: dict[str, str]) -> None:
    """Compiles each source (repository-relative name -> C text) to the object file CMake
    would make for target, and writes the target's link.txt naming them."""
    tdir = build / "CMakeFiles" / f"{target}.dir"
    objs = []
    for rel, text in files.items():
        src = build / "src" / rel
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(text)
        obj = tdir / f"{rel}.o"
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", "-o", str(obj), str(src)], check=True)
        objs.append(obj.relative_to(build).as_posix())
    (tdir / "link.txt").write_text("cc -shared -o x.so " + " ".join(objs) + "\n")


def test_the_call_check_sees_an_upward_call_and_a_cycle(tmp_path: Path) -> None:
    _objects(tmp_path, "redisai", {
        "module/core/config.c":
            "int Backend_Load(void); int Config_Init(void) { return Backend_Load(); }\n",
        "module/loader/backend_loader.c":
            "int Config_Init(void); int Backend_Load(void) { return 0; }\n"
            "int Backend_Init(void) { return Config_Init(); }\n",
        "module/engine/dag.c": "int Batch_Run(void); int Dag_Run(void) { return Batch_Run(); }\n",
        "module/engine/batch.c": "int Dag_Run(void); int Batch_Run(void) { return Dag_Run(); }\n",
    })
    problems = layers.check_calls(tmp_path)
    assert any("module/core/config calls into module/loader/backend_loader" in p
               for p in problems), problems
    assert "redisai: call cycle between units: module/engine/batch <-> module/engine/dag" \
        in problems, problems
    assert not any("backend_loader calls into" in p for p in problems), problems
