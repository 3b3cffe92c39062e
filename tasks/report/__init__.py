"""What a person reads: the run's HTML report, its plots and recommendation, the trend, the runs index, the digest,
the night's message and each stack's record over the nights.

    page.py            report.html: one self-contained page, rendered from the run's published files
    progress_lines.py  what each pipeline step's progress line says when it ends (its key figure)
    lead.py            what the night found, first: the report's first paragraph and the commands' first lines
    templating.py      the Jinja2 environment: templates/*.html (markup and prose), autoescaped
    templates/         the report's templates and stylesheets
    formatting.py      how a value is written: escaped, a figure, a metric's label and unit, a load point
    contention.py      the header's words on the host, and a row's host state
    recommendation.py  the recommendation section (the answers of recommend.py)
    models.py          a model's section: plots, costs within each bound, its table of rows
    traces.py          under a trace: every stack's replays, the largest speed its bound holds at, the ranking
    overload.py        overload and recovery: every burst, and how each stack behaved at the highest
    changes.py         changes since the previous comparable run, the trend, regressions side by side
    checks.py          planned cells, contended/failed/skipped cells, output checks, validation
    provenance.py      where the figures come from: run, host, each stack's server and image, configuration
    plots.py           inline SVG plots drawn by our own code
    recommend.py       per model, the best stack under a p99 bound, and each stack's efficiency
    configs.py         the report's sections on serving configurations and engines
    wires.py           each stack's best wire (the headline's), the JSON tax and where a request's time goes
    lifecycle.py       how each stack lives: start-up, first correct answer, idle and peak memory, processes, size
    features.py        features and ease of use: capabilities declared and probed, lines of config and code
    trend.py           trend.json: what changed since the previous comparable run, the best figures over the nights
    run_index.py       the published runs as the reports page in the Airflow UI lists them
    digest.py          a short digest of one run (the serving_eval_digest DAG)
    record.py          each stack's record over the nights (record.json): the share of its planned cells ok
    coverage.py        a budgeted night: the budget's use, each cell's coverage, deferred cells' carried figures
    findings.py        a night's findings for its message: regressions, failed, contended, missing cells, validation
    message.py         the message a night (or the watchdog) sends: subject, text, HTML
    notify.py          sending it through the notifiers, and the run's notifications.json
    late_night.py      a night past its deadline: the deadline alert's message, to the run's own notifiers
    watchdog.py        is latest.json older than the schedule allows (a night that never published)
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"render_report": "page", "rebuild_report": "page", "PublishedRun": "page", "recommend": "recommend",
           "build_trend": "trend", "list_runs": "run_index", "write_digest": "digest"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
