"""What the tests of a run's ACL share (tests/security/test_script_acl.py,
test_module_call_acl.py): a TorchScript whose entry points call into Redis as their caller
(`redis.execute`, `redisAI.model_execute`), the ACL LOG and AI.INFO as lists, and the
module of tests/fixtures/modules/call_module.c (`raicall`), another module that calls
commands through RedisModule_Call."""
from __future__ import annotations

import pathlib
from typing import Any

from native import cc_shared
from paths import ROOT
from resp import RawClient

WRAP = "Redis command returned an error: "
WOULD_BLOCK = ("ERR {} cannot run inside a script's redis.execute or a module's call: "
               "it would block")

ACL_SCRIPT = '''
def call(tensors: List[Tensor], keys: List[str], args: List[str]):
    redis.execute(args[0], args[1:])
    return torch.tensor([1])

def get_len(tensors: List[Tensor], keys: List[str], args: List[str]):
    v = redis.execute("GET", args[0])
    return torch.tensor([len(str(v))])

def model(tensors: List[Tensor], keys: List[str], args: List[str]):
    out = redisAI.model_execute(args[0], [tensors[0], tensors[1]], 1)
    return out[0]

def count(tensors: List[Tensor], keys: List[str], args: List[str]):
    return torch.tensor([len(redis.asList(redis.execute(args[0], args[1:])))])

def fill(tensors: List[Tensor], keys: List[str], args: List[str]):
    n = int(args[0])
    for i in range(n):
        redis.execute("SET", "big:" + str(i), args[1])
    return torch.tensor([n])

def bar(a: Tensor, b: Tensor):
    return a + b
'''
ACL_ENTRY_POINTS = ("call", "get_len", "model", "count", "fill")

CALL_MODULE_SOURCE = ROOT / "tests" / "fixtures" / "modules" / "call_module.c"


def store_script(c: RawClient, key: str) -> None:
    eps = list(ACL_ENTRY_POINTS)
    assert c.execute("AI.SCRIPTSTORE", key, "CPU", "ENTRY_POINTS", len(eps), *eps,
                     "SOURCE", ACL_SCRIPT) == "OK"


def acl_log(admin: RawClient) -> list[dict[bytes, Any]]:
    entries = admin.execute("ACL", "LOG")
    return [dict(zip(e[::2], e[1::2])) for e in entries]


def info_calls(admin: RawClient, key: str) -> tuple[int, int]:
    info = admin.execute("AI.INFO", key)
    fields = dict(zip(info[::2], info[1::2]))
    return fields[b"calls"], fields[b"errors"]


def build_call_module(out_dir: pathlib.Path) -> pathlib.Path:
    """call_module.c compiled against the pinned redismodule.h into out_dir."""
    from build_tools import headers  # noqa: PLC0415 (fetches the header on first use)

    out = out_dir / "call_module.so"
    cc_shared(f"-I{headers.redismodule_include_dir()}", "-o", str(out), str(CALL_MODULE_SOURCE))
    return out
