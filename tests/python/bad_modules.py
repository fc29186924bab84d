"""Modules the torchscript plugins must refuse, each with one line (tests/torchscript_test.cpp,
tests/python/policy_test.sh). TorchScript compiles from source files, hence a file of its own.
    usage: bad_modules.py OUT_DIR
"""
import os
import sys
import zipfile
from typing import Tuple

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "python_policy"))
from bilinear_policy import BilinearPolicy  # noqa: E402


class WrongSignature(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class WrongShape(torch.nn.Module):
    def forward(self, tokens: torch.Tensor, depth: int) -> torch.Tensor:
        return tokens.sum(-1)


class Unmerges(torch.nn.Module):
    def forward(self, tokens: torch.Tensor, depth: int) -> torch.Tensor:
        return tokens @ tokens.transpose(1, 2)

    @torch.jit.export
    def unmerge_scores(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.sum(-1)


class MergeOnly(torch.nn.Module):
    @torch.jit.export
    def merge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return src + dst


class HalfChildren(torch.nn.Module):
    @torch.jit.export
    def merge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return src + dst

    @torch.jit.export
    def unmerge(self, tokens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        first, second = tokens.chunk(2, -1)
        return first, second


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    path = lambda name: os.path.join(out, name)  # noqa: E731
    torch.manual_seed(0)
    torch.jit.script(WrongSignature()).save(path("signature.pt"))
    torch.jit.script(WrongShape()).save(path("shape.pt"))
    torch.jit.script(Unmerges()).save(path("unmerge_signature.pt"))
    torch.jit.script(MergeOnly()).save(path("merge_only.pt"))
    torch.jit.script(HalfChildren()).save(path("half_children.pt"))
    torch.jit.script(BilinearPolicy(8)).save(path("width8.pt"))
    torch.jit.script(BilinearPolicy(16)).save(path("policy16.pt"))
    torch.save(torch.nn.Linear(16, 16).state_dict(), path("state_dict.pt"))
    with open(path("text.pt"), "w") as f:
        f.write("not a module\n")
    # A module saved as a newer torch would: the archive's format version raised to 99.
    with zipfile.ZipFile(path("policy16.pt")) as src, zipfile.ZipFile(path("newer.pt"), "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, b"99\n" if item.filename.endswith("/version") else data)


if __name__ == "__main__":
    main()
