"""`images`: the serving runtimes' container images built (or reused), stale ones pruned, the deployment's written.

    python -m tasks.cli images build [RUNTIME ...]   # default: every serving runtime (make images)
    python -m tasks.cli images prune                 # remove project images of older inputs
    python -m tasks.cli images compose-env           # the deployment's images; docker/compose.env (make compose-env)
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path

from tasks.core.paths import DOCKER_DIR, cache_root
from tasks.regress.night_duets import REFERENCES_FILE
from tasks.runtimes.images import (
    BUILDER,
    DEPLOYMENT_IMAGES,
    SERVING_RUNTIMES,
    base_tag,
    compose_env,
    docker_client,
    ensure_image,
    image_tag,
    remove_stale,
)


def cmd_build(args: argparse.Namespace) -> int:
    client = docker_client()
    started = time.monotonic()
    for runtime in args.runtimes:
        image = ensure_image(runtime, client)
        how = f"built in {image.build_s:.0f} s" if image.built_now else "reused, nothing built"
        size_mb = client.images.get(image.ref).attrs.get("Size", 0) / 2**20
        print(f"image {runtime}: {image.ref} ({image.image_id[:19]}, {size_mb:.0f} MB): {how}")
    print(f"images ready in {time.monotonic() - started:.0f} s")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    client = docker_client()
    keep = {image_tag(r, client, log=lambda _: None)[0] for r in (BUILDER, *SERVING_RUNTIMES, *DEPLOYMENT_IMAGES)}
    references = cache_root() / REFERENCES_FILE  # what the last regression check's references run on
    live = json.loads(references.read_text()).get("images", []) if references.is_file() else []
    remove_stale(client, keep | {base_tag()}, keep_ids=set(live))
    return 0


def cmd_compose_env(args: argparse.Namespace) -> int:
    out = Path(args.out)
    kept = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line) if out.is_file() else {}
    images = compose_env(log=lambda line: print(line, file=sys.stderr))
    variables = {"AIRFLOW_JWT_SECRET": secrets.token_hex(32), **kept, **images}  # a secret once, then kept
    out.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
    out.chmod(0o600)
    print(f"wrote {out}: " + ", ".join(f"{k}={v}" for k, v in images.items()) + " (and AIRFLOW_JWT_SECRET)")
    return 0


def add_commands(sub) -> None:
    images = sub.add_parser("images", help="build (or reuse) container images; prune old ones; the deployment's")
    inner = images.add_subparsers(dest="images_command", required=True)
    build = inner.add_parser("build", help="build (or reuse) the runtimes' images")
    build.add_argument("runtimes", nargs="*", default=list(SERVING_RUNTIMES))
    build.set_defaults(func=cmd_build)
    inner.add_parser("prune", help="remove project images of older inputs").set_defaults(func=cmd_prune)
    env = inner.add_parser("compose-env", help="build (or reuse) the deployment's images and write the variables of "
                                               "docker/compose.yaml naming them")
    env.add_argument("--out", default=str(DOCKER_DIR / "compose.env"), help="the env file (default docker/compose.env)")
    env.set_defaults(func=cmd_compose_env)
