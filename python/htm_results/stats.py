"""The statistics of `htm compare`, ported from core/src/stats/statistics.cpp.

Plain functions on lists of floats, with the same arithmetic in the same order as the C++ code,
so that the two agree to the last bits or nearly: means, unbiased standard deviations, the
paired and Welch t-tests, effects as % of the reference with their delta-method intervals,
one-sided bounds against a target or a margin, and the Holm and Bonferroni adjustments.

The C++ code takes Student's t distribution from Boost.Math; here it is the regularized
incomplete beta function (a continued fraction, as Boost's cdf calls it) and its inverse found
by bisection and Newton's method. Neither scipy nor numpy is needed.
"""

import math
from dataclasses import dataclass

NAN = float("nan")
_EPS = 2.0**-52


def mean(v):
    """The arithmetic mean, summed left to right as std::accumulate does; NaN when empty."""
    if len(v) == 0:
        return NAN
    total = 0.0
    for x in v:
        total += x
    return total / len(v)


def _variance(v):
    if len(v) < 2:
        return NAN
    m = mean(v)
    s = 0.0
    for x in v:
        s += (x - m) * (x - m)
    return s / (len(v) - 1)


def sd(v):
    """The unbiased standard deviation; NaN with fewer than 2 values."""
    return math.sqrt(_variance(v)) if len(v) >= 2 else NAN


def _covariance(a, b):
    ma, mb = mean(a), mean(b)
    s = 0.0
    for x, y in zip(a, b):
        s += (x - ma) * (y - mb)
    return s / (len(a) - 1)


# ---- Student's t distribution -------------------------------------------------------------


def _continued_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (modified Lentz), converging for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) <= _EPS:
            break
    return h


def _log_beta(a, b):
    """log B(a, b); for a large beside b, lgamma(a) - lgamma(a + b) from Stirling's series of the
    difference, which does not lose the digits that subtracting two large lgammas would."""
    if a < b:
        a, b = b, a
    if a < 30:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    def series(z):  # lgamma(z) - [(z - 1/2) log z - z + log(2 pi)/2]
        z2 = z * z
        return (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * z2)) / z2) / z2) / z

    difference = -(a - 0.5) * math.log1p(b / a) - b * math.log(a + b) + b + series(a) - series(a + b)
    return math.lgamma(b) + difference


def ibeta_pair(a, b, x, y=None):
    """The regularized incomplete beta function I_x(a, b) and its complement 1 - I_x(a, b), each
    to full relative precision where the continued fraction gives it; `y` is 1 - x, given where
    it is known more precisely than 1 - x can be computed."""
    if y is None:
        y = 1.0 - x
    if x <= 0:
        return 0.0, 1.0
    if y <= 0:
        return 1.0, 0.0
    log_x = math.log1p(-y) if x > 0.5 else math.log(x)  # whichever of x and y is the smaller is exact
    log_y = math.log1p(-x) if y > 0.5 else math.log(y)
    front = math.exp(a * log_x + b * log_y - _log_beta(a, b))
    if x < (a + 1.0) / (a + b + 2.0):
        value = front * _continued_fraction(a, b, x) / a
        return value, 1.0 - value
    complement = front * _continued_fraction(b, a, y) / b
    return 1.0 - complement, complement


def ibeta(a, b, x, y=None):
    """I_x(a, b), the regularized incomplete beta function."""
    return ibeta_pair(a, b, x, y)[0]


def ibetac(a, b, x, y=None):
    """1 - I_x(a, b)."""
    return ibeta_pair(a, b, x, y)[1]


def _lower_probability(t, df):
    """P(T <= -|t|), as Boost's students_t cdf computes it."""
    if df > 1 / _EPS:  # the normal distribution, as Boost takes it there
        return 0.5 * math.erfc(abs(t) / math.sqrt(2.0))
    x2 = t * t
    if df > 2 * x2:
        z = x2 / (df + x2)
        return ibetac(0.5, df / 2, z, df / (df + x2)) / 2
    z = df / (df + x2)
    return ibeta(df / 2, 0.5, z, x2 / (df + x2)) / 2


def t_cdf(t, df):
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if math.isnan(t) or math.isnan(df):
        return NAN
    if t == 0:
        return 0.5
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    p = _lower_probability(t, df)
    return 1.0 - p if t > 0 else p


def upper_tail(t, df):
    """P(T >= t)."""
    return t_cdf(-t, df)


def t_density(t, df):
    log_norm = 0.5 * math.log(df) + _log_beta(df / 2, 0.5)
    return math.exp(-(df + 1) / 2 * math.log1p(t * t / df) - log_norm)


def t_quantile(df, probability):
    """The t with P(T <= t) = probability."""
    if math.isnan(df) or not 0 < probability < 1:
        return NAN
    if probability == 0.5:
        return 0.0
    if probability < 0.5:
        return -t_quantile(df, 1.0 - probability)
    tail = 1.0 - probability  # the upper tail to reach, > 0
    low, high = 0.0, 1.0
    while upper_tail(high, df) > tail:
        low, high = high, 2 * high
    for _ in range(200):  # bisection to a narrow bracket
        middle = (low + high) / 2
        if upper_tail(middle, df) > tail:
            low = middle
        else:
            high = middle
        if high - low <= 1e-9 * high:
            break
    q = (low + high) / 2
    for _ in range(8):  # Newton's method: d/dq upper_tail(q) = -density(q)
        step = (upper_tail(q, df) - tail) / t_density(q, df)
        q += step
        if abs(step) <= 2 * _EPS * abs(q):
            break
    return q


# ---- tests and effects --------------------------------------------------------------------


@dataclass
class TTest:
    """A two-sided t-test of a against b. Every field but kind and diff is NaN when the test
    cannot be formed (fewer than 2 values or pairs, or no spread)."""

    kind: str = "welch"  # "paired" or "welch"
    diff: float = 0.0  # mean(a) - mean(b)
    t: float = 0.0
    df: float = 0.0
    p: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    se: float = 0.0


def _finish(r, confidence):
    if not (r.se > 0) or not math.isfinite(r.se) or not (r.df > 0):
        r.t = r.df = r.p = r.ci_low = r.ci_high = r.se = NAN
        return r
    r.t = r.diff / r.se
    r.p = min(1.0, 2 * upper_tail(abs(r.t), r.df))
    q = t_quantile(r.df, (1 + confidence) / 2)
    r.ci_low = r.diff - q * r.se
    r.ci_high = r.diff + q * r.se
    return r


def welch_test(a, b, confidence=0.95):
    """Welch's unequal-variance test (Welch-Satterthwaite degrees of freedom)."""
    r = TTest(kind="welch", diff=mean(a) - mean(b))
    if len(a) < 2 or len(b) < 2:
        return _finish(r, confidence)
    va, vb = _variance(a) / len(a), _variance(b) / len(b)
    r.se = math.sqrt(va + vb)
    r.df = (va + vb) * (va + vb) / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return _finish(r, confidence)


def paired_test(a, b, confidence=0.95):
    """The paired test on a[i] - b[i] (the pairs share a seed)."""
    if len(a) != len(b):
        raise ValueError("a paired test needs as many values on each side")
    d = [x - y for x, y in zip(a, b)]
    r = TTest(kind="paired", diff=mean(d))
    if len(d) < 2:
        return _finish(r, confidence)
    r.se = sd(d) / math.sqrt(len(d))
    r.df = float(len(d) - 1)
    return _finish(r, confidence)


@dataclass
class Effect:
    percent: float = NAN  # 100 (mean(a) / mean(b) - 1)
    ci_low: float = NAN
    ci_high: float = NAN


def percent_effect(a, b, test, confidence=0.95):
    """100 (mean(a)/mean(b) - 1) % with the delta-method interval of the ratio of means."""
    ma, mb = mean(a), mean(b)
    e = Effect(percent=100 * (ma / mb - 1) if mb != 0 else NAN)
    if mb == 0 or math.isnan(test.df) or len(a) < 2 or len(b) < 2:
        return e
    ratio, na, nb = ma / mb, float(len(a)), float(len(b))
    var = _variance(a) / na + ratio * ratio * _variance(b) / nb
    if test.kind == "paired":
        var -= 2 * ratio * _covariance(a, b) / na
    se = math.sqrt(max(0.0, var)) / abs(mb)
    q = t_quantile(test.df, (1 + confidence) / 2)
    e.ci_low = 100 * (ratio - q * se - 1)
    e.ci_high = 100 * (ratio + q * se - 1)
    return e


# ---- targets and margins ------------------------------------------------------------------


@dataclass
class Target:
    """A claim about a metric's mean, "cluster_f1>=0.9" (also >, <=, <)."""

    metric: str
    at_least: bool
    threshold: float
    text: str


def _parse_claim(option, text, example):
    at = min((i for i in (text.find("<"), text.find(">")) if i >= 0), default=-1)
    if at <= 0:
        raise ValueError(f"{option} {text}: no comparison; {example}")
    value_at = at + 1 + (text[at + 1 : at + 2] == "=")
    value = text[value_at:]
    try:
        threshold = float(value)
    except ValueError:
        threshold = NAN
    if not math.isfinite(threshold):
        raise ValueError(f"{option} {text}: '{value}' is not a number; {example}")
    return Target(text[:at], text[at] == ">", threshold, text)


def parse_target(text):
    return _parse_claim("--target", text, "expected METRIC>=VALUE or METRIC<=VALUE, e.g. cluster_f1>=0.9")


@dataclass
class Margin:
    """A claim about each variant's difference from the reference: "cluster_f1>=-1%" (a share
    of the reference's mean) or "mse<=0.002" (in the metric's units)."""

    metric: str
    at_least: bool
    value: float
    percent: bool
    text: str


def parse_margin(text):
    percent = text.endswith("%")
    claim = _parse_claim(
        "--margin", text[:-1] if percent else text, "expected METRIC>=MARGIN or METRIC<=MARGIN, e.g. cluster_f1>=-1%"
    )
    return Margin(claim.metric, claim.at_least, claim.threshold, percent, text)


@dataclass
class TargetCheck:
    bound: float = NAN  # one-sided bound of the mean on the target's side
    p: float = NAN
    met: bool = False


def check_target(values, target, confidence=0.95):
    c = TargetCheck()
    if len(values) < 2:
        return c
    m, se = mean(values), sd(values) / math.sqrt(len(values))
    df = float(len(values) - 1)
    sign = 1.0 if target.at_least else -1.0
    if se == 0:
        c.bound = m
        c.p = 0.0 if sign * (m - target.threshold) > 0 else 1.0
    else:
        c.bound = m - sign * t_quantile(df, confidence) * se
        c.p = upper_tail(sign * (m - target.threshold) / se, df)
    c.met = sign * (c.bound - target.threshold) >= 0
    return c


@dataclass
class MarginCheck:
    bound: float = NAN  # one-sided bound of the difference
    threshold: float = NAN  # the margin in the metric's units
    p: float = NAN
    met: bool = False


def check_margin(test, reference_mean, margin, confidence=0.95):
    c = MarginCheck()
    c.threshold = margin.value / 100 * abs(reference_mean) if margin.percent else margin.value
    if not (test.se > 0) or not (test.df > 0):
        return c
    sign = 1.0 if margin.at_least else -1.0
    c.bound = test.diff - sign * t_quantile(test.df, confidence) * test.se
    c.p = upper_tail(sign * (test.diff - c.threshold) / test.se, test.df)
    c.met = sign * (c.bound - c.threshold) >= 0
    return c


# ---- adjustment ---------------------------------------------------------------------------


def adjust(p, adjustment="holm"):
    """Adjusted p-values, in the order given; NaN entries stay NaN and do not count. Holm's
    step-down: the k-th smallest of m p-values becomes max over j <= k of min(1, (m-j+1) p_(j))."""
    if adjustment not in ("holm", "bonferroni", "none"):
        raise ValueError(f"--adjust {adjustment}: expected holm, bonferroni or none")
    order = [i for i, x in enumerate(p) if not math.isnan(x)]
    out = list(p)
    m = float(len(order))
    if adjustment == "none":
        return out
    if adjustment == "bonferroni":
        for i in order:
            out[i] = min(1.0, m * p[i])
        return out
    order.sort(key=lambda i: p[i])  # stable, as std::stable_sort
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out
