"""The configuration search's bookkeeping (tasks/plan/tune.py), on a stand-in measurement (the real-server search
is in tests/integration/test_tune_servers.py): which configurations are tried, which is kept, the time budget."""

from __future__ import annotations

from tasks.plan.tune import Trial, grid_configs, search
from tasks.serve.knobs import DEFAULT_CONFIG_ID, Knob, config_id

KNOBS = (Knob("instances", (1, 2, 4), "model instances"), Knob("dynamic_batching", (False, True), "batching"))
DEFAULTS = {"instances": 1, "dynamic_batching": False}


def fake_measure(scores: dict[tuple, float | None], cost_s: float = 10.0, clock: list | None = None):
    """A measurement whose score is looked up by (instances, dynamic_batching); each costs `cost_s`."""
    def measure(config, cid):
        if clock is not None:
            clock[0] += cost_s
        score = scores[(config["instances"], config["dynamic_batching"])]
        return Trial(dict(config), cid, score, 5.0 if score else None, cost_s)
    return measure


def test_grid_tries_the_default_first_then_every_combination_once():
    configs = grid_configs(KNOBS, DEFAULTS)
    assert configs[0] == DEFAULTS and len(configs) == 6
    assert len({tuple(sorted(c.items())) for c in configs}) == 6


def test_quick_search_changes_one_knob_at_a_time_and_keeps_only_what_raises_throughput():
    scores = {(1, False): 100.0, (2, False): 180.0, (4, False): 150.0, (1, True): 90.0, (2, True): 240.0,
              (4, True): 400.0}
    clock = [0.0]
    result = search("quick", fake_measure(scores, clock=clock), KNOBS, DEFAULTS, budget_s=1000, estimate_s=10,
                    clock=lambda: clock[0])
    tried = [(t.config["instances"], t.config["dynamic_batching"]) for t in result.trials]
    assert tried == [(1, False), (2, False), (4, False), (2, True)]  # instances first, then batching at 2
    assert result.best.config == {"instances": 2, "dynamic_batching": True} and result.best.score_rps == 240.0
    assert (4, True) not in tried  # quick is not a grid: it never tries the untried corner


def test_a_gain_within_noise_does_not_replace_the_default():
    scores = {(1, False): 100.0, (2, False): 101.0, (4, False): 99.0, (1, True): 102.0, (2, True): 0.0,
              (4, True): 0.0}
    result = search("quick", fake_measure(scores), KNOBS, DEFAULTS, budget_s=1000, estimate_s=10)
    assert result.best.config_id == DEFAULT_CONFIG_ID


def test_the_budget_stops_the_search_before_a_configuration_that_would_not_fit():
    scores = dict.fromkeys([(i, b) for i in (1, 2, 4) for b in (False, True)], 100.0)
    clock = [0.0]
    result = search("grid", fake_measure(scores, cost_s=40.0, clock=clock), KNOBS, DEFAULTS, budget_s=130,
                    estimate_s=40, clock=lambda: clock[0])
    assert len(result.trials) == 3 and result.used_s == 120 and "time budget" in result.stop_reason


def test_configurations_without_a_point_under_the_bound_never_win():
    scores = {(1, False): None, (2, False): 50.0, (4, False): None, (1, True): None, (2, True): None,
              (4, True): None}
    result = search("grid", fake_measure(scores), KNOBS, DEFAULTS, budget_s=1000, estimate_s=10)
    assert result.best.config == {"instances": 2, "dynamic_batching": False}
    none = search("grid", fake_measure(dict.fromkeys(scores, None)), KNOBS, DEFAULTS, budget_s=1000, estimate_s=1)
    assert none.best is None


BATCHING_KNOBS = (Knob("dynamic_batching", (False, True), "batching"),
                  Knob("batch_delay_us", (100, 1000, 5000), "batching delay", requires=("dynamic_batching", True)),
                  Knob("preferred_batch_sizes", ((), (4, 8)), "preferred sizes", requires=("dynamic_batching", True)))
BATCHING_DEFAULTS = {"dynamic_batching": False, "batch_delay_us": 1000, "preferred_batch_sizes": []}


def batching_measure(score_of, tried: list):
    def measure(config, cid):
        tried.append((cid, dict(config)))
        return Trial(dict(config), cid, score_of(config), 5.0, 1.0)
    return measure


def test_a_knob_that_changes_nothing_is_not_a_new_configuration():
    # a tuple and the list JSON makes of it are the same value: the default, not a new configuration
    assert config_id({**BATCHING_DEFAULTS, "preferred_batch_sizes": ()}, BATCHING_DEFAULTS) == DEFAULT_CONFIG_ID
    # without batching, the batching delay and preferred sizes change nothing: 1 + 3 * 2 batching configurations
    configs = grid_configs(BATCHING_KNOBS, BATCHING_DEFAULTS)
    assert len(configs) == 7 and len({config_id(c, BATCHING_DEFAULTS) for c in configs}) == 7
    assert [c for c in configs if not c["dynamic_batching"]] == [BATCHING_DEFAULTS]


def test_quick_search_skips_knobs_that_do_not_matter_and_never_measures_a_configuration_twice():
    tried: list = []
    # batching off stays best: the delay and the preferred sizes are never tried (they would change nothing)
    search("quick", batching_measure(lambda c: 100.0 - 50 * c["dynamic_batching"], tried), BATCHING_KNOBS,
           BATCHING_DEFAULTS, budget_s=1000, estimate_s=1)
    assert [cid for cid, _ in tried] == [DEFAULT_CONFIG_ID, config_id({**BATCHING_DEFAULTS, "dynamic_batching": True},
                                                                      BATCHING_DEFAULTS)]
    # batching wins, then a delay of 100 us wins: the default delay of 1000 us (measured with batching already,
    # as the configuration that won the batching knob) is not measured again
    tried.clear()
    result = search("quick", batching_measure(lambda c: {False: 100.0, True: 150.0}[c["dynamic_batching"]]
                                              + 50 * (c["batch_delay_us"] == 100), tried),
                    BATCHING_KNOBS, BATCHING_DEFAULTS, budget_s=1000, estimate_s=1)
    ids = [cid for cid, _ in tried]
    assert len(ids) == len(set(ids)) == 5  # default, batching, delay 100, delay 5000, preferred (4, 8)
    assert result.best.config == {"dynamic_batching": True, "batch_delay_us": 100, "preferred_batch_sizes": []}
