"""Reading published runs back: through their manifests only, so a half-written run is never seen.

    from tasks.store.history import read_runs
    frame = read_runs(store)            # every published run's results, with a `dt` column (hive partition)
    frame = read_runs(store, before="2026-03-01T02:00:00+00:00")   # only runs strictly before that logical date

Both folder layouts are read (tasks/store/layout.py: `run=` since schema 1.4, `run_id=` before, through the 1.x
contract); a run found in both, as an interrupted move leaves it, is read from the new one. Results come back with
the contract's columns and types, whatever the run's schema version (`tasks.core.results.conform`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from tasks.core.errors import ConfigError
from tasks.core.results import conform, read_parquet_bytes
from tasks.core.verdicts import is_regression
from tasks.store.layout import RUNS, Folder, parse_folder, safe_run_id
from tasks.store.publish import MANIFEST
from tasks.store.s3 import S3Store

READABLE_STATUSES = ("complete", "partial")


def parse_logical_date(value: str) -> datetime:
    """An ISO date or date-time; one without a zone is UTC (what the CLI and Airflow write)."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def run_manifests(store: S3Store) -> list[tuple[Folder, dict]]:
    """(folder, manifest) of every run folder under the store's `runs/` that has a manifest, in either layout and
    with any status; a run in both layouts appears twice (`list_manifests` keeps the new one)."""
    found = []
    for key in store.list_keys(store.key(RUNS) + "/"):
        folder = parse_folder(key.removesuffix("/" + MANIFEST)) if key.endswith("/" + MANIFEST) else None
        if folder is not None:
            found.append((folder, store.get_json(key)))
    return found


def list_manifests(store: S3Store, statuses: tuple[str, ...] = READABLE_STATUSES, before: str | None = None
                   ) -> list[dict]:
    """Every run's manifest under the store's `runs/` prefix, oldest first; with `before`, only the runs whose
    logical date is strictly earlier (the history of a run, backfills included, never holds later nights). A run
    whose folder is in both layouts is the new layout's."""
    cut = parse_logical_date(before) if before else None
    runs: dict[tuple[str, str], tuple[Folder, dict]] = {}
    for folder, manifest in run_manifests(store):
        seen = runs.get((folder.dt, folder.safe_id))
        if seen is None or seen[0].old_layout:
            runs[(folder.dt, folder.safe_id)] = (folder, manifest)
    manifests = []
    for _, manifest in runs.values():
        if manifest.get("status") not in statuses:
            continue
        if cut is not None and parse_logical_date(manifest["logical_date"]) >= cut:
            continue
        manifests.append(manifest)
    return sorted(manifests, key=lambda m: (parse_logical_date(m["logical_date"]), m["run_id"]))


def read_results(store: S3Store, manifest: dict):
    """A run's results with the contract's columns and types (those its schema lacks empty) and its `dt`."""
    frame = read_parquet_bytes(store.get(f"{manifest['prefix']}/results.parquet"))
    frame.insert(0, "dt", manifest["logical_date"][:10])
    return frame


def read_runs(store: S3Store, statuses: tuple[str, ...] = READABLE_STATUSES, exclude_run_id: str | None = None,
              before: str | None = None, manifests: list[dict] | None = None):
    """All published runs' results as one DataFrame (hive partition `dt` added), oldest run first; `before`:
    only runs with an earlier logical date; `manifests`: exactly these runs."""
    import pandas as pd

    if manifests is None:
        manifests = list_manifests(store, statuses, before)
    frames = [read_results(store, m) for m in manifests if m["run_id"] != exclude_run_id]
    if not frames:
        frame = conform(pd.DataFrame())
        frame.insert(0, "dt", pd.Series(dtype=object))
        return frame
    return pd.concat(frames, ignore_index=True)


def read_parity_history(store: S3Store, exclude_run_id: str | None = None, before: str | None = None,
                        manifests: list[dict] | None = None) -> list[dict]:
    """Parity records of every published run (or of `manifests`), each with its run's logical date and host
    fingerprint."""
    records = []
    for manifest in list_manifests(store, before=before) if manifests is None else manifests:
        if manifest["run_id"] == exclude_run_id or not any(o["name"] == "parity.json" for o in manifest["objects"]):
            continue
        host = manifest.get("provenance", {}).get("host", {})
        for rec in store.get_json(f"{manifest['prefix']}/parity.json"):
            records.append({**rec, "logical_date": manifest["logical_date"], "run_id": manifest["run_id"],
                            "cpu_model": host.get("cpu_model"), "cpu_count": host.get("cpu_count"),
                            "gpu_name": host.get("gpu_name")})
    return records


def find_run(store: S3Store, ref: str) -> dict:
    """The manifest of a published run (any status): by run id, `latest`, or its folder, in either layout
    (`dt=<date>/run=<id>`, or the old `dt=<date>/run_id=<id>`: an old reference still finds a moved run)."""
    if ref == "latest":
        if not store.exists(store.key("latest.json")):
            raise ConfigError("run", ref, f"no run is published in {store.describe()}")
        return store.get_json(store.get_json(store.key("latest.json"))["manifest"])
    folder = parse_folder(ref)
    found = [m for m in list_manifests(store, statuses=("complete", "partial", "failed"))
             if ref in (m["run_id"], m["prefix"]) or folder is not None
             and (folder.dt, folder.safe_id) == (m["logical_date"][:10], safe_run_id(m["run_id"]))]
    if not found:
        raise ConfigError("run", ref, f"no published run with this id or folder in {store.describe()} "
                                      "(`python -m tasks.cli runs` lists them)")
    return found[-1]


def run_summary(store: S3Store, manifest: dict) -> dict:
    """One line about a published run: date, id, status, suite and regression count (from its small objects)."""
    names = {o["name"]: o["key"] for o in manifest["objects"]}
    provenance = manifest.get("provenance") or {}
    suite = provenance.get("suite") or (provenance.get("config") or {}).get("suite")
    if not suite and "trend.json" in names:
        suite = store.get_json(names["trend.json"]).get("comparable_on", {}).get("suite")
    regressions = None
    if "regressions.json" in names:
        records = store.get_json(names["regressions.json"]).get("records", [])
        regressions = sum(is_regression(r.get("verdict")) for r in records)
    return {"dt": manifest["logical_date"][:10], "run_id": manifest["run_id"], "logical_date": manifest["logical_date"],
            "status": manifest["status"], "suite": suite, "regressions": regressions,
            "git_sha": provenance.get("git_sha"), "prefix": manifest["prefix"]}


def run_summaries(store: S3Store, limit: int | None = None) -> list[dict]:
    """Every published run (complete, partial or failed; the newest `limit`), oldest first, as `run_summary`s."""
    manifests = list_manifests(store, statuses=("complete", "partial", "failed"))
    return [run_summary(store, m) for m in (manifests[-limit:] if limit else manifests)]


def s3_filesystem(store: S3Store):
    """An s3fs (fsspec) filesystem with the store's connection (credentials, endpoint): what DuckDB, pyarrow.dataset
    and pandas read the store's files through. A fresh one that keeps no listings, so it sees the store as it is
    now (fsspec would otherwise hand back a cached instance with the folders it listed before)."""
    import s3fs

    conn = store.conn
    extra = conn.extra
    return s3fs.S3FileSystem(key=conn.login or extra.get("aws_access_key_id"),
                             secret=conn.password or extra.get("aws_secret_access_key"),
                             token=extra.get("aws_session_token"), endpoint_url=store.endpoint_url,
                             client_kwargs={"region_name": extra.get("region_name", "us-east-1")},
                             skip_instance_cache=True, use_listings_cache=False)


def duckdb_connection(store: S3Store):
    """A DuckDB connection that reads `s3://` paths of this store through s3fs (`s3_filesystem`): no DuckDB
    extension is downloaded, so it works without internet."""
    import duckdb

    con = duckdb.connect()
    con.register_filesystem(s3_filesystem(store))
    return con


def read_regressions(store: S3Store, manifests: list[dict]) -> dict[str, dict]:
    """run_id -> its regressions.json (runs published without one are left out), in the manifests' order."""
    found = {}
    for manifest in manifests:
        if any(o["name"] == "regressions.json" for o in manifest["objects"]):
            found[manifest["run_id"]] = store.get_json(f"{manifest['prefix']}/regressions.json")
    return found
