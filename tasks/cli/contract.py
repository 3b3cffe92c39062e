"""The results contract's data dictionary: docs/results-reference.md, generated from `tasks/core/results.py`.

    python -m tasks.cli reference            # (re)write docs/results-reference.md from the contract
    python -m tasks.cli reference --check    # exit 1 when the page and the contract disagree (tests do the same)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tasks.core.paths import REPO_ROOT
from tasks.core.results import REFERENCE_PAGE, reference_markdown


def cmd_reference(args: argparse.Namespace) -> int:
    """Write the data dictionary from the contract, or (--check) say whether the page on disk is up to date."""
    out = Path(args.out) if args.out else REPO_ROOT / REFERENCE_PAGE
    page = reference_markdown()
    if args.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == page
        print(f"{out}: {'up to date with' if same else 'differs from'} the results contract")
        return 0 if same else 1
    out.write_text(page, encoding="utf-8")
    print(f"wrote {out} ({len(page.splitlines())} lines) from the results contract (tasks/core/results.py)")
    return 0


def add_commands(sub) -> None:
    """The subcommand that writes the results reference page."""
    reference = sub.add_parser("reference", help=f"write {REFERENCE_PAGE} (the results' data dictionary) from the "
                                                 "contract in tasks/core/results.py")
    reference.add_argument("--out", help=f"where to write it (default {REFERENCE_PAGE} in the repository)")
    reference.add_argument("--check", action="store_true", help="exit 1 when the page differs from the contract")
    reference.set_defaults(func=cmd_reference)
