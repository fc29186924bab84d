"""A merge policy written in PyTorch, for htm's `torchscript` policy plugin.

The pair score is htm's C++ `bilinear` policy (plugins/policy/bilinear): logits x_i^T W x_j with
W = (A + A^T) / 2 over the tokens a merging block receives (htm passes them detached). htm calls
forward(tokens, depth) with tokens B x T x C and the 1-based encoder layer, and wants the B x T x T
pair logits; it samples the pairs, their exact log-probabilities and the entropy itself, from the
run's seeded generator. With --unmerge the module also scores unmerges (unmerge_scores: B x T);
without it htm's own unmerge scoring MLP (the paper's, §3.1.3) is used.

    /usr/bin/python3 bilinear_policy.py --dim 64 -o policy.pt
    htm run experiments/quickstart.toml --set policy.plugin='"torchscript"' --set policy.path='"policy.pt"'
"""
import argparse

import torch


class BilinearPolicy(torch.nn.Module):
    def __init__(self, dim: int, init_std: float = 0.01):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(dim, dim) * init_std)

    def forward(self, tokens: torch.Tensor, depth: int) -> torch.Tensor:
        w = 0.5 * (self.weight + self.weight.t())
        return torch.matmul(torch.matmul(tokens, w), tokens.transpose(1, 2))


class BilinearPolicyWithUnmerges(BilinearPolicy):
    def __init__(self, dim: int, init_std: float = 0.01):
        super().__init__(dim, init_std)
        self.unmerge_score = torch.nn.Linear(dim, 1)

    @torch.jit.export
    def unmerge_scores(self, tokens: torch.Tensor, depth: int) -> torch.Tensor:
        return self.unmerge_score(tokens).squeeze(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, required=True, help="the model's width (model.dim)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the initial weights")
    parser.add_argument("--unmerge", action="store_true", help="score unmerges in Python too")
    parser.add_argument("-o", "--out", default="policy.pt", help="file to write")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    policy = (BilinearPolicyWithUnmerges if args.unmerge else BilinearPolicy)(args.dim)
    torch.jit.script(policy).save(args.out)


if __name__ == "__main__":
    main()
