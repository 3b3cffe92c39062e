"""The plan step: the run's configuration resolved and checked once, expanded into conversions, server sessions
and cells, spread over the measuring hosts.

    config.py    `RunConfig`: the Params (defaults < suite < given) parsed and checked before any work
    suites.py    suites/<name>.yaml, the named sets of Params
    cells.py     `Plan`, `Session`, `Cell`: what a run measures, frozen, read back from plan.json by later steps
    control.py   the control cell measured every night, and how tonight's control row is found
    hosts.py     the measuring hosts: one queue and one one-slot pool each
    tune.py      the serving-configuration search and what one configuration costs
    capacity.py  how many measuring hosts a nightly matrix needs for a window
    night.py     the night's budget: each stage's planned cost, what fits in the order of classes, the clock
    candidates.py      each cell's last night, the stacks that may be a model's best, each cell's class
    estimates.py       what each stage costs, from the suite's last nights on this host or the Params
    past_nights.py     the suite's last nights on this host: plans, rows, timelines, budgets, regression records
    fingerprints.py    which cells changed since their last night, as the plan step can tell
    deadline_alert.py  when the nightly DAG's deadline alert fires: the scheduled suite's budget + 10 %
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"RunConfig": "config", "Plan": "cells", "Session": "cells", "Cell": "cells", "make_plan": "cells",
           "load_suite": "suites", "control_cell": "control", "deployed_hosts": "hosts", "search": "tune"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
