#!/usr/bin/env python3
"""Which fused attention torch picks for htm's attention at the paper's size, and what each kernel
keeps for backward (scripts/gpu/check.sh runs it; docs/gpu.md).

htm's gpu kernels call torch's scaled_dot_product_attention (kernels/gpu.cpp, fused_attention)
with B x h x T x d operands that are transposed views of B x T x C projections, with dropout in
training, and for the unmerge layers' learned queries a query batch of 1 expanded to B. Whether
torch then runs a memory-efficient kernel (which keeps the output and a log-sum-exp) or its math
path (which keeps the B x h x Tq x Tk weights and their dropout mask) is worth megabytes a sample:
this prints, per case, the op torch dispatched to, the memory the call left allocated (its output
and what autograd kept) and its peak, default and under each backend forced in turn.

Usage: python3 scripts/gpu/sdpa_probe.py [--device cuda] [--batch 8]
"""
import argparse
import contextlib

import torch
import torch.nn.functional as F

try:  # torch 2.3 and later
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # an older torch: the default alone
    SDPBackend, sdpa_kernel = None, None


def operands(B, Tq, Tk, heads, d, dtype, device, query_batch):
    """q, k, v as htm's split() makes them: B x T x C projections viewed as B x h x T x d."""
    C = heads * d

    def split(t, n):
        b = t.size(0)
        t = t if b == B else t.expand(B, n, C)
        return t.reshape(B, n, heads, d).transpose(1, 2)

    q = torch.randn(query_batch, Tq, C, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(B, Tk, C, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(B, Tk, C, device=device, dtype=dtype, requires_grad=True)
    return split(q, Tq), split(k, Tk), split(v, Tk)


def attention_ops(fn):
    """The aten ops with 'attention' in their name that one call of fn dispatched to."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = fn()
    names = sorted({e.name for e in prof.events() if "attention" in e.name and e.name.startswith("aten::_")})
    return out, names


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def probe(label, args, dtype, Tq, Tk, query_batch, backend):
    cuda = args.device.startswith("cuda")
    q, k, v = operands(args.batch, Tq, Tk, args.heads, args.head_dim, dtype, args.device, query_batch)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    name = "default" if backend is None else backend.name.lower()
    scope = contextlib.nullcontext() if backend is None else sdpa_kernel([backend])
    try:
        with scope:
            out, ops = attention_ops(lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=args.dropout))
    except RuntimeError as e:
        print(f"sdpa {label} {name}: refused ({str(e).splitlines()[0][:120]})")
        return
    kept = peak = "n/a"
    if cuda:
        torch.cuda.synchronize()
        kept = mib(torch.cuda.memory_allocated() - base)
        peak = mib(torch.cuda.max_memory_allocated() - base)
    out.float().sum().backward()  # the backward runs too: a kernel that cannot is seen here
    print(f"sdpa {label} {name}: {' '.join(ops) or '(no attention op)'}; kept {kept}, peak {peak}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    print(f"sdpa torch {torch.__version__} on {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else ""))
    T = args.tokens
    backends = [None]
    if SDPBackend is not None:
        backends += [b for b in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION,
                                 getattr(SDPBackend, "CUDNN_ATTENTION", None)) if b is not None]
    dtypes = [torch.float32, torch.bfloat16]
    for dtype in dtypes:
        short = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
        cases = [  # (label, Tq, Tk, query batch): an encoder's self-attention; an unmerge layer's
            (f"{short} self B={args.batch} T={T} h={args.heads} d={args.head_dim} p={args.dropout}", T, T, args.batch),
            (f"{short} cross Tq={T} Tk={T // 2} queries expanded from batch 1", T, T // 2, 1),
        ]
        for label, Tq, Tk, qb in cases:
            for backend in backends:
                probe(label, args, dtype, Tq, Tk, qb, backend)


if __name__ == "__main__":
    main()
