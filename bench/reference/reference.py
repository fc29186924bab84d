#!/usr/bin/python3
"""Single-file PyTorch baseline of the paper's Hierarchical Token Merging autoencoder (§3.1,
appendix A.2, Table 3), written the way a 2023 research codebase would write it, and timed the
way `htm bench` times its training step (one warm-up step, then N timed steps of forward, MSE
loss, REINFORCE surrogate, backward and AdamW; medians; peak VmHWM).

    python3 bench/reference/reference.py --threads 1 --steps 8
    python3 bench/reference/reference.py --threads 1 --sampler-only

Deliberately unoptimised: nn.MultiheadAttention, nn.Linear, the B×T×T×h head logits, and the
paper's one-pair-at-a-time torch.multinomial sampler (O(r·T²) per merging layer).
"""
import argparse
import math
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:  # a pyenv/venv python3 first on PATH cannot see Debian's python3-torch
    if os.path.exists("/usr/bin/python3") and not os.environ.get("HTM_REFERENCE_REEXEC"):
        os.environ["HTM_REFERENCE_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------------------------
# Encodings (appendix A.2)

def fourier_features(h, w, bands):
    """(2 + 4·bands)×h×w: raw (x, y) plus sin/cos(2π·coord·freq) per axis."""
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    freqs = torch.linspace(1.0 / max(h, w), min(h, w) / 2.0, bands).view(bands, 1, 1)
    fy, fx = 2 * math.pi * ys[None] * freqs, 2 * math.pi * xs[None] * freqs
    return torch.cat([xs[None], ys[None], fy.sin(), fy.cos(), fx.sin(), fx.cos()], 0)


def timestep_encoding(depths, dim):
    """Eq. 7: TE(d, 2i) = sin(d / 10000^(2i/C)), TE(d, 2i+1) = cos(...)."""
    d = torch.arange(depths, dtype=torch.float32)[:, None]
    div = torch.pow(10000.0, torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    te = torch.zeros(depths, dim)
    te[:, 0::2] = torch.sin(d / div)
    te[:, 1::2] = torch.cos(d / div)
    return te


# ----------------------------------------------------------------------------------------------
# Adapters

class ImageLifter(nn.Module):
    """Pixels ++ Fourier features, n×n patches, LayerNorm → Linear → LayerNorm to C."""

    def __init__(self, channels, size, patch, bands, dim):
        super().__init__()
        self.patch = patch
        self.register_buffer("pos", fourier_features(size, size, bands))
        patch_dim = (channels + self.pos.shape[0]) * patch * patch
        self.norm_in = nn.LayerNorm(patch_dim)
        self.proj = nn.Linear(patch_dim, dim)
        self.norm_out = nn.LayerNorm(dim)

    def forward(self, img):
        B, _, H, W = img.shape
        n = self.patch
        x = torch.cat([img, self.pos[None].expand(B, -1, -1, -1)], 1)  # B×(3+F)×H×W
        K = x.shape[1]
        x = x.view(B, K, H // n, n, W // n, n).permute(0, 2, 4, 1, 3, 5).reshape(B, -1, K * n * n)
        return self.norm_out(self.proj(self.norm_in(x)))


class ImageUnlifter(nn.Module):
    """Perceiver IO decoder: each pixel's Fourier features → Linear → query of one multi-head
    cross-attention over the final decoder tokens → MLP → tanh."""

    def __init__(self, channels, size, bands, dim, heads, dropout):
        super().__init__()
        self.size = size
        pos = fourier_features(size, size, bands)
        self.register_buffer("pos", pos.view(pos.shape[0], -1).t().contiguous())  # HW×F
        self.query = nn.Linear(self.pos.shape[1], dim)
        self.norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, channels))

    def forward(self, tokens):
        B = tokens.shape[0]
        q = self.query(self.pos)[None].expand(B, -1, -1)  # B×HW×C
        kv = self.norm_kv(tokens)
        y = q + self.attn(self.norm_q(q), kv, kv, need_weights=False)[0]
        y = torch.tanh(self.head(y))  # B×HW×channels
        return y.transpose(1, 2).reshape(B, -1, self.size, self.size)


# ----------------------------------------------------------------------------------------------
# Blocks

class ResidualMLP(nn.Module):
    def __init__(self, dim, dropout, ratio=4):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, ratio * dim), nn.GELU(),
                                 nn.Linear(ratio * dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        return x + self.net(x)


class TransformerBlock(nn.Module):
    """Pre-norm transformer encoder block: MHA then GELU MLP ×4, both residual."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.mlp = ResidualMLP(dim, dropout)

    def forward(self, x):
        h = self.norm(x)
        x = x + self.drop(self.attn(h, h, h, need_weights=False)[0])
        return self.mlp(x)


class CrossAttention(nn.Module):
    """The new population queries the old one (keys/values from the old tokens), residual."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.drop = nn.Dropout(dropout)

    def forward(self, new, old):
        kv = self.norm_kv(old)
        return new + self.drop(self.attn(self.norm_q(new), kv, kv, need_weights=False)[0])


def sample_pairs(policy, T, r):
    """The paper's sampler: r disjoint ordered pairs (i merged into j), one pair at a time from
    the masked policy renormalised over the pairs whose tokens are both still unused.
    policy: B×(T·T) probabilities (diagonal already 0), detached. Returns src, dst: B×r."""
    B = policy.shape[0]
    batch = torch.arange(B)
    mask = torch.ones(B, T, T)
    src = torch.empty(B, r, dtype=torch.long)
    dst = torch.empty(B, r, dtype=torch.long)
    for k in range(r):
        p = policy * mask.view(B, -1)
        p = p / p.sum(-1, keepdim=True)
        idx = torch.multinomial(p, 1).squeeze(1)
        i, j = idx // T, idx % T
        src[:, k], dst[:, k] = i, j
        for t in (i, j):  # neither token may take part in another merge
            mask[batch, t, :] = 0
            mask[batch, :, t] = 0
    return src, dst


class MergeBlock(nn.Module):
    """Learned policy → r sampled pairs → merge MLP 2C→4C→C → cross-attention over the pre-merge
    tokens → residual MLP. Returns T−r tokens and the B sampled log-probabilities."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads = heads
        self.policy_norm = nn.LayerNorm(dim)
        self.policy_q = nn.Linear(dim, dim)
        self.policy_k = nn.Linear(dim, dim)
        self.head_weights = nn.Parameter(torch.ones(heads) / heads)  # learned weighted sum of heads
        self.merge = nn.Sequential(nn.Linear(2 * dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.cross = CrossAttention(dim, heads, dropout)
        self.mlp = ResidualMLP(dim, dropout)

    def logits(self, x):
        B, T, C = x.shape
        h, d = self.heads, C // self.heads
        z = self.policy_norm(x.detach())
        q = self.policy_q(z).view(B, T, h, d)
        k = self.policy_k(z).view(B, T, h, d)
        l_h = torch.einsum("bihd,bjhd->bijh", q, k) / math.sqrt(d)  # B×T×T×h (eq. 1)
        return (l_h * self.head_weights).sum(-1)  # B×T×T

    def forward(self, x, r):
        B, T, C = x.shape
        batch = torch.arange(B)[:, None]
        eye = torch.eye(T, dtype=torch.bool)
        logits = self.logits(x).masked_fill(eye, float("-inf")).view(B, T * T)
        log_probs = F.log_softmax(logits, -1)  # stays in the graph
        policy = F.softmax(logits.detach(), -1)  # detached, sampled from
        src, dst = sample_pairs(policy, T, r)
        log_p = log_probs.gather(1, src * T + dst).sum(-1)  # unconstrained log-softmax, B

        merged = self.merge(torch.cat([x[batch, src], x[batch, dst]], -1))  # B×r×C
        keep = torch.ones(B, T, dtype=torch.bool)
        keep[batch, src] = False
        keep[batch, dst] = False
        untouched = x[keep].view(B, T - 2 * r, C)
        y = torch.cat([untouched, merged], 1)  # B×(T−r)×C
        y = self.cross(y, x)
        return self.mlp(y), log_p


class UnmergeBlock(nn.Module):
    """Scoring MLP on detached tokens → r tokens sampled without replacement → unmerge MLP
    C→4C→2C → cross-attention of the T+r new tokens over the T old ones → residual MLP."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.score = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))
        self.unmerge = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, 2 * dim))
        self.cross = CrossAttention(dim, heads, dropout)
        self.mlp = ResidualMLP(dim, dropout)

    def forward(self, x, r):
        B, T, C = x.shape
        batch = torch.arange(B)[:, None]
        log_probs = F.log_softmax(self.score(x.detach()).squeeze(-1), -1)  # B×T
        idx = torch.multinomial(log_probs.detach().exp(), r, replacement=False)  # B×r
        log_p = log_probs.gather(1, idx).sum(-1)

        children = self.unmerge(x[batch, idx]).view(B, r, 2, C)
        keep = torch.ones(B, T, dtype=torch.bool)
        keep[batch, idx] = False
        y = torch.cat([x[keep].view(B, T - r, C), children[:, :, 0], children[:, :, 1]], 1)  # T+r
        y = self.cross(y, x)
        return self.mlp(y), log_p


# ----------------------------------------------------------------------------------------------
# The model

class HierarchicalTokenMerging(nn.Module):
    def __init__(self, channels=3, size=32, patch=2, bands=64, dim=256, heads=8, dropout=0.1,
                 max_depth=64):
        super().__init__()
        self.lifter = ImageLifter(channels, size, patch, bands, dim)
        # One encoder layer and one decoder layer, shared across depth (Universal Transformer).
        self.encoder_block = TransformerBlock(dim, heads, dropout)
        self.merge_block = MergeBlock(dim, heads, dropout)
        self.unmerge_block = UnmergeBlock(dim, heads, dropout)
        self.decoder_block = TransformerBlock(dim, heads, dropout)
        self.unlifter = ImageUnlifter(channels, size, bands, dim, heads, dropout)
        self.register_buffer("timesteps", timestep_encoding(max_depth + 1, dim))

    def forward(self, img, schedule):
        x = self.lifter(img)
        log_p = 0
        for d, r in enumerate(schedule, start=1):
            x = self.encoder_block(x + self.timesteps[d])
            x, lp = self.merge_block(x, r)
            log_p = log_p + lp
        for d in range(len(schedule), 0, -1):  # symmetric depths get the same signal
            x, lp = self.unmerge_block(x + self.timesteps[d], schedule[d - 1])
            x = self.decoder_block(x)
            log_p = log_p + lp
        return self.unlifter(x), log_p


def full_schedule(tokens):
    schedule = []
    while tokens > 1:
        schedule.append(tokens // 2)
        tokens -= tokens // 2
    return schedule


def train_step(model, optimizer, images, schedule):
    out, log_p = model(images, schedule)
    loss = F.mse_loss(out, images)
    # Paper eq. 4: loss + sg[loss] · Σ log p(actions), the batch's scalar loss as the reward.
    surrogate = loss + loss.detach() * log_p.sum()
    optimizer.zero_grad(set_to_none=True)
    surrogate.backward()
    optimizer.step()
    return loss.item()


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=8, help="timed steps (after one warm-up)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--patch", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--device", default="cpu",
                    help="cpu, or cuda on a CUDA torch (>= 2.0: every tensor is made there)")
    ap.add_argument("--sampler-only", action="store_true",
                    help="time only the one-pair-at-a-time sampler on B×T×T logits (first layer's r)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cuda = args.device != "cpu"
    if cuda:
        torch.set_default_device(args.device)

    def sync():  # a timed step ends when its GPU kernels do
        if cuda:
            torch.cuda.synchronize()

    B, T = args.batch, (args.size // args.patch) ** 2
    schedule = full_schedule(T)

    if args.sampler_only:
        r = schedule[0]
        logits = torch.randn(B, T, T).masked_fill(torch.eye(T, dtype=torch.bool), float("-inf"))
        ms = []
        for i in range(args.steps + 1):
            t0 = time.perf_counter()
            sample_pairs(F.softmax(logits.view(B, T * T), -1), T, r)
            sync()
            if i > 0:  # the first is a warm-up
                ms.append((time.perf_counter() - t0) * 1e3)
        print(f"reference-sampler  B={B} T={T} r={r}  one-pair-at-a-time: median {statistics.median(ms):.1f} ms "
              f"(min {min(ms):.1f}, max {max(ms):.1f} over {len(ms)})  threads={torch.get_num_threads()}")
        return

    model = HierarchicalTokenMerging(size=args.size, patch=args.patch, dim=args.dim, heads=args.heads)
    model.train()  # dropout on; the full schedule every step (no stochastic depth when timing)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.rand(B, 3, args.size, args.size) * 2 - 1  # noise in [-1, 1]

    train_step(model, optimizer, images, schedule)  # warm-up
    sync()
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        train_step(model, optimizer, images, schedule)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(ms)
    gpu = f"  GPU peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB on {args.device}" if cuda else ""
    print(f"reference  B={B} T={T} C={args.dim} L={len(schedule)} h={args.heads} params={params / 1e6:.2f}M  "
          f"step: median {med:.1f} ms (min {min(ms):.1f}, max {max(ms):.1f} over {len(ms)})  "
          f"{B * 1000.0 / med:.2f} images/s  peak {peak_rss_mib():.0f} MiB{gpu}")


if __name__ == "__main__":
    main()
