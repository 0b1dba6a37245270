"""The walk lists only a few folders ahead of its consumer: a listing holds every file name of its
folder, and a tree of 200 sibling step folders of 5,000 files each listed at once held a million
names (~120 MB) while the index stored the first ones."""

from __future__ import annotations

from dumpscope.core.layouts import walk


def _siblings(root, n: int = 40, files: int = 3) -> set[str]:
    folders = {str(root)}
    for k in range(n):
        d = root / "model" / f"{k}"
        d.mkdir(parents=True)
        for j in range(files):
            (d / f"f{j}.bin").write_bytes(b"x")
        folders.add(str(d))
    folders.add(str(root / "model"))
    return folders


def test_listings_ahead_of_the_consumer_are_bounded(tmp_path, monkeypatch):
    expected = _siblings(tmp_path)
    monkeypatch.setattr(walk, "LISTINGS_AHEAD_PER_THREAD", 1)
    listed: list[str] = []
    real_scan = walk.list_folder

    def scan(dirpath, parts, known=None, real_root=None):
        listed.append(dirpath)
        return real_scan(dirpath, parts, known, real_root)
    got: list[str] = []
    ahead: list[int] = []
    for scanned in walk.scan_tree(str(tmp_path), workers=2, lister=scan):
        got.append(scanned.dirpath)
        ahead.append(len(listed) - len(got))  # listed, not yet handed over
    assert sorted(got) == sorted(expected)  # every folder, once
    assert len(listed) == len(got)
    assert max(ahead) <= 2  # 1 per thread x 2 threads (40 siblings listed at once before)


def test_a_folder_claimed_after_its_parent_was_listed_is_not_walked(tmp_path, monkeypatch):
    """``skip`` (folders a layout read itself) is checked again when a queued folder's turn comes."""
    _siblings(tmp_path, n=10)
    monkeypatch.setattr(walk, "LISTINGS_AHEAD_PER_THREAD", 1)
    skip: set[str] = set()
    got = []
    for scanned in walk.scan_tree(str(tmp_path), workers=1, skip=skip):
        got.append(scanned.dirpath)
        if scanned.dirpath == str(tmp_path / "model" / "0"):
            skip.add(str(tmp_path / "model" / "9"))
    # one thread, one listing ahead: the siblings are listed in name order, 9 long after 0 was handed over
    assert str(tmp_path / "model" / "9") not in got
    assert len(got) == 1 + 1 + 9
