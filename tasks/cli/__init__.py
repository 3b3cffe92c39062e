"""The command line, `python -m tasks.cli`: one file per group of commands (main.py dispatches).

    main.py     the parser, exit codes, Ctrl-C and SIGTERM
    runs.py     run, plan, publish
    local.py    demo, airflow
    store.py    runs, report, compare, hosts, exclude, exclusions, include, accept, acceptances, watchdog, migrate
    contract.py reference (docs/results-reference.md from the results contract)
    doctor.py   doctor (is this host fit to measure on: the pre-flight check)
    images.py   images build|prune|compose-env
    engine.py   engine start|stop|status|run
    deploy.py   deploy init|bucket
    traces.py   trace shape|from-log|show (a trace from a load shape or an access log)
    prepare.py  the runtimes a local run needs, built before it starts
    output.py   the summary table, plain tables, exit codes
    progress_view.py  the progress lines of `airflow dags test`'s log, echoed as they come (a bar on a terminal)
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"main": "main"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
