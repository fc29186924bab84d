#!/usr/bin/env python3
"""A large synthetic results database for htm serve's and htm report's speed figures.

Studies of 5 variants x N seeds, each run with 80 settings (3 of them differ between
variants), 40 metric series logged at --points steps, 2 tags, final test/mse depending on the
variant. htm itself creates the schema (`htm query --write`), so the file is what htm writes.

    scripts/serve/make_db.py build/htm /tmp/big.sqlite --runs 10000 --points 60
"""
import argparse
import math
import os
import random
import sqlite3
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("htm", help="the htm binary (creates the schema)")
    ap.add_argument("db", help="database to create (must not exist)")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--per-study", type=int, default=100, help="runs per study: 5 variants x this/5 seeds")
    ap.add_argument("--points", type=int, default=60, help="points per metric series (40 series a run)")
    ap.add_argument("--running", type=int, default=0, help="leave this many runs of the last study running")
    args = ap.parse_args()
    if os.path.exists(args.db):
        sys.exit(f"make_db: {args.db} exists; give a new path")
    subprocess.run([args.htm, "query", "--db", args.db, "--write", "SELECT count(*) FROM runs"], check=True,
                   stdout=subprocess.DEVNULL)
    db = sqlite3.connect(args.db)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=OFF")
    rng = random.Random(0)
    started = time.time()
    variants = ["learned", "random", "nearest", "tome", "heuristic"]
    series = (["train/loss", "train/lr", "train/rho", "train/images_per_s", "train/grad_norm"] +
              [f"train/grad_norm/part{i}" for i in range(25)] +
              ["test/mse", "test/baseline_mse", "test/baseline/pca_mse", "test/policy_variation",
               "test/policy_structure", "test/cluster_f1", "test/sibling_f1", "test/loss",
               "test/accuracy", "test/baseline/linear_accuracy"])
    base_params = [(f"group{i // 10}.setting{i}", str(rng.randint(0, 9))) for i in range(77)]
    run_id = 0
    metric_rows = 0
    for study in range(math.ceil(args.runs / args.per_study)):
        name = f"study-{study:04d}"
        db.execute("INSERT INTO experiments(name, created_at) VALUES (?, ?)", (name, started))
        experiment_id = db.execute("SELECT id FROM experiments WHERE name = ?", (name,)).fetchone()[0]
        for k in range(min(args.per_study, args.runs - run_id)):
            run_id += 1
            variant = variants[k % len(variants)]
            seed = k // len(variants)
            running = run_id > args.runs - args.running
            t0 = started + run_id * 60.0
            db.execute(
                "INSERT INTO runs(id, uuid, experiment_id, variant, seed, status, started_at, ended_at, config_hash, "
                "git_revision, host, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, f"{rng.getrandbits(128):032x}", experiment_id, variant, seed,
                 "running" if running else "finished", t0, None if running else t0 + 240.0,
                 f"hash-{variant}", "0000000synth", "synth", t0 + 240.0))
            vi = variants.index(variant)
            params = base_params + [("policy.plugin", f'"{variant}"'), ("model.dim", str(32 * (1 + vi % 3))),
                                    ("train.lr", str([1e-3, 2e-3][vi % 2]))]
            db.executemany("INSERT INTO params(run_id, key, value) VALUES (?, ?, ?)",
                           [(run_id, key, value) for key, value in params])
            db.executemany("INSERT INTO tags(run_id, key, value) VALUES (?, ?, ?)",
                           [(run_id, "sweep", name), (run_id, "phase", "confirm" if seed >= 15 else "explore")])
            final = 0.1 + 0.02 * vi + rng.gauss(0, 0.005)
            rows = []
            for p in range(args.points):
                step = (p + 1) * 10
                decay = math.exp(-3.0 * p / max(1, args.points - 1))
                for s in series:
                    value = final + 0.3 * decay if s in ("train/loss", "test/mse") else rng.random()
                    rows.append((run_id, step, p // 10, s.split("/", 1)[0], s.split("/", 1)[1], value, t0 + step))
            db.executemany("INSERT INTO metrics(run_id, step, epoch, split, name, value, time) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            metric_rows += len(rows)
        db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = os.path.getsize(args.db) / 2**20
    print(f"make_db: {run_id} runs, {metric_rows} metric rows, {size:.0f} MiB in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
