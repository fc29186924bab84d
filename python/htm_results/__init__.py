"""htm_results: an htm results database (docs/results.md) as pandas DataFrames.

    import htm_results
    db = htm_results.open("results/htm.sqlite")      # read-only; safe while `htm run` writes
    db.runs("quickstart")                             # one row per run
    db.settings_wide("quickstart", varying=True)      # one column per setting that differs
    db.metrics("quickstart", split="test", name="mse")  # the curves, as `htm export` writes them
    db.finals("quickstart", name="mse")               # each run's last value
    db.compare("quickstart", "mse")                   # `htm compare`'s table, full precision

Needs pandas only (and the standard library's sqlite3); docs/results.md, "From Python".
"""

from . import stats
from .compare import COLUMNS as COMPARE_COLUMNS
from .compare import compare, from_samples, qualified_metric
from .store import DEFAULT_PATH, METRIC_COLUMNS, Results, open_results, parse_setting

open = open_results  # htm_results.open(path)

__all__ = [
    "COMPARE_COLUMNS", "DEFAULT_PATH", "METRIC_COLUMNS", "Results", "compare", "from_samples", "open", "open_results",
    "parse_setting", "qualified_metric", "stats",
]  # fmt: skip
