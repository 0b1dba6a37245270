"""``walk.scan_tree`` yields folders in one fixed order, breadth first, siblings by number: the lowest rank and
step folders first, whatever order their listings finish in (a cold build then reads them first)."""

from __future__ import annotations

import random
import time

from dumpscope.core.layouts import walk


def _tree(root):
    for rank in (10, 2, 0):
        for step in (11, 3, 0, 1, 20):
            (root / f"rank_{rank}" / "Net" / "0" / str(step)).mkdir(parents=True)
    (root / "rank_0" / "Net" / "0" / "0" / "x.npy").write_bytes(b"")
    return root


def test_natural_key_orders_digit_runs_by_value():
    names = ["step10", "step2", "rank_10", "rank_9", "a", "10", "9", "step2b", "step02"]
    assert sorted(names, key=walk.natural_key) == ["9", "10", "a", "rank_9", "rank_10", "step02", "step2",
                                                   "step2b", "step10"]


def test_order_is_fixed_whatever_the_listing_times(tmp_path):
    root = _tree(tmp_path / "job")
    orders = []
    real = walk.list_folder
    for seed in range(3):
        rng = random.Random(seed)

        def slow_scan(path, parts, known=None, real_root=None, _rng=rng):
            time.sleep(_rng.random() * 0.02)  # listings finish in a different order each run
            return real(path, parts, known, real_root)

        orders.append([s.dirpath for s in walk.scan_tree(str(root), workers=8, lister=slow_scan)])
    assert orders[0] == orders[1] == orders[2]
    rel = [p[len(str(root)):] for p in orders[0]]
    assert rel[:4] == ["", "/rank_0", "/rank_2", "/rank_10"]  # breadth first, ranks by number
    steps = [p for p in rel if p.count("/") == 4]
    assert steps[:5] == [f"/rank_0/Net/0/{s}" for s in (0, 1, 3, 11, 20)]  # rank 0's steps first, by number
    assert len(rel) == len(set(rel)) == 1 + 3 * (3 + 5)  # every folder once
