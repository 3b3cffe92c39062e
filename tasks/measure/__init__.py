"""Measuring one server session: start it, check what it serves, run its load points, read the host around them.

    session.py       `measure_session`: every cell of one session as a row, judged by tasks.validate.outcome
    context.py       what a session's server lives are measured with, the server life, the start of every row
    life.py          one server life: start, served-output checks, profile, every cell, one restart, stop
    point.py         one load point: run with the host read around it, judged, re-measured once when contended
    bounds.py        a load point's "p99 within the bound" decisions as row fields, at the run's confidence
    sweep.py         a sweep cell: its load points until the sweep's stop rule
    overload.py      the overload phase: each wire's capacity, a burst on the fastest wire
    tune.py          the configuration search over a server's knobs, one server life per configuration
    served_check.py  the served-output check before any load
    capabilities.py  the capability probes of a live server: what each stack declares, checked, and its findings
    lifecycle.py     how a server life lives: time to its first correct answer, idle and peak memory, its growth over
                     the load points, processes and threads, what it runs from
    engine_speed.py  the engine's own speed in process, the ceiling a stack is read against
    hoststate.py     the host's state over each load point: other work's CPU, steal, the server's CPU share and wait
    window_reader.py what a load point reads from its live server over the measured window: count, timings, CPU
    hostcheck.py     is this host fit to measure on: the pre-flight findings and a run's hard limits (doctor)
    neighbour_probe.py  how much of the host's CPU other work used while we measured (benchmarks/host_noise.py's)
    inputs.py        the inputs of a cell (model, runtime, server, serving options, load generator), fingerprinted
    duet.py          two servers measured at once on the same cores: pairs of simultaneous load points
    interleaved.py   a change's size alone: each side by itself, in a random order each round
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"measure_session": "session", "check_served_outputs": "served_check", "engine_speed": "engine_speed",
           "NeighbourProbe": "neighbour_probe", "HostStateProbe": "hoststate", "check_host": "hostcheck",
           "cell_inputs": "inputs", "input_changes": "inputs", "measure_duet": "duet",
           "probe_capabilities": "capabilities"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
