"""Reads a results database through htm_results while `htm run` (process WRITER_PID) writes to it:
each read opens and ends its own read transaction, and a write lands while a snapshot() is open,
so the reader never holds up the writer. Usage: results_reader.py DB WRITER_PID"""

import os
import sqlite3
import sys
import time

import htm_results

db_path, writer = sys.argv[1], int(sys.argv[2])


def alive():
    """Whether the writer still runs (a zombie, waiting for its parent's wait, does not)."""
    try:
        with open(f"/proc/{writer}/stat") as stat:
            return stat.read().rsplit(") ", 1)[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def count(con):
    return con.execute("SELECT count(*) FROM metrics").fetchone()[0]


deadline = time.time() + 60
while not os.path.exists(db_path) and time.time() < deadline and alive():
    time.sleep(0.02)
db = None
while db is None and time.time() < deadline and alive():
    try:
        db = htm_results.open(db_path)
    except (ValueError, FileNotFoundError, sqlite3.DatabaseError):  # the schema not written yet
        time.sleep(0.02)
if db is None:
    sys.exit("the run ended before its database could be read")

reads, seen, landed = 0, [], False
probe = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, isolation_level=None)
while alive():
    frame = db.metrics()
    seen.append(len(frame))
    reads += 1
    if not landed:
        with db.snapshot():  # an open read transaction: a commit must still land meanwhile
            before = count(db._con)
            wait_until = time.time() + 10
            while time.time() < wait_until and alive() and count(probe) == before:
                time.sleep(0.01)
            if count(probe) > before:
                landed = True
                assert count(db._con) == before, "a snapshot saw a write made after it began"
    time.sleep(0.2)
if seen != sorted(seen):
    sys.exit(f"the metric count went down between reads: {seen}")
if not landed:
    sys.exit("no write landed while a read transaction was open: the reader may block the writer")
print(f"{reads} reads while htm run wrote ({seen[0]} to {seen[-1]} metric rows); a write landed during an open read")
