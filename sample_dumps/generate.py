#!/usr/bin/env python3
"""Regenerate the committed sample dump trees (deterministic: byte-identical on every run).

    python sample_dumps/generate.py              # rewrite sample_dumps/ in place
    python sample_dumps/generate.py --out DIR    # write the trees into DIR instead

Every tree is built by ``synth.trees``; see ``sample_dumps/README.md`` for what
each one demonstrates.  The generator only ever deletes the tree folders it owns (``TREES``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent


def _trees() -> dict[str, Callable[[Path], object]]:
    tests = os.fspath(HERE.parent / "tests")  # the writers of synthetic dumps live with the tests (tests/synth)
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from synth import trees as T

    return {
        "mindspore_lenet_sync": lambda d: T.write_mindspore_tree(d, steps=(0, 1), overflow_steps=(1,)),
        "cann_tf_adapter": lambda d: T.write_cann_tree(d, steps=(0, 1)),
        "torchair_2rank": lambda d: T.write_torchair_tree(d, world_size=2),
        "cann_overflow": lambda d: T.write_cann_overflow_tree(d, steps=(0, 1, 2)),
        "stats_only": lambda d: T.write_cann_stats_tree(d),
        "mindspore_stats": lambda d: T.write_mindspore_stats_tree(d, steps=(0, 1), overflow_steps=(1,)),
        "watch": lambda d: T.write_watch_tree(d),
        "compare_golden": lambda d: T.write_mindspore_tree(d, steps=(0,), eps=1e-5, style="r25"),
        "compare_target": lambda d: T.write_mindspore_tree(d, steps=(0,), eps=1e-1, style="r25"),
        "msprobe": lambda d: T.write_msprobe_tree(d, eps=1e-5),
        "msprobe_target": lambda d: T.write_msprobe_tree(d, eps=1e-1),
        "troubleshooter": lambda d: T.write_troubleshooter_tree(d, eps=1e-5),
        "troubleshooter_target": lambda d: T.write_troubleshooter_tree(d, eps=1e-1),
    }


TREES = tuple(_trees()) if __name__ != "__main__" else ()


def generate(out: Path, only: tuple[str, ...] = ()) -> list[str]:
    """Write every sample tree into ``out`` (replacing those folders); returns the tree names."""
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for name, build in _trees().items():
        if only and name not in only:
            continue
        target = out / name
        if target.exists():
            shutil.rmtree(target)
        build(target)
        done.append(name)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: sample_dumps/ itself)")
    parser.add_argument("--only", nargs="*", default=(), help="regenerate only these trees")
    args = parser.parse_args(argv)
    names = generate(args.out, tuple(args.only))
    total = sum(f.stat().st_size for n in names for f in (args.out / n).rglob("*") if f.is_file())
    print(f"wrote {len(names)} trees to {args.out} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.fspath(HERE.parent))  # not needed when dumpscope is installed, harmless otherwise
    sys.exit(main())
