"""ctest python.results: htm_results against the command line on the study results_study.sh
made. Its metrics are `htm export`'s rows; its compare() is `htm compare --format csv`'s table:
per-variant means, p-values and adjusted p-values to 1e-12, the rest of the numbers to 1e-9.
Usage: results_check.py HTM DB"""

import io
import math
import sqlite3
import subprocess
import sys
import time

import pandas as pd

import htm_results

htm, db_path = sys.argv[1], sys.argv[2]
EXPERIMENT = "python-results"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def htm_csv(*args):
    for attempt in range(3):  # another engineer's relink may replace build/htm under us
        done = subprocess.run([htm, *args, "--db", db_path], capture_output=True, text=True)
        if done.returncode == 0:
            return pd.read_csv(io.StringIO(done.stdout), keep_default_na=False, na_values=[""], float_precision="round_trip")
        time.sleep(1)
    sys.exit(f"htm {' '.join(args)} failed: {done.stderr}")


def close(a, b, tolerance):
    """Equal within tolerance (relative to max(1, |b|)), or both NaN."""
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def floats(cell):
    return tuple(float(x) for x in str(cell).split()) if isinstance(cell, str) or not pd.isna(cell) else ()


db = htm_results.open(db_path)

# ---- the database is read only --------------------------------------------------------------
try:
    db.rows("DELETE FROM tags")
    check(False, "a DELETE went through the read-only connection")
except sqlite3.OperationalError as e:
    print("read only:", e)

# ---- runs, settings, metrics, finals --------------------------------------------------------
runs = db.runs(EXPERIMENT)
check(len(runs) == 10, f"10 runs, not {len(runs)}")
check(set(runs.status) == {"finished"}, f"statuses {set(runs.status)}")
check((runs.phase == "confirm").sum() == 4, "4 confirmation runs")
check(set(runs.variant) == {"wide", "narrow", "fast"}, f"variants {set(runs.variant)}")
wide = db.settings_wide(EXPERIMENT, varying=True)
check({"model.dim", "model.heads", "train.lr"} <= set(wide.columns), f"varying settings {list(wide.columns)}")
check(wide.loc[runs.run_id[runs.variant == "narrow"].iloc[0], "model.dim"] == 8, "narrow's model.dim is 8")
check(db.settings(EXPERIMENT, keys="train.lr").parsed.map(type).eq(float).all(), "train.lr parsed as float")

exported = htm_csv("export", EXPERIMENT, "--format", "csv")
metrics = db.metrics(EXPERIMENT)
print(f"metrics: {len(metrics)} rows, htm export: {len(exported)} rows")
check(len(metrics) == len(exported), f"metric rows {len(metrics)} != htm export's {len(exported)}")
check(list(metrics.columns) == list(exported.columns), f"columns {list(metrics.columns)} != {list(exported.columns)}")
if len(metrics) == len(exported):
    for column in ["run_id", "experiment", "variant", "seed", "status", "config_hash", "split", "metric", "step", "epoch"]:
        check((metrics[column].astype(str).values == exported[column].astype(str).values).all(), f"column {column}")
    # htm export prints values with SQLite's printf('%!.17g'): every double exactly.
    same = (metrics.value == exported.value) | (metrics.value.isna() & exported.value.isna())
    check(same.all(), f"values differ from htm export's in {(~same).sum()} rows")
    check(((metrics.time - exported.time).abs() <= 0.0005 + 1e-6).all(), "times differ from htm export's")

finals = db.finals(EXPERIMENT, split="test", name="mse")
last = metrics[(metrics.split == "test") & (metrics.metric == "mse")].groupby("run_id").tail(1)
check(len(finals) == 10 and list(finals.value) == list(last.value), "finals are each run's last test/mse")

# ---- compare ----------------------------------------------------------------------------------
cases = [
    ([], {}),
    (
        ["--metric", "cluster_f1", "--metric", "mse", "--reference", "narrow", "--target", "cluster_f1>=0.1",
         "--margin", "mse<=5%", "--collapse", "0.01"],
        dict(metrics=["cluster_f1", "mse"], reference="narrow", targets=["cluster_f1>=0.1"], margins=["mse<=5%"],
             collapse=0.01),
    ),
    (["--metric", "train/loss", "--adjust", "bonferroni", "--seeds", "0-1"],
     dict(metrics=["train/loss"], adjust="bonferroni", seeds="0-1")),
]  # fmt: skip
EXACT = ["mean", "p", "p_adjusted"]
NEAR = ["sd", "diff", "se", "t", "df", "diff_ci_low", "diff_ci_high", "effect", "effect_ci_low", "effect_ci_high",
        "target_bound", "target_p", "margin_bound", "margin_threshold", "margin_p", "margin_p_adjusted"]  # fmt: skip


def compare_rows(label, py, cpp, counted=True):
    """Each row of the package's table against htm compare's: the same values (htm compare reads
    them at full precision, printf('%!.17g')), means and p to 1e-12, the rest to 1e-9."""
    for (_, a), (_, b) in zip(py.iterrows(), cpp.iterrows()):
        row = f"{label}: {b.phase} {b.metric} {b.variant}"
        for column in ["phase", "metric", "variant", "n", "family", "adjustment"] + ["configs"] * counted:
            check(str(a[column]) == str(b[column]), f"{row}: {column} {a[column]} != {b[column]}")
        check(a.reference == bool(b.reference), f"{row}: reference")
        check(a.seeds == tuple(int(s) for s in floats(b.seeds)), f"{row}: seeds {a.seeds} != {b.seeds}")
        check((a.test or "") == (b.test if isinstance(b.test, str) else ""), f"{row}: test {a.test} != {b.test}")
        for column in ["target_met", "margin_met"]:
            want = None if pd.isna(b[column]) else bool(b[column])
            check(a[column] == want, f"{row}: {column} {a[column]} != {want}")
        if counted:
            check((a.collapsed is None and pd.isna(b.collapsed)) or a.collapsed == b.collapsed, f"{row}: collapsed")
        check(a["values"] == floats(b["values"]), f"{row}: values {a['values']} != htm compare's {b['values']}")
        for column in EXACT + NEAR:
            check(close(a[column], b[column], 1e-12 if column in EXACT else 1e-9),
                  f"{row}: {column} {a[column]!r} != htm compare's {b[column]!r}")  # fmt: skip


for args, options in cases:
    cpp = htm_csv("compare", EXPERIMENT, *args, "--format", "csv")
    py = db.compare(EXPERIMENT, **options)
    label = "htm compare " + " ".join(args)
    check(list(py.columns) == list(cpp.columns), f"{label}: columns {list(py.columns)} != {list(cpp.columns)}")
    check(len(py) == len(cpp), f"{label}: {len(py)} rows, htm compare {len(cpp)}")
    if len(py) != len(cpp):
        continue
    print(f"{label}: {len(py)} rows, tests {sorted(set(cpp.test.dropna()))}, phases {sorted(set(cpp.phase))}")
    compare_rows(label, py, cpp)
db.close()
if failures:
    sys.exit(f"{len(failures)} checks failed")
print("htm_results agrees with htm compare and htm export")
