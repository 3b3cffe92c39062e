"""Reading published runs back: through their manifests only, so a half-written run is never seen.

    from tasks.history import read_runs
    frame = read_runs(store)            # every published run's results, with a `dt` column (hive partition)
"""

from __future__ import annotations

import io

from tasks.publish import MANIFEST
from tasks.store import S3Store

READABLE_STATUSES = ("complete", "partial")


def list_manifests(store: S3Store, statuses: tuple[str, ...] = READABLE_STATUSES) -> list[dict]:
    """Every run's manifest under the store's `runs/` prefix, oldest first."""
    manifests = []
    for key in store.list_keys(store.key("runs") + "/"):
        if key.endswith("/" + MANIFEST):
            manifest = store.get_json(key)
            if manifest.get("status") in statuses:
                manifests.append(manifest)
    return sorted(manifests, key=lambda m: (m["logical_date"], m["run_id"]))


def read_results(store: S3Store, manifest: dict):
    import pandas as pd

    frame = pd.read_parquet(io.BytesIO(store.get(f"{manifest['prefix']}/results.parquet")))
    frame.insert(0, "dt", manifest["logical_date"][:10])
    return frame


def read_runs(store: S3Store, statuses: tuple[str, ...] = READABLE_STATUSES, exclude_run_id: str | None = None):
    """All published runs' results as one DataFrame (hive partition `dt` added), oldest run first."""
    import pandas as pd

    frames = [read_results(store, m) for m in list_manifests(store, statuses) if m["run_id"] != exclude_run_id]
    if not frames:
        from tasks.results import COLUMNS

        return pd.DataFrame(columns=["dt", *COLUMNS])
    return pd.concat(frames, ignore_index=True)


def read_parity_history(store: S3Store, exclude_run_id: str | None = None) -> list[dict]:
    """Parity records of every published run, each with its run's logical date and host fingerprint."""
    records = []
    for manifest in list_manifests(store):
        if manifest["run_id"] == exclude_run_id or not any(o["name"] == "parity.json" for o in manifest["objects"]):
            continue
        host = manifest.get("provenance", {}).get("host", {})
        for rec in store.get_json(f"{manifest['prefix']}/parity.json"):
            records.append({**rec, "logical_date": manifest["logical_date"], "run_id": manifest["run_id"],
                            "cpu_model": host.get("cpu_model"), "cpu_count": host.get("cpu_count"),
                            "gpu_name": host.get("gpu_name")})
    return records
