"""Where heavy things run and how they are held: runtime venvs, container images, the Docker engine, process
trees, ports and stop requests.

    venvs.py          one venv per docker/<runtime>/requirements.txt, cached by its hash (the process launcher)
    images.py         the project's Debian base, the builder, one image per runtime, tagged by their inputs; official
                      images
    build_context.py  what goes into an image's build (files, host wheels, the CA option) and the hash that tags it
    docker_engine.py  the local Docker engine: one that answers, or dockerd started and stopped by its PID
    proctree.py       ending a whole process tree we started, by PID
    ports.py          free loopback ports
    interrupts.py     Ctrl-C and SIGTERM as a stop request that cannot be lost
"""

from tasks.core.faces import lazy_exports

EXPORTS = {
    "RuntimeEnv": "venvs", "ensure_runtime": "venvs", "runtime_env_vars": "venvs", "ImageRef": "images",
    "ensure_image": "images", "official_image": "images", "docker_client": "docker_engine",
    "engine_for_a_while": "docker_engine", "terminate_tree": "proctree", "free_port": "ports", "free_ports": "ports",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
