"""The images the servers run from under launcher=docker, built or reused before a run's first session.

The image machinery (base, build contexts, tags, official images) is `tasks/runtimes/images.py`; this file knows
which servers need which image.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tasks.core.errors import ServerStartError
from tasks.runtimes.docker_engine import engine_for_a_while
from tasks.runtimes.images import ensure_image, is_project_image, official_unavailable_reason, project_image
from tasks.serve.options import ServingOptions
from tasks.serve.servers import get_server


def prebuild(servers: list[str], image_source: str = "project", log=print) -> None:
    """Build (or reuse) the images the servers run from under launcher=docker, and say which it was; an official
    image is looked for (and pulled where a registry serves it)."""
    for name in servers:
        server = get_server(name, ServingOptions(images=image_source))
        ref = getattr(server, "image", None) or project_image(server.runtime)
        try:
            if is_project_image(ref):
                image = ensure_image(server.runtime, log=lambda line: log(f"  {line}"))
                how = f"built in {image.build_s:.0f} s" if image.built_now else "reused, nothing built"
                log(f"image {server.runtime}: {image.ref}: {how}")
            else:
                reason = official_unavailable_reason(ref)
                log(f"image {server.runtime}: {ref}: " + (f"unavailable, its cells skip: {reason}" if reason
                                                         else "official image on the engine"))
        except ServerStartError as exc:  # no engine: the run's cells say so too
            log(f"image {server.runtime}: not ready: {exc}")
            return


@contextmanager
def containers_for(conf: dict, log=print) -> Iterator[None]:
    """For a run of `conf` (Params) with launcher=docker: an engine for the block (started and stopped here when
    none answers) and its images built or reused up front; nothing for other launchers."""
    if conf.get("launcher") != "docker":
        yield
        return
    with engine_for_a_while(log=log):
        prebuild(list(conf.get("servers") or ()), conf.get("images") or "project", log=log)
        yield
