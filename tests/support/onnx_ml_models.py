"""ONNX models for the RedisAI 1.2 compatibility tests of the ONNX backend, made at test time
with the `onnx` helper API (no scikit-learn in the test environment):

* `classifier()`: a softmax linear classifier fitted with numpy on iris-like data, in the
  form skl2onnx gives a scikit-learn LogisticRegression: `LinearClassifier` (ai.onnx.ml)
  then `ZipMap`, so `output_probability` is seq(map(int64, float)). Its class labels are
  deliberately not in ascending order, so a test can tell key order from column order.
* `strings()`: a STRING input [N, 2] with a STRING output (Identity), a string -> int64
  classifier (`LabelEncoder`, ai.onnx.ml) and `rows`, an int64 [N] holding N in every
  element, so a client can see the batch it ran in.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

IR_VERSION = 8  # readable by every onnxruntime of the last years
ML_DOMAIN = "ai.onnx.ml"


@functools.cache
def _onnx() -> Any:
    import onnx  # noqa: PLC0415 - lazy on purpose

    return onnx


def _model(graph: Any) -> bytes:
    onnx = _onnx()
    h = onnx.helper
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13),
                                               h.make_opsetid(ML_DOMAIN, 1)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model.SerializeToString()


# --------------------------------------------------------------------------------------
# seq(map(int64, float)): a classifier with ZipMap
# --------------------------------------------------------------------------------------

FEATURES = 4
LABELS = (30, 10, 20)  # class j of the coefficients is label LABELS[j]


@dataclasses.dataclass(frozen=True)
class Classifier:
    blob: bytes
    coef: np.ndarray       # [classes, features]
    intercept: np.ndarray  # [classes]
    samples: np.ndarray    # float32 [n, features], the data it was fitted on

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """numpy's softmax of the linear scores, columns in LABELS order."""
        z = x.astype(np.float64) @ self.coef.T + self.intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


def iris_like(n_per_class: int = 30, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian clusters in four features, roughly the scale of the iris data."""
    rng = np.random.default_rng(seed)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    x = np.concatenate([c + rng.normal(0.0, 0.35, (n_per_class, FEATURES)) for c in centres])
    y = np.repeat(np.arange(len(centres)), n_per_class)
    return x.astype(np.float32), y


def fit_softmax(x: np.ndarray, y: np.ndarray, classes: int, steps: int = 400,
                lr: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression by gradient descent (what LogisticRegression fits)."""
    mean, std = x.mean(axis=0), x.std(axis=0)
    xs = (x - mean) / std
    w = np.zeros((classes, x.shape[1]))
    b = np.zeros(classes)
    onehot = np.eye(classes)[y]
    for _ in range(steps):
        z = xs @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) / len(x)
        w -= lr * g.T @ xs
        b -= lr * g.sum(axis=0)
    # fold the standardisation into the coefficients: the model takes raw features
    return w / std, b - (w / std) @ mean


STRING_LABELS = ("thirty", "ten", "twenty")  # LABELS, named


@functools.cache
def classifier(string_labels: bool = False) -> Classifier:
    """With string_labels, `label` is STRING and the maps are map(string, float), as
    skl2onnx converts a classifier fitted on string targets."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    x, y = iris_like()
    coef, intercept = fit_softmax(x, y, len(LABELS))
    if string_labels:
        key_type, classify, zip_labels = (TP.STRING, {"classlabels_strings": list(STRING_LABELS)},
                                          {"classlabels_strings": list(STRING_LABELS)})
    else:
        key_type, classify, zip_labels = (TP.INT64, {"classlabels_ints": list(LABELS)},
                                          {"classlabels_int64s": list(LABELS)})
    nodes = [
        h.make_node("LinearClassifier", ["X"], ["label", "probabilities"], domain=ML_DOMAIN,
                    coefficients=[float(v) for v in coef.ravel()],
                    intercepts=[float(v) for v in intercept],
                    multi_class=1, post_transform="SOFTMAX", **classify),
        h.make_node("ZipMap", ["probabilities"], ["output_probability"], domain=ML_DOMAIN,
                    **zip_labels),
    ]
    seq_of_maps = h.make_sequence_type_proto(
        h.make_map_type_proto(key_type, h.make_tensor_type_proto(TP.FLOAT, [])))
    graph = h.make_graph(
        nodes, "linear_classifier",
        [h.make_tensor_value_info("X", TP.FLOAT, ["N", FEATURES])],
        [h.make_tensor_value_info("label", key_type, ["N"]),
         h.make_value_info("output_probability", seq_of_maps)])
    return Classifier(blob=_model(graph), coef=coef, intercept=intercept, samples=x)


# --------------------------------------------------------------------------------------
# STRING inputs
# --------------------------------------------------------------------------------------

WORDS = ("red", "green", "blue")  # LabelEncoder: red -> 0, green -> 1, blue -> 2, else -1


@functools.cache
def strings() -> bytes:
    """Input `s` STRING [N, 2]; outputs `same` = s, `code` = LabelEncoder(s) int64 [N, 2],
    `rows` int64 [N] = N."""
    onnx = _onnx()
    h, TP = onnx.helper, onnx.TensorProto
    nodes = [
        h.make_node("Identity", ["s"], ["same"]),
        h.make_node("LabelEncoder", ["s"], ["code"], domain=ML_DOMAIN,
                    classes_strings=list(WORDS), default_int64=-1),
        h.make_node("Shape", ["s"], ["shape"]),
        h.make_node("Slice", ["shape", "zero", "one"], ["n"]),
        h.make_node("Expand", ["n", "n"], ["rows"]),
    ]
    graph = h.make_graph(
        nodes, "strings",
        [h.make_tensor_value_info("s", TP.STRING, ["N", 2])],
        [h.make_tensor_value_info("same", TP.STRING, ["N", 2]),
         h.make_tensor_value_info("code", TP.INT64, ["N", 2]),
         h.make_tensor_value_info("rows", TP.INT64, ["N"])],
        initializer=[h.make_tensor("zero", TP.INT64, [1], [0]),
                     h.make_tensor("one", TP.INT64, [1], [1])])
    return _model(graph)


def encode(words: np.ndarray) -> np.ndarray:
    lookup = {w: i for i, w in enumerate(WORDS)}
    return np.vectorize(lambda w: lookup.get(w, -1), otypes=[np.int64])(words)
