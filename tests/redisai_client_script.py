"""Runs under .venv-client (the PyPI `redisai` 1.3.0 client and its redis<5), not under
pytest: drives the server exactly as a RedisAI user's code would. Arguments: port, then the
TF, TorchScript and ONNX blob files. Exits non-zero on the first failed check."""
import sys

import numpy as np
import redisai

port, tf_path, pt_path, onnx_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
con = redisai.Client(host="127.0.0.1", port=int(port))

a = np.array([[2, 3], [2, 3]], dtype=np.float32)
assert con.tensorset("a", a) == "OK"
assert con.tensorset("b", a) == "OK"
got = con.tensorget("a")
assert got.dtype == np.float32 and (got == a).all(), got
meta = con.tensorget("a", meta_only=True)
assert meta["dtype"] == "FLOAT" and list(meta["shape"]) == [2, 2], meta
ints = np.arange(6, dtype=np.int64).reshape(2, 3)
assert con.tensorset("i", ints) == "OK"
assert con.tensorget("i").tolist() == ints.tolist()

with open(tf_path, "rb") as f:
    assert con.modelstore("tf", "TF", "CPU", f.read(), inputs=["a", "b"], outputs=["mul"]) == "OK"
assert con.modelexecute("tf", inputs=["a", "b"], outputs=["c"]) == "OK"
assert (con.tensorget("c") == a * a).all()
assert con.modelget("tf", meta_only=True)["backend"] == "TF"

with open(pt_path, "rb") as f:
    assert con.modelstore("pt", "TORCH", "CPU", f.read()) == "OK"
assert con.modelexecute("pt", inputs=["a", "b"], outputs=["d"]) == "OK"
assert (con.tensorget("d") == a + a).all()

with open(onnx_path, "rb") as f:
    assert con.modelstore("ox", "ONNX", "CPU", f.read()) == "OK"
x = np.array([[1, 2, 3]], dtype=np.float32)
assert con.tensorset("x", x) == "OK"
assert con.modelexecute("ox", inputs=["x", "x"], outputs=["y"]) == "OK"
assert (con.tensorget("y") == x + x).all()

script = """
def double(tensors: List[Tensor], keys: List[str], args: List[str]):
    return tensors[0] * 2
"""
assert con.scriptstore("s", "CPU", script, entry_points="double") == "OK"
assert con.scriptexecute("s", "double", inputs=["a"], outputs=["e"]) == "OK"
assert (con.tensorget("e") == a * 2).all()
info = con.infoget("pt")
assert info["calls"] == 1 and info["backend"] == "TORCH", info
print("redisai client: all checks passed")
