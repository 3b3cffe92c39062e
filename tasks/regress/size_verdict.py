"""A change's size as the stack shows it alone, read off interleaved solo rounds (tasks/measure/interleaved.py), the
looks at which the rounds stop, and the verdict the duet's finding and that size support together.

Per metric, each round gives one log ratio, candidate over reference, of the two sides measured alone minutes
apart in a random order; their mean is the change's size (`change_pct`) and a t interval of it with K-1 degrees of
freedom its interval (`change_ci`), its standard error never below what a counted metric's requests can resolve
(throughput: one request in n is a step of 1/n). The size is "alone on this host at this load point": what a team
that serves the stack this way sees, not what a duet's two servers on one core see of it.

Which metrics: the server's CPU time per request always; throughput only at closed-loop points (at an open-loop
rate throughput is the offered rate); p50 and p99, the p99 only from rounds whose two sides each held enough requests
for it (a p99 of too few requests is a lower bound, not a figure: docs/measuring.md#confidence). A round in which a
side was contended (`tasks.validate.outcome.judge_host`) is set aside: nothing cancels what other work did to one
side alone.

The stop rule (tasks/regress/looks.py): rounds are judged at the looks of `size_schedule(size_rounds)`, 4, 6, 8 and
12 rounds for 12 (L = 4), every flagged metric's interval (the metrics whose duet found a change or is undecided) at
two-sided confidence 1 - ALPHA_SIZE / L; the rounds stop at the first look where every flagged metric's interval lies
wholly beyond +e, wholly beyond -e or wholly inside (-e, +e) (e the metric's minimum effect, on the worse-is-positive
log scale), or when the time ends; that look's interval is published, with its looks (taken, of L) and confidence.

The verdicts, by the duet's finding (tasks/regress/duet_verdict.py, the detector) and the size (the ruler):

    duet                 size alone                                             published
    found a change       wholly beyond +e / -e                                  regression / improvement
                         wholly inside (-e, +e)                                 no_change (real, under the minimum)
                         across +e or -e, or not measured                       regression_uncertain /
                                                                                improvement_uncertain (its direction)
    undecided            at 1 - ALPHA_SIZE / (L * m) wholly beyond +e / -e      regression / improvement
                         at 1 - ALPHA_SIZE / (L * m) wholly inside (-e, +e)     no_change
                         anything else, or not measured                         undecided
    decided no change    wholly beyond +e or -e                                 disputed
                         anything else                                          no_change

m is the number of size intervals read tonight as the detector (those of metrics whose duet was undecided): each is
a test of its own, Bonferroni over them and over the looks. `undecided` and `disputed` are "not settled": counted
apart, nobody's reference (tasks/regress/references.py), judged again the next night.
"""

from __future__ import annotations

import math
import statistics

from tasks.core.metrics import METRICS, bad_sign
from tasks.regress.looks import Schedule
from tasks.validate.outcome import judge_host

ALPHA_SIZE = 0.05  # a size's error rate, spent over its looks: one look's interval is 95 %, as a size's always was
SIZE_CONFIDENCE_PCT = 100 * (1 - ALPHA_SIZE)  # the interval of a size judged at one look
SIZE_METRICS = ("server_cpu_us_per_request", "throughput_rps", "latency_ms_p50", "latency_ms_p99")
CLOSED_LOOP_ONLY = ("throughput_rps",)  # at an open-loop rate throughput is the offered rate, not the stack's
COUNTED = {"throughput_rps": "requests"}  # metric -> the count it is made of in a round (`_count_floor_se`)
SCOPE = "alone on this host at this load point"
UNCERTAIN = {"regression": "regression_uncertain", "improvement": "improvement_uncertain"}
FLAGGED = ("regression", "improvement", "undecided")  # duet verdicts whose size the rounds wait for


def trusted_rounds(rounds: list[dict], max_neighbour_pct: float) -> tuple[list[dict], list[str]]:
    """The rounds whose two sides both ran on a quiet enough host, and why each other round was set aside."""
    kept, flags = [], []
    for one in rounds:
        why = [f"{label}: {contention.summary}" for label, figures in sorted((one.get("sides") or {}).items())
               if (contention := judge_host(figures.get("host") or {}, max_neighbour_pct)) is not None]
        if why:
            flags.append(f"round {one.get('index')}: contended ({'; '.join(why)})")
        else:
            kept.append(one)
    return kept, flags


def _ratios(rounds: list[dict], metric: str) -> list[float]:
    out = []
    for one in rounds:
        sides = one.get("sides") or {}
        a, b = (sides.get("reference") or {}).get(metric), (sides.get("candidate") or {}).get(metric)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 and b > 0:
            out.append(math.log(b / a))
    return out


def _count_floor_se(rounds: list[dict], metric: str) -> float | None:
    """The standard error a counted metric's mean log ratio has from its counts alone (None: not a counted metric).

    A round's throughput is its requests over a fixed time: one request more or fewer is a step of about 1/n in
    log, and where in that step the true rate lies is unknown, a uniform error of variance 1/(12 n^2) per side.
    Rounds of a slow model can then agree exactly (31 requests on both sides, four times) and their spread, 0,
    would claim a size of exactly +0.0 % [0.0, 0.0]; the counts cannot resolve that, so the interval is never
    narrower than they can."""
    count = COUNTED.get(metric)
    if count is None:
        return None
    variance = 0.0
    for one in rounds:
        sides = one.get("sides") or {}
        counts = [(sides.get(side) or {}).get(count) for side in ("reference", "candidate")]
        if not all(isinstance(n, int | float) and n > 0 for n in counts):
            return None
        variance += sum(1.0 / (12.0 * n * n) for n in counts)
    return math.sqrt(variance) / len(rounds) if rounds else None


def interval_at(size: dict, confidence_pct: float) -> list[float] | None:
    """The size's interval ([low, high], %) at another two-sided confidence (None: the size has no interval)."""
    if size.get("log_se") is None:
        return None
    from scipy import stats  # lazy: scipy (about 0.3 s) only when a size is read

    half = float(stats.t.ppf(0.5 + confidence_pct / 200.0, size["df"])) * size["log_se"]
    return [100.0 * math.expm1(size["log_mean"] - half), 100.0 * math.expm1(size["log_mean"] + half)]


def size_metric(rounds: list[dict], metric: str, mode: str, confidence_pct: float = SIZE_CONFIDENCE_PCT) -> dict:
    """One metric's size over the rounds: change_pct, change_ci ([low, high], %, at `confidence_pct`), the log mean,
    standard error and degrees of freedom it rests on, the rounds and those left out (no figure on both sides), or
    a reason where there is none. The standard error is the rounds' spread's, or the counts' resolution where that
    is wider (`_count_floor_se`)."""
    out = {"metric": metric, "rounds": 0, "left_out": 0, "change_pct": None, "change_ci": None, "reason": None,
           "confidence_pct": confidence_pct, "log_mean": None, "log_se": None, "df": None}
    if metric in CLOSED_LOOP_ONLY and mode != "concurrency":
        out["reason"] = f"not sized at an open-loop point ({mode}): its throughput is the offered rate"
        return out
    ratios = _ratios(rounds, metric)
    out.update(rounds=len(ratios), left_out=len(rounds) - len(ratios))
    if len(ratios) < 2:
        why = " (a p99 of too few requests is a lower bound)" if metric == "latency_ms_p99" and out["left_out"] else ""
        out["reason"] = f"{len(ratios)} round(s) with the figure on both sides{why}: a size needs two"
        return out
    mean = statistics.fmean(ratios)
    spread_se = statistics.stdev(ratios) / math.sqrt(len(ratios))
    floor_se = _count_floor_se([r for r in rounds if _ratios([r], metric)], metric)
    out.update(change_pct=100.0 * math.expm1(mean), log_mean=mean, log_se=max(spread_se, floor_se or 0.0),
               df=len(ratios) - 1)
    out["change_ci"] = interval_at(out, confidence_pct)
    return out


def look_confidence_pct(schedule: Schedule) -> float:
    """The two-sided confidence of one look's interval: 1 - ALPHA_SIZE / L."""
    return 100.0 * (1.0 - schedule.alpha(ALPHA_SIZE))


def size_at_look(rounds: list[dict], metric: str, mode: str, schedule: Schedule) -> dict:
    """One metric's size at the latest look the (trusted) rounds reached: over that look's rounds, at the look's
    confidence, with its looks (taken, of L); without a look yet, the reason."""
    look = schedule.latest(len(rounds))
    looks = {**schedule.to_dict(), "taken": schedule.taken(len(rounds)), "at": look}
    if look is None:
        size = size_metric([], metric, mode, look_confidence_pct(schedule))
        if metric not in CLOSED_LOOP_ONLY or mode == "concurrency":  # else: not sized at this point at all
            size["reason"] = f"{len(rounds)} round(s), fewer than the first look's {schedule.looks[0]}"
        return {**size, "looks": looks}
    return {**size_metric(rounds[:look], metric, mode, look_confidence_pct(schedule)), "looks": looks}


def _worse_interval(metric: str, ci: list[float]) -> tuple[float, float]:
    """An interval in % on the log scale where worse is positive."""
    low, high = sorted(bad_sign(metric) * math.log1p(v / 100.0) for v in ci)
    return low, high


def decides(metric: str, ci: list[float] | None) -> str | None:
    """Where an interval lies against the minimum effect: `beyond` (+e, worse), `below` (-e, better), `inside`, or
    None (across one of them, or no interval)."""
    if not ci:
        return None
    low, high = _worse_interval(metric, ci)
    limit = math.log1p(METRICS[metric].min_effect)
    if low >= limit:
        return "beyond"
    if high <= -limit:
        return "below"
    if -limit < low and high < limit:
        return "inside"
    return None


def sizes_settled(sizes: dict[str, dict], duet_verdicts: dict[str, str]) -> bool:
    """The stop rule at a look: every flagged metric (its duet found a change or is undecided) that has an interval
    lies wholly beyond +e, wholly beyond -e or wholly inside (-e, +e), and at least one has one."""
    flagged = [m for m, v in duet_verdicts.items() if v in FLAGGED and m in sizes]
    with_interval = [m for m in flagged if sizes[m].get("change_ci")]
    return bool(with_interval) and all(decides(m, sizes[m]["change_ci"]) is not None for m in with_interval)


def _shown(size: dict, ci: list[float], confidence_pct: float) -> str:
    return f"{size['change_pct']:+.1f} % [{ci[0]:+.1f}, {ci[1]:+.1f}] alone at {confidence_pct:.4g} %"


def detector_confidence_pct(size: dict, detector_tests: int) -> float:
    """The confidence of a size read as the detector: 1 - ALPHA_SIZE / (L * m)."""
    looks = (size.get("looks") or {}).get("of") or 1
    return 100.0 * (1.0 - ALPHA_SIZE / (looks * max(1, detector_tests)))


def verdict_interval(duet_verdict: str, size: dict | None, detector_tests: int = 1) -> tuple[list | None,
                                                                                      float | None]:
    """The interval a metric's verdict rests on and its confidence: read as the detector where the duet is
    undecided (1 - ALPHA_SIZE / (L * m)), else the look's (1 - ALPHA_SIZE / L). The record publishes this one, so
    the verdict never contradicts the interval printed beside it."""
    size = size or {}
    if duet_verdict == "undecided" and size.get("log_se") is not None:
        confidence = detector_confidence_pct(size, detector_tests)
        return interval_at(size, confidence), confidence
    return size.get("change_ci"), size.get("confidence_pct")


def size_verdict(metric: str, duet_verdict: str, size: dict | None, detector_tests: int = 1) -> tuple[str, str]:
    """(verdict, why) of a metric from its duet's verdict (the detector) and its size alone (the ruler), by the
    table of the module's docstring; `detector_tests`: m, the size intervals read tonight as the detector."""
    effect = 100 * METRICS[metric].min_effect
    ci = (size or {}).get("change_ci")
    where = decides(metric, ci)
    if duet_verdict in UNCERTAIN:
        uncertain = UNCERTAIN[duet_verdict]
        if not ci:
            why = (size or {}).get("reason") or "the change's size was not measured"
            return uncertain, f"the duet found a {duet_verdict}; size uncertain: {why}"
        shown = _shown(size, ci, size["confidence_pct"])
        if where in ("beyond", "below"):
            return ("regression" if where == "beyond" else "improvement"), \
                f"{shown}: wholly beyond the minimum effect of {effect:g} %"
        if where == "inside":
            return "no_change", (f"{shown}: real (the duet found a {duet_verdict}) but smaller than the minimum "
                                 f"effect of {effect:g} %")
        return uncertain, f"{shown}: the duet found a {duet_verdict}, size uncertain (across {effect:g} %)"
    if duet_verdict == "undecided":
        if not ci:
            why = (size or {}).get("reason") or "the change's size was not measured"
            return "undecided", f"the duet is undecided and the size alone is not known: {why}"
        strict, confidence = verdict_interval(duet_verdict, size, detector_tests)
        shown = _shown(size, strict, confidence)
        read = f"read as the detector ({detector_tests} such size(s) tonight)"
        found = decides(metric, strict)
        if found in ("beyond", "below"):
            return ("regression" if found == "beyond" else "improvement"), \
                f"the duet is undecided; {shown}, {read}: wholly beyond the minimum effect of {effect:g} %"
        if found == "inside":
            return "no_change", (f"the duet is undecided; {shown}, {read}: wholly inside the minimum effect of "
                                 f"{effect:g} %")
        return "undecided", f"the duet is undecided and so is the size alone: {shown}, {read}"
    if duet_verdict == "no_change":
        if where in ("beyond", "below"):
            shown = _shown(size, ci, size["confidence_pct"])
            return "disputed", (f"the duet decided no change, but {shown} lies wholly beyond the minimum effect of "
                                f"{effect:g} %: the two disagree")
        return "no_change", "the duet decided no change (its interval wholly inside its threshold)"
    return duet_verdict, "the duet could not judge it"
