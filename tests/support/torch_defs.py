"""torch.nn.Module definitions for tests/support/torch_models.py and tests/support/onnx_models.py.

Imports torch at the top, so only the builders import this module (lazily).
torch.jit.script compiles these classes from this file's source.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn


class Add(nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return a + b


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x)


class ThreeInputs(nn.Module):
    def forward(self, a: Tensor, b: Tensor, c: Tensor) -> Tensor:
        return a * b + c


class TupleOut(nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        return a + b, a * b


class ListOut(nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> List[Tensor]:
        return [a + b, a - b, a * b]


class IntAffine(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x * 3 + 1


class BoolXor(nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.logical_xor(a, b)


class Flip(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return torch.flip(x, [0])


class Half(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.half()


class IntArg(nn.Module):
    """An argument that is not a tensor: MODELEXECUTE can only pass tensors."""

    def forward(self, x: Tensor, n: int) -> Tensor:
        return x * n


class OptionalArg(nn.Module):
    def forward(self, x: Tensor, y: Optional[Tensor]) -> Tensor:
        if y is None:
            return x
        return x + y


class MulAddOne(nn.Module):
    """For torch.onnx.export: z = x * y + 1."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x * y + 1


class CNN(nn.Module):
    """MNIST-sized: [n,1,28,28] -> [n,10] log-probabilities. Two 3x3 conv + ReLU + 2x2
    max-pool stages, then two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),      # 8x13x13
            nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d(2),     # 16x5x5
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 5 * 5, 64), nn.ReLU(),
                                  nn.Linear(64, 10), nn.LogSoftmax(dim=1))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
