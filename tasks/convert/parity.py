"""What the converter entry scripts share, inside their runtimes (needs numpy only, never the orchestrator's deps).

The first hop of a path computes the *reference*: the source model's outputs on the spec's seeded inputs at
each parity batch size, saved as `reference.npz` beside the artifact. Every later hop carries that file on,
so each artifact is compared with the source itself, not with the previous hop.

Exit protocol of an entry script: 0 with `conversion.json` in `--out`; 2 with `{"status": "rejected", field,
value, rule}` in `--status` (bad input: the orchestrator raises ConfigError); 3 with `{"status": "skipped",
reason}` (this host cannot run the converter); 1 for anything else (stderr is the reason).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from tasks.core.spec import ModelSpec, make_inputs

REFERENCE_FILE = "reference.npz"
EXIT_REJECTED = 2
EXIT_SKIPPED = 3


class InputRejected(Exception):
    """The source given to a converter is bad: names the spec field, the value and the rule."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        self.field, self.value, self.rule = field, value, rule
        super().__init__(f"{field}={value!r}: {rule}")


class Skipped(Exception):
    """This host cannot run the converter (e.g. no GPU); the reason becomes the cells' skip reason."""


def parse_args(argv: list[str] | None, doc: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--hop", required=True, help="SOURCE->TARGET, e.g. torch->onnx")
    parser.add_argument("--source", default="", help="the bring-your-own source file or folder (first hop)")
    parser.add_argument("--upstream", default="", help="the previous hop's artifact folder (later hops)")
    parser.add_argument("--options", default="{}", help="conversion options as JSON")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--status", required=True, type=Path)
    args = parser.parse_args(argv)
    args.spec_obj = ModelSpec.from_dict(json.loads(args.spec.read_text()))
    args.source_fmt, args.target_fmt = args.hop.split("->")
    args.options_obj = json.loads(args.options)
    return args


def run_main(main: Callable[[list[str] | None], int], status_arg: str = "--status") -> None:
    """Run an entry's main with the exit protocol above; never returns."""
    argv = sys.argv[1:]
    status = Path(argv[argv.index(status_arg) + 1]) if status_arg in argv else None
    try:
        sys.exit(main(argv))
    except InputRejected as exc:
        if status:
            status.write_text(json.dumps({"status": "rejected", "field": exc.field, "value": str(exc.value),
                                          "rule": exc.rule}))
        print(exc, file=sys.stderr)
        sys.exit(EXIT_REJECTED)
    except Skipped as exc:
        if status:
            status.write_text(json.dumps({"status": "skipped", "reason": str(exc)}))
        print(exc, file=sys.stderr)
        sys.exit(EXIT_SKIPPED)
    except Exception:  # noqa: BLE001 - the traceback is the reason the orchestrator reports
        traceback.print_exc()
        sys.exit(1)


def parity_inputs(spec: ModelSpec) -> dict[int, dict]:
    """batch size -> the seeded inputs that parity uses at that batch size."""
    return {bs: make_inputs(spec, bs) for bs in spec.parity_batch_sizes}


def save_reference(out: Path, spec: ModelSpec, outputs: dict[int, list], description: str) -> None:
    import numpy as np

    arrays = {}
    for bs, outs in outputs.items():
        if len(outs) != len(spec.outputs):
            raise InputRejected("outputs", [t.name for t in spec.outputs], f"must list all {len(outs)} model outputs")
        arrays.update({f"b{bs}/{t.name}": np.asarray(o) for t, o in zip(spec.outputs, outs, strict=True)})
    np.savez(out / REFERENCE_FILE, **arrays)
    (out / "reference.json").write_text(json.dumps({"reference": description}))


def carry_reference(upstream: Path, out: Path) -> str:
    """Copy the source's reference outputs on from the previous hop; return their description."""
    shutil.copy2(upstream / REFERENCE_FILE, out / REFERENCE_FILE)
    shutil.copy2(upstream / "reference.json", out / "reference.json")
    return json.loads((out / "reference.json").read_text())["reference"]


def load_reference(out: Path, spec: ModelSpec) -> dict[int, list]:
    import numpy as np

    with np.load(out / REFERENCE_FILE) as data:
        return {bs: [data[f"b{bs}/{t.name}"] for t in spec.outputs] for bs in spec.parity_batch_sizes}


def compare(spec: ModelSpec, batch_size: int, reference: list, actual: list, atol: float, rtol: float) -> dict:
    """One parity measurement: the worst absolute and relative errors, and whether all outputs are close."""
    import numpy as np

    actual = [np.asarray(a) for a in actual]
    shapes_ok = len(actual) == len(reference) and all(
        r.shape == a.shape for r, a in zip(reference, actual, strict=False))
    if not shapes_ok:
        return {"batch_size": batch_size, "max_abs_err": float("inf"), "max_rel_err": float("inf"),
                "max_err_ratio": float("inf"), "shapes_match": False, "allclose": False,
                "shapes": {"reference": [list(r.shape) for r in reference], "actual": [list(a.shape) for a in actual]}}
    pairs = [(r.astype(np.float64), a.astype(np.float64)) for r, a in zip(reference, actual, strict=True)]
    abs_err = max((float(np.max(np.abs(r - a))) if r.size else 0.0) for r, a in pairs)
    rel_err = max((float(np.max(np.abs(r - a) / (np.abs(r) + 1e-12))) if r.size else 0.0) for r, a in pairs)
    # The allclose rule as one number: each element's |a - b| against its own allowance atol + rtol * |b|;
    # <= 1 everywhere is exactly numpy.allclose(a, b, atol, rtol). max_rel_err alone is unreadable next to
    # rtol: an element near zero has a huge relative error yet passes through atol.
    ratio = max((float(np.max(np.abs(r - a) / (atol + rtol * np.abs(r)))) if r.size else 0.0) for r, a in pairs)
    finite = all(bool(np.all(np.isfinite(a))) for _, a in pairs)
    allclose = finite and all(bool(np.allclose(a, r, atol=atol, rtol=rtol)) for r, a in pairs)
    return {"batch_size": batch_size, "max_abs_err": abs_err, "max_rel_err": rel_err,
            "max_err_ratio": ratio if finite else float("inf"), "shapes_match": True, "allclose": allclose}


def measure_parity(spec: ModelSpec, out: Path, run: Callable[[dict], list], atol: float | None = None,
                   rtol: float | None = None) -> list[dict]:
    """Run the artifact (`run(inputs) -> outputs in spec order`) at every parity batch size against the reference."""
    reference = load_reference(out, spec)
    atol = spec.parity_atol if atol is None else atol
    rtol = spec.parity_rtol if rtol is None else rtol
    return [compare(spec, bs, reference[bs], run(inputs), atol, rtol) for bs, inputs in parity_inputs(spec).items()]


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, or of a folder (sorted relative paths with their files' SHA-256)."""
    if path.is_file():
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    lines = [f"{p.relative_to(path).as_posix()} {file_sha256(p)}" for p in sorted(path.rglob("*")) if p.is_file()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def size_bytes(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_record(args: argparse.Namespace, artifact: Path, export: dict, parity: list[dict], started: float,
                 versions: dict, atol: float | None = None, rtol: float | None = None) -> None:
    """Write `conversion.json`: what was made, how, and how close it is to the source."""
    spec = args.spec_obj
    record = {
        "model": spec.name, "format": args.target_fmt, "hop": args.hop, "file": artifact.name,
        "sha256": file_sha256(artifact), "size_bytes": size_bytes(artifact),
        "exporter": export.get("exporter"), "fallback_reason": export.get("fallback_reason"),
        **{k: v for k, v in export.items() if k not in ("exporter", "fallback_reason")},
        "options": args.options_obj,
        "reference": json.loads((args.out / "reference.json").read_text())["reference"],
        "atol": spec.parity_atol if atol is None else atol, "rtol": spec.parity_rtol if rtol is None else rtol,
        "parity": parity, "convert_s": time.monotonic() - started,
        "versions": {**versions, "python": sys.version.split()[0]},
    }
    (args.out / "conversion.json").write_text(json.dumps(record, indent=2))


def upstream_file(upstream: str) -> str:
    """The artifact file name the previous hop recorded in its conversion.json."""
    return json.loads((Path(upstream) / "conversion.json").read_text())["file"]


def hop_source(args: argparse.Namespace) -> str:
    """The hop's input: the user's source file on a first hop, else the previous hop's artifact."""
    return args.source or (str(Path(args.upstream) / upstream_file(args.upstream)) if args.upstream else "")


def establish_reference(args: argparse.Namespace, spec: ModelSpec, run_source: Callable[[dict], list],
                        description: str) -> None:
    """The source's outputs every hop is compared with: computed on a first hop, carried on from the previous."""
    if args.upstream:
        carry_reference(Path(args.upstream), args.out)
    else:
        save_reference(args.out, spec, {bs: run_source(x) for bs, x in parity_inputs(spec).items()}, description)


def first_line(exc: BaseException) -> str:
    """An exception as one short line, for reasons a user reads."""
    return (f"{type(exc).__name__}: {exc}".strip().splitlines() or [type(exc).__name__])[0][:500]
