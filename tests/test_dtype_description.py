"""One tensor, one description: a MindSpore npy whose file name and npy header disagree on the dtype."""

from __future__ import annotations

import json

import numpy as np

from dumpscope.tui.cli.entry import main

VALUES = np.array([1.1, -2.3, 3.7, 70000.5], np.float32)  # not all of them bfloat16 / float16 values


def _tree(root):
    folder = root / "rank_0" / "Net" / "0" / "0"
    folder.mkdir(parents=True)
    np.save(folder / "Cast.Default_Cast-op0.0.0.1700000000000001.output.0.DefaultFormat.BFloat16.npy", VALUES)
    np.save(folder / "Add.Default_Add-op0.0.0.1700000000000002.output.0.DefaultFormat.Float16.npy", VALUES)
    return root


def _json(capsys, *args):
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_command_describes_and_decodes_the_tensor_the_same_way(tmp_path, capsys):
    golden, target = _tree(tmp_path / "g"), _tree(tmp_path / "t")
    ops = {o["name"]: o["tensors"][0] for o in _json(capsys, "ops", str(golden))["ops"]}
    assert {n: (t["dtype"], t["stored_dtype"]) for n, t in ops.items()} == {
        "Default_Cast-op0": ("bfloat16", "float32"), "Default_Add-op0": ("float16", "float32")}
    out = tmp_path / "out"
    assert main(["convert", str(golden), str(out)]) == 0
    capsys.readouterr()
    converted = {p.name.split(".")[1]: np.load(p) for p in out.rglob("*.npy")}
    rows = {r["name"]: r for r in _json(capsys, "compare", str(golden), str(target))["rows"]}
    for name, want in (("Default_Cast-op0", "bfloat16"), ("Default_Add-op0", "float16")):
        st = _json(capsys, "stats", str(golden), name)
        assert st["dtype"] == want and st["read_as"] == "float32"
        assert st["max"] == float(VALUES.max()) and st["count"] == 4  # the header's float32 values
        assert np.array_equal(converted[name], VALUES) and converted[name].dtype == np.float32
        assert rows[name]["golden"]["dtype"] == want and rows[name]["golden"]["max"] == float(VALUES.max())
        show = _json(capsys, "show", str(golden), name)["op"]
        assert show["dtype_notes"] == [f"output.0: file name says {want}, payload header float32: values read as "
                                       f"float32 (a float32 holds every {want} value)"]
