"""The regression check: did anything get slower or less accurate, and is it the stack or the host?

    check.py        one run judged: its history read from the store, the hygiene rules applied
    detect.py       regression detection per cell key, host and metric, with one false-alarm budget a night
    noise.py        how much a metric moves from night to night when nothing changed
    confirm.py      suspects re-measured beside the control before they are published
    compare.py      whether a difference is beyond the noise; two runs side by side
    annotations.py  runs (or cells) excluded from baselines, with a reason
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"judge_run": "check", "detect_regressions": "detect", "confirm_run": "confirm",
           "compare_rows": "compare", "add_exclusion": "annotations"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
