"""`htm compare` in Python (core/app/commands/compare.cpp): per phase and variant, a metric's
last value in each seed's latest finished run, tested against a reference variant (paired by
seed where the two ran the same seeds, Welch otherwise), effects as % of the reference with
their CIs, p-values adjusted over every comparison of a phase, one-sided bounds against targets
and margins from the reference. The same selection and the same arithmetic as the C++ code;
`htm compare EXPERIMENT --format csv` prints the same columns.
"""

import math

import pandas as pd

from . import stats

PHASES = ("explore", "confirm")

COLUMNS = [
    "phase", "metric", "variant", "reference", "n", "seeds", "values", "mean", "sd", "test", "diff", "se",
    "t", "df", "p", "p_adjusted", "adjustment", "family", "diff_ci_low", "diff_ci_high", "effect",
    "effect_ci_low", "effect_ci_high", "configs", "target", "target_bound", "target_p", "target_met",
    "margin", "margin_bound", "margin_threshold", "margin_p", "margin_p_adjusted", "margin_met", "collapsed",
]  # fmt: skip


def qualified_metric(metric, split="test"):
    """"split/name" for a metric written with or without its split (only a leading "test/" or
    "train/" is taken for one: "loss/mse" is a name)."""
    return metric if metric.startswith(("test/", "train/")) else f"{split}/{metric}"


def _load(db, experiment, metric, hash, revision, seeds, tags):
    """phase -> variant -> seed -> (run, value, hash): each seed's latest finished run whose
    latest row of the metric is not NaN; and the variants in first-run order."""
    split, name = metric.split("/", 1)
    sql = (
        "SELECT r.variant, m.value, r.config_hash, r.seed, r.id, "
        "coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), '') "
        "FROM runs r JOIN experiments e ON e.id = r.experiment_id "
        "JOIN metrics m ON m.rowid = (SELECT l.rowid FROM metrics l WHERE l.run_id = r.id AND l.split = ? "
        "AND l.name = ? ORDER BY l.step DESC, l.time DESC, l.rowid DESC LIMIT 1) "
        "WHERE e.name = ? AND r.status = 'finished' AND m.value IS NOT NULL"
    )
    params = [split, name, experiment]
    if hash:
        sql += " AND substr(r.config_hash, 1, length(?)) = ?"
        params += [hash, hash]
    if revision:
        sql += " AND substr(coalesce(r.git_revision, ''), 1, length(?)) = ?"
        params += [revision, revision]
    if seeds is not None:
        sql += " AND r.seed BETWEEN ? AND ?"
        params += list(seeds)
    for key, value in tags:
        sql += " AND EXISTS (SELECT 1 FROM tags t WHERE t.run_id = r.id AND t.key = ? AND t.value = ?)"
        params += [key, value]
    by_phase, order = {}, []
    for variant, value, config_hash, seed, run, phase in db.rows(sql + " ORDER BY r.id", params):
        variant = variant or ""
        if variant not in order:
            order.append(variant)
        phase = "confirm" if phase == "confirm" else "explore"
        by_phase.setdefault(phase, {}).setdefault(variant, {})[seed] = (run, float(value), config_hash or "")
    return by_phase, order


def _describe(variant, samples):
    seeds = sorted(samples)
    values = [samples[s][1] for s in seeds]
    hashes = sorted({samples[s][2] for s in seeds})
    return {
        "variant": variant,
        "seeds": tuple(seeds),
        "values": tuple(values),
        "mean": stats.mean(values),
        "sd": stats.sd(values),
        "hashes": hashes,
        "configs": len(hashes),
        "reference": False,
        "tested": False,
    }


def _seed_range(seeds):
    if seeds is None:
        return None
    if isinstance(seeds, int):
        return (seeds, seeds)
    if isinstance(seeds, str):
        dash = seeds.find("-", 1)
        first, last = (seeds, seeds) if dash < 0 else (seeds[:dash], seeds[dash + 1 :])
        seeds = (int(first), int(last))
    first, last = seeds
    if first > last:
        raise ValueError(f"--seeds {first}-{last}: expected FIRST-LAST")
    return (int(first), int(last))


def compare(
    db,
    experiment,
    metrics=("mse",),
    split="test",
    reference=None,
    adjust="holm",
    hash=None,
    revision=None,
    seeds=None,
    tags=None,
    targets=(),
    margins=(),
    collapse=None,
):
    """htm compare EXPERIMENT as a DataFrame: one row per phase, metric and variant (explore
    first; the metrics in the order asked, each target's and margin's metric added after; the
    variants in first-run order), the columns of `htm compare --format csv` (seeds and values
    as tuples, NaN where a number does not apply).

    metrics: names ("mse", "loss/mse") or "split/name"; reference: the variant the others are
    compared with (default: the first run's); adjust: holm, bonferroni or none; hash, revision:
    prefixes of the runs' config hash and git revision; seeds: "1000-1009", (first, last) or one
    seed; tags: {key: value} every run must carry; targets: "cluster_f1>=0.9"...; margins:
    "cluster_f1>=-1%"...; collapse: count the runs ending more than this below their peak.

    df.attrs holds "reference" and "warnings" (htm compare's, but for the seed ledger's).
    """
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    targets = [stats.parse_target(t) if isinstance(t, str) else t for t in ([targets] if isinstance(targets, str) else targets)]
    margins = [stats.parse_margin(m) if isinstance(m, str) else m for m in ([margins] if isinstance(margins, str) else margins)]
    for claim in targets + margins:
        claim.metric = qualified_metric(claim.metric, split)
    metrics = [qualified_metric(m, split) for m in metrics]
    for claim in targets + margins:
        if claim.metric not in metrics:
            metrics.append(claim.metric)
    tag_list = list(tags.items()) if isinstance(tags, dict) else [tuple(t.split("=", 1)) for t in (tags or [])]
    seed_range = _seed_range(seeds)
    stats.adjust([], adjust)  # refuses an unknown adjustment before any query

    with db.snapshot():
        loaded = [_load(db, experiment, m, hash, revision, seed_range, tag_list) for m in metrics]
        count = None
        if collapse is not None and collapse > 0:
            count = lambda metric, samples: _count_collapsed(db, metric, samples, collapse)  # noqa: E731
        return from_samples(loaded, metrics, experiment, reference, adjust, targets, margins, count)


def from_samples(loaded, metrics, experiment="", reference=None, adjust="holm", targets=(), margins=(), collapsed=None):
    """The table of compare() from samples already chosen: loaded[i] is, for metrics[i]
    ("split/name"), a pair (phase -> variant -> seed -> (run, value, config hash), the variants
    in first-run order); targets and margins parsed, their metrics qualified and in `metrics`;
    collapsed(metric, samples) counts a row's collapsed runs (None: not counted)."""
    variants = []
    for _, order in loaded:
        variants += [v for v in order if v not in variants]
    if not variants:
        raise ValueError(f"no finished run of experiment '{experiment}' has the metric(s) {', '.join(metrics)}")
    reference = variants[0] if reference is None else reference
    if reference not in variants:
        raise ValueError(f"experiment '{experiment}' has no finished variant '{reference}'")

    tables, warnings = [], []
    for metric, (by_phase, order) in zip(metrics, loaded):
        target = next((t for t in targets if t.metric == metric), None)
        margin = next((m for m in margins if m.metric == metric), None)
        for phase in PHASES:
            if phase not in by_phase:
                continue
            samples = by_phase[phase]
            has_reference = reference in samples
            ref = _describe(reference, samples[reference]) if has_reference else None
            rows = []
            for variant in order:
                if variant not in samples:
                    continue
                row = _describe(variant, samples[variant])
                row["reference"] = variant == reference
                if has_reference and not row["reference"]:
                    row["tested"] = True
                    paired = row["seeds"] == ref["seeds"] and len(row["seeds"]) >= 2
                    test = (stats.paired_test if paired else stats.welch_test)(list(row["values"]), list(ref["values"]))
                    row["test"] = test
                    row["effect"] = stats.percent_effect(list(row["values"]), list(ref["values"]), test)
                    if margin is not None:
                        row["margin"] = stats.check_margin(test, ref["mean"], margin)
                if target is not None:
                    row["target"] = stats.check_target(list(row["values"]), target)
                if collapsed is not None:
                    row["collapsed"] = collapsed(metric, samples[variant])
                rows.append(row)
            tables.append({"phase": phase, "metric": metric, "rows": rows, "has_reference": has_reference,
                           "target": target, "margin": margin})  # fmt: skip
            if not has_reference:
                warnings.append(
                    f"the {phase} phase has no finished run of the reference '{reference}' with {metric}: "
                    "nothing there is tested"
                )

    _adjust_families(tables, adjust)
    warnings += _warnings(tables)
    out = []
    for phase in PHASES:
        for table in tables:
            if table["phase"] == phase:
                out += [_flatten(table, row, adjust, collapsed is not None) for row in table["rows"]]
    df = pd.DataFrame(out, columns=COLUMNS)
    df.attrs["reference"] = reference
    df.attrs["warnings"] = sorted(set(warnings))
    return df


def _count_collapsed(db, metric, samples, drop):
    split, name = metric.split("/", 1)
    collapsed = 0
    for run, value, _ in samples.values():
        (peak,) = db.rows("SELECT max(value) FROM metrics WHERE run_id = ? AND split = ? AND name = ?", [run, split, name])[0]
        if peak is not None and value < peak - drop:
            collapsed += 1
    return collapsed


def _adjust_families(tables, adjustment):
    """One family per phase: every comparison of every metric in it; the margin claims of a
    phase are a second family."""
    for phase in PHASES:
        family = [r for t in tables if t["phase"] == phase for r in t["rows"] if r["tested"]]
        claims = [r for r in family if "margin" in r]
        p = stats.adjust([r["test"].p for r in family], adjustment)
        q = stats.adjust([r["margin"].p for r in claims], adjustment)
        for row, value in zip(family, p):
            row["p_adjusted"] = value
        for row, value in zip(claims, q):
            row["margin_p_adjusted"] = value
        for t in tables:
            if t["phase"] == phase:
                t["family"] = sum(not math.isnan(x) for x in p)


def _warnings(tables):
    out, explored = [], {}
    for t in tables:
        for row in t["rows"]:
            key = (t["metric"], row["variant"])
            if t["phase"] == "explore":
                explored[key] = row["hashes"]
            if t["phase"] == "confirm" and key in explored and explored[key] != row["hashes"]:
                out.append(
                    f"variant '{row['variant']}' was confirmed under config hash {row['hashes'][0][:12]} but explored "
                    f"under {explored[key][0][:12]}{' (and others)' if len(explored[key]) > 1 else ''}: the confirmed "
                    "variant is not the one chosen"
                )
            if row["configs"] > 1:
                out.append(
                    f"variant '{row['variant']}' pools runs of {row['configs']} resolved configs in the {t['phase']} phase "
                    "(--set overrides?)"
                )
    return out


def _flatten(table, row, adjustment, counted):
    nan = math.nan
    test = row.get("test")
    effect = row.get("effect")
    target, margin = row.get("target"), row.get("margin")
    tested = row["tested"]
    return {
        "phase": table["phase"],
        "metric": table["metric"],
        "variant": row["variant"],
        "reference": row["reference"],
        "n": len(row["values"]),
        "seeds": row["seeds"],
        "values": row["values"],
        "mean": row["mean"],
        "sd": row["sd"],
        "test": test.kind if tested else None,
        "diff": test.diff if tested else nan,
        "se": test.se if tested else nan,
        "t": test.t if tested else nan,
        "df": test.df if tested else nan,
        "p": test.p if tested else nan,
        "p_adjusted": row.get("p_adjusted", nan) if tested else nan,
        "adjustment": adjustment,
        "family": table["family"],
        "diff_ci_low": test.ci_low if tested else nan,
        "diff_ci_high": test.ci_high if tested else nan,
        "effect": effect.percent if tested else nan,
        "effect_ci_low": effect.ci_low if tested else nan,
        "effect_ci_high": effect.ci_high if tested else nan,
        "configs": row["configs"],
        "target": table["target"].text if target else None,
        "target_bound": target.bound if target else nan,
        "target_p": target.p if target else nan,
        "target_met": (target.met if not math.isnan(target.bound) else None) if target else None,
        "margin": table["margin"].text if margin else None,
        "margin_bound": margin.bound if margin else nan,
        "margin_threshold": margin.threshold if margin else nan,
        "margin_p": margin.p if margin else nan,
        "margin_p_adjusted": row.get("margin_p_adjusted", nan) if margin else nan,
        "margin_met": (row["margin_p_adjusted"] < 0.05 if not math.isnan(margin.bound) else None) if margin else None,
        "collapsed": row.get("collapsed") if counted else None,
    }
