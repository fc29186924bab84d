#!/usr/bin/env python3
"""ctest python.export_tensorboard: `htm export --format tensorboard` against the CSV export.

A tiny study (one swept variant on seed 0, and a copy of its run as a rerun would record it, so
two runs share a seed) and a NaN logged by hand are exported both ways. The event files are decoded here with the standard
library alone: every record's two masked CRC32Cs are checked, the Event protocol buffers parsed.
Every (tag, step, value) of each run's file equals the CSV's rows, NaN included, at the CSV's
wall time; each run's folder is DIR/<experiment>/<variant, made safe>/seed_<seed>_run<id>; the
text summary `settings` holds every row of the run's params table.

usage: export_tensorboard.py HTM SOURCE_DIR
"""
import csv
import math
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The TFRecords of a file, each checked against both of its CRCs."""
    with open(path, "rb") as f:
        data = f.read()
    pos, out = 0, []
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert length_crc == masked(header), f"{path}: bad length CRC at byte {pos}"
        body = data[pos + 12:pos + 12 + length]
        assert len(body) == length, f"{path}: truncated record at byte {pos}"
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert body_crc == masked(body), f"{path}: bad data CRC at byte {pos}"
        out.append(body)
        pos += 16 + length
    return out


def varint(data, pos):
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def message(data):
    """A protocol buffer as {field: [values]}: ints, bytes, or raw 8/4-byte little-endian words."""
    fields, pos = {}, 0
    while pos < len(data):
        key, pos = varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"wire type {wire}")
        fields.setdefault(field, []).append(value)
    assert pos == len(data), "message overran its bytes"
    return fields


def decode(path):
    """(scalars [(tag, step, value, wall_time)], texts {tag: text}) of one event file."""
    events = [message(r) for r in records(path)]
    first = events[0]
    assert first[3] == [b"brain.Event:2"], f"{path}: first event is not the file version"
    scalars, texts = [], {}
    for e in events[1:]:
        wall_time = struct.unpack("<d", e[1][0])[0]
        step = e.get(2, [0])[0]
        if step >= 1 << 63:
            step -= 1 << 64
        for v in message(e[5][0])[1]:
            value = message(v)
            tag = value[1][0].decode()
            if 2 in value:
                scalars.append((tag, step, struct.unpack("<f", value[2][0])[0], wall_time))
            else:
                metadata = message(value[9][0])
                plugin = message(metadata[1][0])
                assert plugin[1] == [b"text"], f"{tag}: plugin {plugin}"
                assert metadata[4] == [2], f"{tag}: data class {metadata[4]} is not DATA_CLASS_TENSOR"
                tensor = message(value[8][0])
                assert tensor[1] == [7], f"{tag}: dtype {tensor[1]} is not DT_STRING"
                texts[tag] = tensor[8][0].decode()
    return scalars, texts


def htm(*args):
    result = subprocess.run([HTM, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: htm {' '.join(args)}: {result.stdout[-500:]}{result.stderr[-1500:]}")
    return result


def cell(text):
    return "`" + text.replace("|", "\\|").replace("\n", " ") + "`"


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


HTM, SOURCE = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="htm-export-tb-")
db = os.path.join(work, "htm.sqlite")
study = [os.path.join(SOURCE, "tests/data/tiny_pairs.toml"), "--db", db, "--set", f'runtime.artifacts="{work}/runs"',
         "--sweep", "train.lr=1e-3", "-q"]
htm("run", *study)
with sqlite3.connect(db) as conn:
    # A rerun of the same variant and seed (`htm run --rerun`), copied here rather than trained
    # again: half the test's time. Its values differ from the first's by 1.
    columns = [c[1] for c in conn.execute("PRAGMA table_info(runs)") if c[1] not in ("id", "uuid")]
    conn.execute(f"INSERT INTO runs(uuid, {', '.join(columns)}) SELECT uuid || '-rerun', {', '.join(columns)} "
                 "FROM runs WHERE id = 1")
    conn.execute("UPDATE runs SET started_at = started_at + 60, ended_at = ended_at + 60 WHERE id = 2")
    conn.execute("INSERT INTO params(run_id, key, value) SELECT 2, key, value FROM params WHERE run_id = 1")
    conn.execute("INSERT INTO metrics(run_id, step, epoch, split, name, value, time) "
                 "SELECT 2, step, epoch, split, name, value + 1, time + 60 FROM metrics WHERE run_id = 1")
    # A value that was NaN is stored as NULL (SQLite has no NaN): one logged by hand.
    conn.execute("INSERT INTO metrics(run_id, step, epoch, split, name, value, time) "
                 "SELECT id, 1, 0, 'train', 'diverged', NULL, started_at + 0.25 FROM runs WHERE id = 1")
htm("export", "tiny-pairs", "--db", db, "--format", "csv", "-o", os.path.join(work, "all.csv"))
htm("export", "tiny-pairs", "--db", db, "--format", "tensorboard", "-o", os.path.join(work, "tb"))

expected = {}  # run id -> [(tag, step, value, time)]
with open(os.path.join(work, "all.csv"), newline="") as f:
    for row in csv.DictReader(f):
        value = float(row["value"]) if row["value"] else math.nan
        value = struct.unpack("<f", struct.pack("<f", value))[0]  # a scalar summary holds a float
        expected.setdefault(int(row["run_id"]), []).append(
            (row["split"] + "/" + row["metric"], int(row["step"]), value, float(row["time"])))
assert sorted(expected) == [1, 2], f"CSV runs {sorted(expected)}"

params = {}
with sqlite3.connect(db) as conn:
    for run, key, value in conn.execute("SELECT run_id, key, value FROM params"):
        params.setdefault(run, []).append((key, value))

files = []
for root, _, names in os.walk(os.path.join(work, "tb")):
    files += [os.path.join(root, n) for n in names]
assert len(files) == 2, f"event files: {files}"
seen = set()
for path in files:
    folder, name = os.path.split(path)
    assert re.fullmatch(r"events\.out\.tfevents\.\d+\.[A-Za-z0-9._-]+", name), f"file name {name}"
    scalars, texts = decode(path)
    run = int(re.search(r"\| id \| (\d+) \|", texts["run"]).group(1))
    seen.add(run)
    want = os.path.join(work, "tb", "tiny-pairs", "train.lr_0.001", f"seed_0_run{run}")
    assert folder == want, f"run {run} is in {folder}, not {want}"
    got = sorted((t, s, v) for t, s, v, _ in scalars)
    wanted = sorted((t, s, v) for t, s, v, _ in expected[run])
    assert len(got) == len(wanted), f"run {run}: {len(got)} scalars, the CSV has {len(wanted)}"
    for g, w in zip(sorted(got, key=repr), sorted(wanted, key=repr)):
        assert g[:2] == w[:2] and same(g[2], w[2]), f"run {run}: {g} in the file, {w} in the CSV"
    times = {(t, s, repr(v)): wt for t, s, v, wt in scalars}
    for t, s, v, wt in expected[run]:
        assert abs(times[(t, s, repr(v))] - wt) < 0.002, f"run {run} {t} step {s}: wall time {times[(t, s, repr(v))]}, CSV {wt}"
    if run == 1:
        assert any(t == "train/diverged" and math.isnan(v) for t, _, v, _ in scalars), "the NaN was lost"
    for key, value in params[run]:
        assert f"| {cell(key)} | {cell(value)} |" in texts["settings"], f"run {run}: setting {key} = {value} missing"
    print(f"run {run}: {len(got)} scalars and {len(params[run])} settings match ({os.path.relpath(path, work)})")
assert seen == {1, 2}, f"runs in the files: {seen}"
shutil.rmtree(work)
print("export tensorboard test passed")
