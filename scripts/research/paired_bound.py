#!/usr/bin/env python3
"""Is variant A not worse than variant B by more than a margin? The paired one-sided bound.

For each seed in the range both variants finished (each seed's latest finished run of the
experiment), the difference A - B of a metric's last value; its mean, sd, and the one-sided
95 % lower bound mean - t(0.95, n-1) sd / sqrt(n) (Student t; higher is better for the metric,
e.g. an F1). The claim "A is not worse than B by more than MARGIN %" holds when that bound is
at least -MARGIN % of B's mean. The issue-39 claims of results/README.md are decided this way.

    scripts/research/paired_bound.py DB EXPERIMENT METRIC A B --seeds 1000-1009 --margin 1
"""
import argparse
import math
import sqlite3
import statistics
import sys


def betacf(a, b, x):
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def ibeta(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1 - x) / b


def t_cdf(t, df):
    tail = 0.5 * ibeta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(p, df):
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def finals(db, experiment, metric, variant, seeds):
    """seed -> the metric's last value in that seed's latest finished run."""
    split, name = metric.split("/", 1) if "/" in metric else ("test", metric)
    rows = db.execute(
        """SELECT r.seed, (SELECT m.value FROM metrics m WHERE m.run_id = r.id AND m.split = ? AND m.name = ?
                            ORDER BY m.step DESC, m.rowid DESC LIMIT 1)
           FROM runs r JOIN experiments e ON e.id = r.experiment_id
           WHERE e.name = ? AND r.variant = ? AND r.status = 'finished' ORDER BY r.id""",
        (split, name, experiment, variant)).fetchall()
    out = {}
    for seed, value in rows:  # later runs of a seed replace earlier ones
        if seed in seeds and value is not None:
            out[seed] = value
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db")
    ap.add_argument("experiment")
    ap.add_argument("metric", help="split/name, e.g. test/cluster_f1 (higher is better)")
    ap.add_argument("a", help="the variant claimed not worse")
    ap.add_argument("b", help="the variant it is compared with")
    ap.add_argument("--seeds", default="1000-1009", help="FIRST-LAST")
    ap.add_argument("--margin", type=float, default=1.0, help="percent of B's mean")
    args = ap.parse_args()
    first, last = (int(s) for s in args.seeds.split("-"))
    seeds = set(range(first, last + 1))
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    a = finals(db, args.experiment, args.metric, args.a, seeds)
    b = finals(db, args.experiment, args.metric, args.b, seeds)
    paired = sorted(set(a) & set(b))
    if len(paired) < 2:
        sys.exit(f"paired_bound: {len(paired)} seed(s) of {args.seeds} have both variants finished")
    diffs = [a[s] - b[s] for s in paired]
    n, mean, sd = len(diffs), statistics.mean(diffs), statistics.stdev(diffs)
    t = t_quantile(0.95, n - 1)
    bound = mean - t * sd / math.sqrt(n)
    b_mean = statistics.mean(b[s] for s in paired)
    limit = -args.margin / 100 * b_mean
    print(f"{args.experiment} {args.metric}: {args.a} - {args.b} over seeds {paired[0]}-{paired[-1]} (n = {n})")
    print(f"  {args.a} {statistics.mean(a[s] for s in paired):.4f}, {args.b} {b_mean:.4f}")
    print(f"  difference {mean:+.4f} (sd {sd:.4f}); one-sided 95% lower bound {bound:+.4f} (t = {t:.4f}, "
          f"{100 * bound / b_mean:+.2f}% of {args.b})")
    print(f"  not worse by more than {args.margin:g}% ({limit:+.4f}): {'met' if bound >= limit else 'not met'}")


if __name__ == "__main__":
    main()
