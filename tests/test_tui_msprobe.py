"""Explorer hooks for msprobe dumps (issue 16, Build 4) on the real msprobe 26.2 dumps: parameter gradients
under their module's backward call, argument names and values in the detail, both names of a
cross-framework compare row."""

from __future__ import annotations

import pytest

from conftest import unpack_data
from test_tui_support import screen_text, search_and_open, set_env, wait_ready

from dumpscope.tui.app import DumpscopeApp
from dumpscope.tui.compare_rows import both_names

SIZE = (120, 40)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return unpack_data(tmp_path_factory, "real_msprobe26")


async def test_detail_names_arguments_values_and_parameter_gradients(dumps, tmp_path, monkeypatch):
    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(dumps / "mix_tensor"), display_name="dump")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await search_and_open(pilot, "Module.norm.LayerNorm.backward.0")
        assert app.main.current.name == "Module.norm.LayerNorm.backward.0"
        text = screen_text(app)
        assert "out.1 weight float32 [6]" in text and "out.2 bias float32 [6]" in text
        assert text.count("param grad") == 2
        await search_and_open(pilot, "Functional.gelu.0.forward")
        assert app.main.current.name == "Functional.gelu.0.forward"
        text = screen_text(app)
        assert 'in.1  approximate = "tanh"  (str)' in text


def test_compare_rows_show_both_names():
    assert both_names({"name": "Torch.cos.0.forward", "target_name": "Mint.cos.0.forward"}) == \
        "Torch.cos.0.forward ↔ Mint.cos.0.forward"
    assert both_names({"name": "a", "target_name": "a"}) == "a"
    assert both_names({"name": "a"}) == "a"
