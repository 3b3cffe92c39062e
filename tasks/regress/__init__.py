"""The regression check: did anything get slower or less accurate, and is it the stack or the host?

    check.py         one run judged: each cell against its reference night, the control's history, parity
    references.py    a cell's reference (its newest accepted earlier night) and what changed since
    night_duets.py   the night's duets: changed cells measured beside their reference, per host; the A/A duet
    order.py         the order the night's regression work is done in: the answers' cells first, round robin
    point.py         one changed load point's work: its duet, its size, its attribution, what is left
    duet_verdict.py  judging a duet's pairs (the detector): ratios, the paired test, the duet's own threshold
    looks.py         the look schedules of duets and sizes, and the alpha spent over them
    clock.py         whether the next pair or round fits before the night's deadline
    carry.py         work the night's clock left, carried to the next night and pooled while its inputs hold
    sides.py         the sides served again tonight, from inputs records; pairs and rounds measured look by look
    size_rounds.py   a changed point sized alone in interleaved rounds, look by look
    size_verdict.py  reading the rounds: each metric's size and interval, and the verdict table
    attribution.py   which changed part caused it: the reference with one part of tonight's, a duet each
    history_check.py history detection per cell key, host and metric (the environment, on the control cell)
    noise.py         how much a metric moves from night to night when nothing changed
    compare.py       whether a difference is beyond the noise; two runs side by side
    annotations.py   runs (or cells) excluded from baselines, or a regressed night's level accepted, with a reason
    missing.py       each planned cell's outcome on a night; cells ok on the previous night and gone tonight
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"judge_run": "check", "detect_regressions": "history_check", "run_duets": "night_duets",
           "judge_pairs": "duet_verdict",
           "find_references": "references", "compare_rows": "compare", "add_exclusion": "annotations"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
