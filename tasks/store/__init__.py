"""The result store (S3): the bucket and its client, publishing a run folder, reading runs back, an embedded S3.

    s3.py                  `S3Store`: a bucket and prefix through an Airflow AWS connection's fields
    wait.py                a store that does not answer waited for, with backoff, for a bounded time (`store_wait_s`)
    layout.py              where a run's folder is (`runs/dt=<date>/run=<safe id>/`) and reading a folder's name back
    publish.py             a run folder published: objects, `manifest.json` last, `latest.json` after
    history.py             published runs read back through their manifests (never a half-written run)
    runtimes.py            runtime folders kept by their hash, so a regression reference stays runnable, both layouts
    migrate.py             runs of the old layout (`run_id=` folders, before schema 1.4) moved to the new one
    embedded_s3.py         moto's server on a free loopback port for `make demo`, `make airflow` and the tests
    embedded_s3_server.py  that server's process, its buckets kept on disk
"""

from tasks.core.faces import lazy_exports

EXPORTS = {
    "S3Store": "s3", "ConnectionFields": "s3", "connection_from_env": "s3", "publish_run": "publish",
    "run_prefix": "layout", "safe_run_id": "layout", "migrate_layout": "migrate", "list_manifests": "history",
    "read_results": "history", "read_runs": "history", "find_run": "history", "start_embedded_s3": "embedded_s3",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
