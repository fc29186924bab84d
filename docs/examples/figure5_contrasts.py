#!/usr/bin/env python3
"""The five contrasts of Figure 5's 2x2 design (docs/reproduction.md, "Figure 5 on trained
models"), paired by seed, with Holm's adjustment over the five, from a CSV of final test MSEs
(docs/examples/trained_csv.sql writes one). Needs scipy (Debian: python3-scipy).

    /usr/bin/python3 docs/examples/figure5_contrasts.py results/confirm-trained-2026-11-26.csv
"""
import csv
import sys

import numpy as np
from scipy import stats


def main(path, experiment="paper-attention-trained"):
    values = {}
    for row in csv.DictReader(open(path)):
        if row["experiment"] == experiment:
            values.setdefault(row["variant"], {})[int(row["seed"])] = float(row["test_mse"])
    seeds = sorted(set.intersection(*(set(v) for v in values.values())))
    mse = {variant: np.array([v[s] for s in seeds]) for variant, v in values.items()}
    learned, random = mse["learned"], mse["random"]
    learned_no, random_no = mse["learned_no_attn"], mse["random_no_attn"]
    contrasts = [  # (name, per-seed differences, reference mean)
        ("attention, learned: no attention - with", learned_no - learned, learned.mean()),
        ("attention, random: no attention - with", random_no - random, random.mean()),
        ("the policy with attention: random - learned", random - learned, learned.mean()),
        ("the policy without attention: random - learned", random_no - learned_no, learned_no.mean()),
        ("interaction: the policy's effect with - without", (random - learned) - (random_no - learned_no),
         learned.mean()),
    ]
    p = [stats.ttest_1samp(d, 0).pvalue for _, d, _ in contrasts]
    holm, running = [0.0] * len(p), 0.0
    for rank, k in enumerate(np.argsort(p)):  # Holm: step down, never decreasing
        running = max(running, min(1.0, (len(p) - rank) * p[k]))
        holm[k] = running
    print(f"{experiment}: seeds {seeds[0]}-{seeds[-1]} (n = {len(seeds)}), paired, Holm over {len(p)}")
    for (name, d, ref), raw, adjusted in zip(contrasts, p, holm):
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        verdict = "decided" if adjusted < 0.05 else ("bounded" if half / ref <= 0.02 else "neither")
        low, high = 100 * (d.mean() - half) / ref, 100 * (d.mean() + half) / ref
        print(f"  {name:50s} {d.mean():+.5f} ({100 * d.mean() / ref:+.1f} %), 95% CI [{low:+.1f}, {high:+.1f}] %, "
              f"p {raw:.2g}, Holm {adjusted:.2g}: {verdict}")


if __name__ == "__main__":
    main(*sys.argv[1:])
