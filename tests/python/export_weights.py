#!/usr/bin/env python3
"""ctest python.export_weights: `htm export RUN --format weights` read back by torch.load.

A tiny run trains and checkpoints; its weights are exported and loaded with torch.load. Every
parameter and buffer equals, bit for bit (dtype, shape and bytes), the one in the run's
checkpoint, opened here as what it is, a TorchScript archive (torch.jit.load), less the resume
state under `htm_resume`; the settings are the run's params table, each TOML value as Python
reads it; the run's row and the checkpoint's step are there.

usage: export_weights.py HTM SOURCE_DIR    (exits 77, skipped, without torch)
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

try:
    import tomllib  # Python 3.11
    import torch
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks a module ({e}); Debian's python3-torch provides torch")
    sys.exit(77)

HTM, SOURCE = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="htm-export-weights-")
db = os.path.join(work, "htm.sqlite")


def htm(*args):
    result = subprocess.run([HTM, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: htm {' '.join(args)}: {result.stdout[-500:]}{result.stderr[-1500:]}")
    return result


htm("run", os.path.join(SOURCE, "tests/data/tiny_pairs.toml"), "--db", db, "--set",
    f'runtime.artifacts="{work}/runs"', "-q")
out = os.path.join(work, "weights.pt")
htm("export", "1", "--db", db, "--format", "weights", "-o", out)
exported = torch.load(out)
assert sorted(exported) == ["buffers", "parameters", "run", "settings"], f"keys {sorted(exported)}"

with sqlite3.connect(db) as conn:
    artifact_dir, variant, seed = conn.execute("SELECT artifact_dir, variant, seed FROM runs WHERE id = 1").fetchone()
    params = dict(conn.execute("SELECT key, value FROM params WHERE run_id = 1"))
checkpoint = torch.jit.load(os.path.join(artifact_dir, "checkpoint.pt"))
stored = {
    "parameters": {n: t for n, t in checkpoint.named_parameters() if not n.startswith("htm_resume.")},
    "buffers": {n: t for n, t in checkpoint.named_buffers() if not n.startswith("htm_resume.")},
}
assert stored["parameters"], "the checkpoint holds no parameters"
for kind in ("parameters", "buffers"):
    got, want = exported[kind], stored[kind]
    assert sorted(got) == sorted(want), f"{kind}: {sorted(set(got) ^ set(want))} differ"
    for name, tensor in want.items():
        mine = got[name]
        assert mine.dtype == tensor.dtype and mine.shape == tensor.shape, f"{name}: {mine.dtype}{list(mine.shape)}"
        same = mine.detach().contiguous().numpy().tobytes() == tensor.detach().contiguous().numpy().tobytes()
        assert same, f"{name}: not the checkpoint's bits"

settings = exported["settings"]
assert sorted(settings) == sorted(params), f"settings: {sorted(set(settings) ^ set(params))} differ"
for key, toml in params.items():
    want = tomllib.loads("v = " + toml)["v"]
    assert settings[key] == want and type(settings[key]) is type(want), f"{key}: {settings[key]!r}, TOML {toml}"

run = exported["run"]
step = int(checkpoint.htm_resume.step.item())
assert (run["id"], run["variant"], run["seed"], run["step"]) == (1, variant, seed, step), f"run {run}"
assert run["experiment"] == "tiny-pairs" and run["status"] == "finished", f"run {run}"
print(f"{len(stored['parameters'])} parameters, {len(stored['buffers'])} buffers and {len(settings)} settings "
      f"match the checkpoint of step {step}")
shutil.rmtree(work)
print("export weights test passed")
