"""Serving: servers (what to run and how to talk to it) and launchers (where and how it runs).

    base.py      the server interface (`Server`, `RunSpec`, `Endpoint`, `Wire`): one implementation per stack in
                 servers/, each with the wires it speaks and where it reports its requests' time
    prometheus.py  reading the sums a server's Prometheus text serves (its request timings and counters)
    options.py   `ServingOptions`: how a server should serve, the same meaning for every stack
    knobs.py     what a configuration search may change on a server, declared by each server class
    capabilities.py  what a stack can do (batching, versions, metrics, gRPC, ...), declared by each server class,
                 with the probe of the live server that shows it
    lines.py     the lines of config and code the project writes to serve a model on a stack, from its layout
    budget.py    the CPU and memory budget of a server, the same for every stack
    session.py   a server session: lay out, start, wait until ready, hand over, always stop
    hostlock.py  one server session at a time per host
    images.py    the images the servers run from under launcher=docker, built before a run's first session
    servers/     one file per stack: triton, torchserve, tfserving, bentoml, kserve, custom
    launchers/   where a server runs: process (a runtime venv) or docker (its image)
"""

from tasks.core.faces import lazy_exports

EXPORTS = {
    "Server": "base", "RunSpec": "base", "Endpoint": "base", "Wire": "base", "ServingOptions": "options",
    "Knob": "knobs", "plan_budget": "budget", "server_session": "session", "SessionSettings": "session",
    "LiveServer": "session", "host_lock": "hostlock", "Capability": "capabilities", "Probe": "capabilities",
    "CAPABILITIES": "capabilities", "count_serving_lines": "lines", "LineCount": "lines",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
