"""Reading an htm results database (docs/results.md) into pandas DataFrames, read-only.

The file is opened with SQLite's `mode=ro` and `PRAGMA query_only`: nothing here can change it.
htm keeps the database in WAL mode, where a reader never blocks a writer; each method here runs
its statements in autocommit mode, so a read transaction lasts as long as one query (or one
`snapshot()` block) and no lock is held between calls. Reading while `htm run` trains is safe.
"""

import contextlib
import os
import sqlite3
import urllib.parse

import pandas as pd

DEFAULT_PATH = "results/htm.sqlite"  # htm's kDefaultResultsPath (core/src/config/settings.h)
SCHEMA_VERSIONS = (1, 2)

# The columns of `htm export --format csv`, in its order: metrics() returns the same table.
METRIC_COLUMNS = [
    "run_id", "experiment", "variant", "seed", "status", "config_hash",
    "split", "metric", "step", "epoch", "value", "time",
]  # fmt: skip


def _as_list(value):
    if value is None:
        return None
    if isinstance(value, (str, bytes, int)):
        return [value]
    return list(value)


def _in(column, values, params):
    """`column IN (?, ...)` for a list of values (appended to params), or '' for None."""
    if values is None:
        return ""
    params.extend(values)
    return f" AND {column} IN ({', '.join('?' * len(values))})" if values else " AND 0"


def parse_setting(text):
    """A setting's stored TOML spelling as a Python value: 0.0001 -> float, "learned" -> str,
    [128, 64] -> a tuple; the text itself where it does not parse."""
    if text is None:
        return None
    try:
        import tomllib  # Python 3.11 and later

        value = tomllib.loads("v = " + text)["v"]
    except Exception:  # no tomllib, or not a TOML value
        return text
    return tuple(value) if isinstance(value, list) else value


class Results:
    """One results database, open read-only. A context manager; close() ends it.

    >>> db = Results("results/htm.sqlite")
    >>> db.runs("quickstart")            # one row per run
    >>> db.metrics("quickstart", name="mse", split="test")   # the curves, as htm export
    >>> db.compare("quickstart", "mse")  # htm compare's table
    """

    def __init__(self, path=DEFAULT_PATH, timeout=5.0):
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"{self.path}: no such database (nothing has been recorded there yet)")
        absolute = urllib.parse.quote(os.path.abspath(self.path))
        try:
            self._con = self._connect(f"file:{absolute}?mode=ro", timeout)
        except sqlite3.OperationalError:
            # A WAL database on read-only media cannot get its -shm file: read it as immutable
            # (as htm does there; only right where nothing writes to it).
            self._con = self._connect(f"file:{absolute}?immutable=1", timeout)
        try:
            tables = {r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            row = self._con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() if "meta" in tables else None
            version = int(row[0]) if row else 0
            if version not in SCHEMA_VERSIONS:
                raise ValueError(
                    f"{self.path}: "
                    + ("holds no htm results" if version == 0 else f"schema version {version} is not one this reader knows")
                )
        except Exception:
            self._con.close()
            raise

    @staticmethod
    def _connect(uri, timeout):
        con = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
        try:
            con.execute("PRAGMA query_only = 1")
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except Exception:
            con.close()
            raise
        return con

    def close(self):
        self._con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Results({self.path!r})"

    @contextlib.contextmanager
    def snapshot(self):
        """A block whose queries all read one state of the database (one read transaction:
        keep it short; a writer goes on meanwhile, only the WAL's checkpoint waits for it)."""
        self._con.execute("BEGIN")
        try:
            yield self
        finally:
            self._con.execute("COMMIT")

    def sql(self, query, params=()):
        """Any read-only SQL statement as a DataFrame."""
        return pd.read_sql_query(query, self._con, params=list(params))

    def rows(self, query, params=()):
        """Any read-only SQL statement as a list of tuples."""
        return self._con.execute(query, list(params)).fetchall()

    # ---- what was run --------------------------------------------------------------------

    def experiments(self):
        """One row per experiment: id, name, created_at (unix seconds), runs."""
        return self.sql(
            "SELECT e.id, e.name, e.created_at, count(r.id) AS runs FROM experiments e "
            "LEFT JOIN runs r ON r.experiment_id = e.id GROUP BY e.id ORDER BY e.id"
        )

    def _run_filter(self, experiment, runs, status, params):
        where = _in("e.name", _as_list(experiment), params)
        where += _in("r.id", _as_list(runs), params)
        where += _in("r.status", _as_list(status), params)
        return where

    def runs(self, experiment=None, runs=None, status=None, config=False):
        """One row per run: run_id, experiment, variant, seed, status, phase (explore, or confirm
        for `htm run --confirm`), duration_s, tags ("k=v k2=v2") and every column of the runs
        table (times in unix seconds: pd.to_datetime(df.started_at, unit="s")). The resolved
        config (config_toml) only with config=True. Filters: experiment name(s), run id(s),
        status(es)."""
        params = []
        where = self._run_filter(experiment, runs, status, params)
        columns = [r[1] for r in self._con.execute("PRAGMA table_info(runs)")]
        extra = [c for c in columns if c not in ("id", "experiment_id", "variant", "seed", "status")]
        if not config:
            extra.remove("config_toml")
        df = self.sql(
            "SELECT r.id AS run_id, e.name AS experiment, r.variant, r.seed, r.status, "
            "coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') AS phase, "
            "r.ended_at - r.started_at AS duration_s, "
            "(SELECT group_concat(key || '=' || coalesce(value, ''), ' ') FROM "
            "(SELECT key, value FROM tags t WHERE t.run_id = r.id AND t.key <> 'phase' ORDER BY key)) AS tags, "
            + ", ".join("r." + c for c in extra)
            + " FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE 1"
            + where
            + " ORDER BY r.id",
            params,
        )
        return df

    def tags(self, experiment=None, runs=None):
        """One row per run and tag: run_id, key, value."""
        params = []
        where = self._run_filter(experiment, runs, None, params)
        return self.sql(
            "SELECT t.run_id, t.key, t.value FROM tags t JOIN runs r ON r.id = t.run_id "
            "JOIN experiments e ON e.id = r.experiment_id WHERE 1" + where + " ORDER BY t.run_id, t.key",
            params,
        )

    def plugins(self, experiment=None, runs=None):
        """The plugins each run used: run_id, kind, name, version, path, sha256."""
        params = []
        where = self._run_filter(experiment, runs, None, params)
        return self.sql(
            "SELECT p.* FROM run_plugins p JOIN runs r ON r.id = p.run_id "
            "JOIN experiments e ON e.id = r.experiment_id WHERE 1" + where + " ORDER BY p.run_id, p.kind, p.name",
            params,
        )

    def artifacts(self, experiment=None, runs=None, kind=None):
        """Files the runs wrote: run_id, kind, path, step, created_at."""
        params = []
        where = self._run_filter(experiment, runs, None, params) + _in("a.kind", _as_list(kind), params)
        return self.sql(
            "SELECT a.run_id, a.kind, a.path, a.step, a.created_at FROM artifacts a JOIN runs r ON r.id = a.run_id "
            "JOIN experiments e ON e.id = r.experiment_id WHERE 1" + where + " ORDER BY a.run_id, a.rowid",
            params,
        )

    # ---- settings ------------------------------------------------------------------------

    def settings(self, experiment=None, runs=None, keys=None):
        """One row per run and setting: run_id, key (dotted: train.lr), value (the TOML
        spelling, strings in quotes) and parsed (that value as Python reads it)."""
        params = []
        where = self._run_filter(experiment, runs, None, params) + _in("p.key", _as_list(keys), params)
        df = self.sql(
            "SELECT p.run_id, p.key, p.value FROM params p JOIN runs r ON r.id = p.run_id "
            "JOIN experiments e ON e.id = r.experiment_id WHERE 1" + where + " ORDER BY p.run_id, p.key",
            params,
        )
        df["parsed"] = [parse_setting(v) for v in df["value"]]
        return df

    def settings_wide(self, experiment=None, runs=None, keys=None, varying=False):
        """One row per run (index run_id), one column per setting, values parsed. varying=True
        keeps only the settings that differ between the runs."""
        long = self.settings(experiment, runs, keys)
        wide = long.pivot(index="run_id", columns="key", values="parsed")
        wide.columns.name = None
        if varying:
            keep = [c for c in wide.columns if wide[c].astype(str).nunique(dropna=False) > 1]
            wide = wide[keep]
        return wide

    # ---- metrics -------------------------------------------------------------------------

    def metrics(self, experiment=None, runs=None, split=None, name=None, status=None):
        """Every logged value, one row each: the columns and row order of `htm export`
        (run_id, experiment, variant, seed, status, config_hash, split, metric, step, epoch,
        value, time); value NaN where the run logged NaN. Filters: experiment name(s), run
        id(s), split(s), metric name(s), status(es)."""
        params = []
        where = self._run_filter(experiment, runs, status, params)
        where += _in("m.split", _as_list(split), params) + _in("m.name", _as_list(name), params)
        df = self.sql(
            "SELECT r.id AS run_id, e.name AS experiment, r.variant, r.seed, r.status, r.config_hash, m.split, "
            "m.name AS metric, m.step, m.epoch, m.value, m.time FROM metrics m JOIN runs r ON r.id = m.run_id "
            "JOIN experiments e ON e.id = r.experiment_id WHERE 1"
            + where
            + " ORDER BY r.id, m.split, m.name, m.step, m.rowid",
            params,
        )
        df["value"] = df["value"].astype(float)
        return df

    def finals(self, experiment=None, runs=None, split=None, name=None, status=None):
        """The last value of each run's metric (the latest_metrics view: the highest step, then
        the latest logged): run_id, experiment, variant, seed, status, phase, config_hash,
        split, metric, step, epoch, value."""
        params = []
        where = self._run_filter(experiment, runs, status, params)
        where += _in("m.split", _as_list(split), params) + _in("m.name", _as_list(name), params)
        df = self.sql(
            "SELECT run_id, experiment, variant, seed, status, phase, config_hash, split, metric, step, epoch, value "
            "FROM (SELECT r.id AS run_id, e.name AS experiment, r.variant, r.seed, r.status, "
            "coalesce((SELECT value FROM tags t WHERE t.run_id = r.id AND t.key = 'phase'), 'explore') AS phase, "
            "r.config_hash, m.split, m.name AS metric, m.step, m.epoch, m.value, "
            "row_number() OVER (PARTITION BY m.run_id, m.split, m.name "
            "ORDER BY m.step DESC, m.time DESC, m.rowid DESC) AS position "
            "FROM metrics m JOIN runs r ON r.id = m.run_id JOIN experiments e ON e.id = r.experiment_id WHERE 1"
            + where
            + ") WHERE position = 1 ORDER BY run_id, split, metric",
            params,
        )
        df["value"] = df["value"].astype(float)
        return df

    def compare(self, experiment, metrics=("mse",), **options):
        """htm compare's table as a DataFrame; see htm_results.compare.compare."""
        from .compare import compare

        return compare(self, experiment, metrics, **options)


def open_results(path=DEFAULT_PATH, timeout=5.0):
    """Results(path): the database open read-only."""
    return Results(path, timeout)
