"""Slices read only what they need (issue 20): the explorer's tensor pane on a device-layout tensor
reads the slabs its slice covers, and every slice equals numpy's on the whole tensor."""

from __future__ import annotations

import numpy as np
import pytest

from dumpscope.core.tensors import load as tensor_io
from dumpscope.core.tensors import slicing as tensor_slice
from dumpscope.core.query import open_query
from synth.cann_writer import SynthTensor, write_dump

CASES = [("NC1HWC0", (2, 37, 3, 5)), ("NC1HWC0", (1, 40, 4, 4)), ("FRACTAL_NZ", (37, 50)),
         ("FRACTAL_NZ", (3, 20, 33)), ("ND", (6, 7, 8))]
INDEXES = ["", "0", "-1", "1, 5", "0, 5:30:3", "..., -1", "0, :, 1, 2", ":, ::-7", "None, 0", "0, None, 3",
           "-1, 3:4, ..., ::2", "1:, 17"]


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    root = tmp_path_factory.mktemp("slice") / "dump" / "20240101" / "0" / "m" / "1" / "0"
    rng = np.random.default_rng(3)
    for i, (fmt, shape) in enumerate(CASES):
        for dt in ("float16", "bfloat16"):
            a = rng.standard_normal(shape).astype(np.float32)
            write_dump(root, "Op", f"op{i}_{dt}", i, 2, 1718260502000000 + 10 * i + (dt == "bfloat16"),
                       outputs=[SynthTensor(a, dt, fmt)])
    q = open_query(str(root.parents[4]), use_cache=False)
    refs = [t.ref() for o in q.ops() for t in q.tensors(o.id)]
    refs_root[:] = [root.parents[4]]
    return refs


refs_root: list = []


def _parse(text):
    from dumpscope.tui.slicing import parse_index

    return parse_index(text)


@pytest.mark.parametrize("limit", [5, 2048])
def test_every_slice_equals_numpy_on_the_whole_tensor(refs, limit):
    assert {r.format for r in refs} == {"NC1HWC0", "FRACTAL_NZ", "ND"}
    for ref in refs:
        whole = tensor_io.load_tensor(ref)
        for text in INDEXES:
            index = _parse(text)
            try:
                want = whole[index] if index else whole
            except IndexError:
                with pytest.raises(IndexError):
                    tensor_slice.tensor_slice(ref, index, limit)
                continue
            got = tensor_slice.tensor_slice(ref, index, limit)
            assert got.shape == want.shape and got.size == want.size, (ref.format, ref.shape, text)
            assert got.how == ("windows" if ref.format != "ND" else "mapped")
            if want.size > limit:
                np.testing.assert_array_equal(got.values, want.reshape(-1)[:limit])
            else:
                np.testing.assert_array_equal(got.values, want)


def test_a_device_slice_reads_only_its_slabs(refs, monkeypatch):
    """``0, 5`` of an NC1HWC0 tensor reads one C0 slab, not the tensor (the whole-tensor path is
    not taken, and the bytes read are one slab's)."""
    monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: pytest.fail("loaded the whole tensor"))
    monkeypatch.setattr(tensor_slice, "load_tensor", lambda ref: pytest.fail("loaded the whole tensor"))
    from dumpscope.core.formats import device_chunks

    read_sizes = []
    real = device_chunks._reader

    def spy(path, offset, sdt, total):
        fh, read = real(path, offset, sdt, total)

        def counted(start, count, out=None):
            read_sizes.append(count)
            return read(start, count, out)

        return fh, counted

    monkeypatch.setattr(device_chunks, "_reader", spy)
    ref = next(r for r in refs if r.format == "NC1HWC0" and r.shape == (2, 37, 3, 5) and r.dtype == "float16")
    got = tensor_slice.tensor_slice(ref, (1, 5))
    assert got.shape == (3, 5) and sum(read_sizes) == 3 * 5 * 16  # one (H, W, C0) slab
    nz = next(r for r in refs if r.format == "FRACTAL_NZ" and r.shape == (37, 50) and r.dtype == "float16")
    read_sizes.clear()
    got = tensor_slice.tensor_slice(nz, (20,))
    assert got.shape == (50,) and sum(read_sizes) == 4 * 16 * 16  # one row block: W1 fractals of 16x16


def test_pane_uses_the_bounded_slice(refs, monkeypatch):
    from dumpscope.tui.slicing import render_result

    monkeypatch.setattr(tensor_slice, "load_tensor", lambda ref: pytest.fail("loaded the whole tensor"))
    ref = next(r for r in refs if r.format == "NC1HWC0" and r.dtype == "bfloat16")
    text = render_result(tensor_slice.tensor_slice(ref, _parse("0"), 10), 10)
    assert text.startswith(f"shape {[ref.shape[1], ref.shape[2], ref.shape[3]]} float32: first 10 of")


async def test_explorer_slice_of_a_device_tensor_reads_only_its_slabs(refs, tmp_path, monkeypatch):
    """The tensor pane's slice goes through tensor_slice: the whole-tensor loader is never called."""
    from test_tui_support import set_env, settle, wait_ready

    from dumpscope.tui.app import DumpscopeApp

    set_env(monkeypatch, tmp_path)
    app = DumpscopeApp(str(refs_root[0]), display_name="dump")
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_ready(pilot)
        panel = app.main.query_one("#tensor")
        assert panel.current.format == "NC1HWC0" and tuple(panel.current.shape) == (2, 37, 3, 5)
        monkeypatch.setattr(tensor_io, "load_tensor", lambda ref: pytest.fail("loaded the whole tensor"))
        monkeypatch.setattr(tensor_slice, "load_tensor", lambda ref: pytest.fail("loaded the whole tensor"))
        await pilot.press("colon", *"1, 5", "enter")
        await settle(pilot)
        out = str(app.main.query_one("#tp-slice-out").render())
        from dumpscope.tui.slicing import render_result

        assert out.startswith("shape [3, 5] float16")
        assert out == render_result(tensor_slice.tensor_slice(panel.current.ref(), (1, 5)))
