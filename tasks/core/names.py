"""Names that become folder names and S3 key parts: made safe, or refused, in one place.

Run ids come from Airflow (`manual__2026-11-30T02:00:00+00:00`) or a user (`tasks.cli run --run-id`) and
are made safe: characters outside [A-Za-z0-9._-] become "_", and a name that could climb out of its folder
("..", a leading ".") or was cut to MAX_LEN gets a short hash of the original, so two different ids never
meet in one folder. Model names (spec files) are refused instead when unsafe: they are chosen by the user,
who can fix them.
"""

from __future__ import annotations

import hashlib
import re

MAX_LEN = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MODEL_NAME_RULE = ("must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (it names folders "
                   "and S3 keys)")


def safe_component(text: str) -> str:
    """`text` as one safe path or key component (never "", "." or "..", never starting with ".")."""
    safe = _UNSAFE.sub("_", str(text))
    risky = ".." in safe or safe.startswith(".") or len(safe) > MAX_LEN or not safe
    if risky:
        digest = hashlib.sha256(str(text).encode()).hexdigest()[:10]
        safe = f"{safe.replace('..', '__').lstrip('.')[:MAX_LEN]}-{digest}".lstrip("-")
    return safe


def is_safe_model_name(name: str) -> bool:
    return bool(MODEL_NAME.match(name)) and ".." not in name
