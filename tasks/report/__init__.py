"""What a person reads: the run's HTML report, its plots and recommendation, the trend, the runs index, the digest.

    page.py       report.html: one self-contained page, rendered from the run's published files
    plots.py      inline SVG plots drawn by our own code
    recommend.py  per model, the best stack under a p99 bound, and each stack's efficiency
    configs.py    the report's sections on serving configurations and engines
    wires.py      each stack's best wire (the headline's), the JSON tax and where a request's time goes
    lifecycle.py  how each stack lives: start-up, first correct answer, idle and peak memory, processes, size
    features.py   features and ease of use: capabilities declared and probed, lines of config and code
    trend.py      trend.json: what changed since the previous comparable run, the best figures over the nights
    run_index.py  the published runs as the reports page in the Airflow UI lists them
    digest.py     a short digest of one run (the serving_eval_digest DAG)
"""

from tasks.core.faces import lazy_exports

EXPORTS = {"render_report": "page", "rebuild_report": "page", "PublishedRun": "page", "recommend": "recommend",
           "build_trend": "trend", "list_runs": "run_index", "write_digest": "digest"}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
