"""Merge and unmerge operators written in PyTorch, for htm's `torchscript` merge plugin.

The residual MLP operators of htm's C++ `mlp` merge plugin (the paper's §3.1.2-3.1.3 with a skip
path): a parent is the pair's mean plus an MLP of the two children, the children are the parent
plus the two halves of an MLP of it; the last layers start at zero. htm calls merge(src, dst)
with two N x C tensors (src merged into dst) and unmerge(tokens) with one.

    /usr/bin/python3 mlp_merge.py --dim 64 -o merge.pt
    htm run experiments/quickstart.toml --set merge.plugin='"torchscript"' --set merge.path='"merge.pt"'
"""
import argparse
from typing import Tuple

import torch


def mlp(width_in: int, hidden: int, width_out: int) -> torch.nn.Sequential:
    out = torch.nn.Linear(hidden, width_out)
    torch.nn.init.zeros_(out.weight)
    torch.nn.init.zeros_(out.bias)
    return torch.nn.Sequential(torch.nn.LayerNorm(width_in), torch.nn.Linear(width_in, hidden), torch.nn.GELU(), out)


class MlpMerge(torch.nn.Module):
    def __init__(self, dim: int, hidden_ratio: int = 4):
        super().__init__()
        self.merge_mlp = mlp(2 * dim, hidden_ratio * dim, dim)
        self.unmerge_mlp = mlp(dim, hidden_ratio * dim, 2 * dim)

    @torch.jit.export
    def merge(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return 0.5 * (src + dst) + self.merge_mlp(torch.cat([src, dst], -1))

    @torch.jit.export
    def unmerge(self, tokens: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        first, second = self.unmerge_mlp(tokens).chunk(2, -1)
        return tokens + first, tokens + second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, required=True, help="the model's width (model.dim)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the initial weights")
    parser.add_argument("-o", "--out", default="merge.pt", help="file to write")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.jit.script(MlpMerge(args.dim)).save(args.out)


if __name__ == "__main__":
    main()
