"""``dumpscope triage`` on real dumps written by the tools (tests/data, each with its script and README): the
origin it names is what numpy (tensor files) or the tool's own statistics (msprobe dump.json) say, the source
line is the user's, the exit status is documented, and per-host documents merge into the whole job's answer."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, unpack_data
from dumpscope.tui.cli.entry import main

KEYS = ("verdict", "origin", "inputs", "outputs", "neighbourhood", "spread", "covered", "redump_config")
ORIGIN_KEYS = ("name", "type", "rank", "step", "io", "slot", "judgement", "source")


def run(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def triage_json(capsys, *args, code: int = 3) -> dict:
    got, out, err = run(capsys, "triage", *args, "--json")
    assert got == code, err
    doc = json.loads(out)
    assert all(k in doc for k in KEYS)
    if doc["origin"]:
        assert all(k in doc["origin"] for k in ORIGIN_KEYS)
    return doc


@pytest.fixture(scope="module")
def ms_nan(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_nan") / "nan"


@pytest.fixture(scope="module")
def dp2(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_ms210_dp2") / "dp2"


@pytest.fixture(scope="module")
def fp16(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe_fp16_dist") / "fp16_dist"


@pytest.fixture(scope="module")
def block(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_mindspore_210_block")


@pytest.fixture(scope="module")
def msp_block(tmp_path_factory) -> Path:
    return unpack_data(tmp_path_factory, "real_msprobe_262_block")


def _file(root: Path, t: dict) -> np.ndarray:
    return np.load(root / t["file"])


def test_mindspore_nan_origin_is_the_log_numpy_says_made_it(capsys, ms_nan, tmp_path):
    doc = triage_json(capsys, str(ms_nan), "--cache-dir", str(tmp_path))
    o = doc["origin"]
    assert doc["verdict"] == "overflow" and o["kind"] == "born"
    assert o["name"].endswith("/Log-op0") and (o["rank"], o["step"], o["io"], o["slot"]) == (0, 0, "output", 0)
    x, y = _file(ms_nan, doc["inputs"][0]), _file(ms_nan, doc["outputs"][0])
    assert np.isfinite(x).all()  # what numpy says: finite inputs, NaN and -inf out
    out = doc["outputs"][0]
    assert (out["nan"], out["neginf"]) == (int(np.isnan(y).sum()), int(np.isneginf(y).sum()))
    assert o["judgement"].startswith(f"inputs finite (max {np.abs(x).max():.4g})")
    assert o["source"][0]["code"] == "return ops.log(self.fc(x))"
    assert doc["spread"]["later_steps"] == [1, 2]  # MindSpore printed loss nan at steps 0, 1, 2 (README)
    assert o["name"] in doc["redump_config"]["config"]["mindspore"]["common_dump_settings"]["kernels"]
    assert doc["redump_config"]["tool"] == "mindspore"
    nb = doc["neighbourhood"]
    assert nb["graph"] and [n["verdict"] for n in nb["levels"]["0"]] == ["bad"]
    assert all(n["verdict"] == "finite" for n in nb["levels"]["-1"])


def test_fp16_overflow_at_a_later_step_born_on_rank_1_received_on_rank_0(capsys, fp16, tmp_path):
    doc = triage_json(capsys, str(fp16), "--cache-dir", str(tmp_path))
    o = doc["origin"]
    recorded = json.loads((fp16 / "step2" / "rank1" / "dump.json").read_text())["data"]["Torch.mul.0.forward"]
    assert (recorded["output"][0]["Max"], recorded["output"][0]["Min"]) == (math.inf, -math.inf)
    assert (o["name"], o["rank"], o["step"], o["kind"]) == ("Torch.mul.0.forward", 1, 2, "born")
    assert "float16 range exceeded" in o["judgement"]
    assert o["judgement"].startswith(f"inputs finite (max {recorded['input_args'][0]['Max']:.4g})")
    assert o["source"][0]["code"] == "y = torch.mul(h, s)"
    assert doc["spread"]["ranks_received"] == [0] and doc["spread"]["ranks_bad"] == [0, 1]
    assert [(p["rank"], p["step"]) for p in doc["covered"]["places"]] == [(r, s) for s in (0, 1, 2) for r in (0, 1)]
    rc = doc["redump_config"]
    assert rc["tool"] == "msprobe" and rc["config"]["msprobe"]["list"] == [o["name"]]
    assert not doc["neighbourhood"]["graph"]  # an API dump: neighbours in time, said so


def test_two_rank_mindspore_job_names_the_rank_that_made_the_nan(capsys, dp2, tmp_path):
    doc = triage_json(capsys, str(dp2), "--cache-dir", str(tmp_path))
    o = doc["origin"]
    assert (o["rank"], o["step"], o["kind"]) == (1, 0, "born") and o["name"].endswith("/Log-op0")
    assert np.isfinite(_file(dp2, doc["inputs"][0])).all() and np.isnan(_file(dp2, doc["outputs"][0])).any()
    rank0 = next(c["origin"] for c in doc["candidates"] if c["origin"]["rank"] == 0)
    assert rank0["kind"] == "received" and "AllReduce" in rank0["name"]
    assert doc["spread"]["ranks_received"] == [0]


def _split(root: Path, dest: Path, parts: dict[str, list[str]]) -> list[Path]:
    """Copy a job's rank folders into one folder per 'host'."""
    out = []
    for host, rels in parts.items():
        for rel in rels:
            shutil.copytree(root / rel, dest / host / rel)
        out.append(dest / host)
    return out


@pytest.mark.parametrize("which", ["dp2", "fp16"])
def test_merge_of_per_host_documents_is_the_whole_job_answer(capsys, dp2, fp16, tmp_path, which):
    root = dp2 if which == "dp2" else fp16
    parts = {"host0": ["rank_0"], "host1": ["rank_1"]} if which == "dp2" else \
        {f"host{r}": [f"step{s}/rank{r}" for s in (0, 1, 2)] for r in (0, 1)}
    hosts = _split(root, tmp_path / "split", parts)
    docs = []
    for i, h in enumerate(hosts):
        d = triage_json(capsys, str(h), "--cache-dir", str(tmp_path / "c"))
        path = tmp_path / f"h{i}.json"
        path.write_text(json.dumps(d))
        docs.append(str(path))
    alone = json.loads(Path(docs[0]).read_text())
    assert alone["origin"]["kind"] == "received" and "was not read" in alone["why"]  # host 0 alone: not the origin
    whole = triage_json(capsys, str(root), "--cache-dir", str(tmp_path / "c"))
    for order in (docs, docs[::-1]):
        merged = triage_json(capsys, "--merge", *order)
        for key in ("verdict", "why", "origin", "inputs", "outputs", "neighbourhood", "spread", "redump_config"):
            assert merged[key] == whole[key], key
        assert merged["covered"]["places"] == whole["covered"]["places"] and merged["hosts"] == 2


def test_merge_refuses_what_is_not_a_triage_document(capsys, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"ops": []}')
    code, _, err = run(capsys, "triage", "--merge", str(bad))
    assert code == 1 and err.count("\n") == 1 and "not a dumpscope triage --json document" in err
    code, _, err = run(capsys, "triage", str(tmp_path), "--merge", str(bad))
    assert code == 2
    bad.write_text('{"format": "dumpscope-triage/1", "mode": "overflow", "candidates": [{}]}')
    code, _, err = run(capsys, "triage", "--merge", str(bad))
    assert code == 1 and err.count("\n") == 1 and "lacks what triage --json writes" in err


def test_merge_refuses_a_place_given_twice(capsys, ms_nan, tmp_path):
    doc = tmp_path / "a.json"
    doc.write_text(json.dumps(triage_json(capsys, str(ms_nan), "--cache-dir", str(tmp_path))))
    code, _, err = run(capsys, "triage", "--merge", str(doc), str(doc))
    assert code == 1 and "rank 0 step 0 is also in" in err


def _golden(block: Path, target: str, capsys, tmp_path, code: int = 3) -> dict:
    return triage_json(capsys, str(block / target), "--golden", str(block / "golden"), "--cache-dir", str(tmp_path),
                       code=code)


def test_golden_pair_with_a_changed_pow_exponent_names_it(capsys, block, tmp_path):
    doc = _golden(block, "nan", capsys, tmp_path)
    o = doc["origin"]
    # compare's own answer, read through its public document
    code, out, _ = run(capsys, "compare", str(block / "golden"), str(block / "nan"), "--step", "all", "--rank", "all",
                       "--json", "--cache-dir", str(tmp_path))
    fd = json.loads(out)["first_divergence"]
    assert doc["verdict"] == "divergence"
    assert (o["golden_name"], o["io"], o["slot"]) == (fd["name"], fd["io"], fd["slot"])
    assert o["name"].endswith("/Pow-op0") and o["judgement"] == fd["rule"] and "2 → 1.5" in o["judgement"]
    exponent = next(t for t in doc["inputs"] if t["slot"] == 1)
    assert (exponent["golden"]["value"], exponent["target"]["value"]) == (2.0, 1.5)  # block.py golden 2.0, nan 1.5
    out0 = doc["outputs"][0]
    y = np.load(block / "nan" / out0["target"]["file"])
    g = np.load(block / "golden" / out0["golden"]["file"])
    assert np.isnan(y).any() and not np.isnan(g).any() and out0["verdict"] == "error"
    assert doc["origin"]["source"][0]["code"] == "f = ops.pow(self.up(self.ln2(x)), power)"


def test_msprobe_golden_pair_agrees_with_msprobe_compare(capsys, msp_block, tmp_path):
    ref = json.loads((msp_block / "msprobe_reference.json").read_text())
    for pair in ("nan_statistics", "scale_tensor"):
        mode = pair.split("_")[1]
        doc = triage_json(capsys, str(msp_block / pair), "--golden", str(msp_block / f"golden_{mode}"),
                          "--cache-dir", str(tmp_path))
        assert doc["origin"]["name"] == ref[pair]["first_error_api"]
        assert "argument changed" in doc["origin"]["judgement"]


@pytest.mark.parametrize("pair", ["ms", "msprobe"])
def test_bit_identical_rerun_is_clean_and_exits_0(capsys, block, msp_block, tmp_path, pair):
    if pair == "ms":
        doc = _golden(block, "rerun", capsys, tmp_path, code=0)
    else:
        doc = triage_json(capsys, str(msp_block / "rerun_tensor"), "--golden", str(msp_block / "golden_tensor"),
                          "--cache-dir", str(tmp_path), code=0)
    assert doc["verdict"] == "clean" and doc["origin"] is None and doc["redump_config"] is None
    assert doc["covered"]["places"] and sum(doc["covered"]["evidence"].values()) > 0
    code, out, _ = run(capsys, "triage", str(msp_block / "rerun_tensor"), "--golden",
                       str(msp_block / "golden_tensor"), "--cache-dir", str(tmp_path)) if pair == "msprobe" else \
        run(capsys, "triage", str(block / "rerun"), "--golden", str(block / "golden"), "--cache-dir", str(tmp_path))
    assert code == 0 and out.startswith("triage       CLEAN")
    # compare's own evidence for "no divergence", passed on (a bit-identical rerun says so)
    assert doc["compare"] and all(c.get("evidence", {}).get("bit_identical") for c in doc["compare"])
    assert doc["why"].endswith("every compared tensor is bit-identical")


def test_clean_job_without_golden_exits_0(capsys, tmp_path_factory, tmp_path):
    root = unpack_data(tmp_path_factory, "real_msprobe26") / "dist_stats"
    doc = triage_json(capsys, str(root), "--cache-dir", str(tmp_path), code=0)
    assert doc["verdict"] == "clean" and len(doc["covered"]["places"]) == 2


def test_nothing_to_judge_is_an_error_not_clean(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "triage", str(tmp_path / "empty"), "--cache-dir", str(tmp_path / "c"))
    assert code == 1 and "nothing could be judged" in err


def test_human_form_fits_80_columns_and_markdown_fences_the_config(capsys, fp16, ms_nan, tmp_path):
    for root in (fp16, ms_nan):
        code, out, _ = run(capsys, "triage", str(root), "--cache-dir", str(tmp_path))
        assert code == 3 and out.startswith("triage       OVERFLOW")
        assert max(len(line) for line in out.splitlines()) <= 80
    code, md, _ = run(capsys, "triage", str(ms_nan), "--md", "--cache-dir", str(tmp_path))
    block = re.search(r"```json\n(.*?)\n```", md, re.S)
    assert code == 3 and md.startswith("## dumpscope triage: overflow") and block
    assert json.loads(block.group(1))["common_dump_settings"]["kernels"][0].endswith("/Log-op0")


def test_export_config_writes_the_config_and_never_inside_the_tree(capsys, ms_nan, tmp_path):
    out = tmp_path / "redump.json"
    code, _, err = run(capsys, "triage", str(ms_nan), "--export-config", str(out), "--cache-dir", str(tmp_path))
    cfg = json.loads(out.read_text())
    assert code == 3 and cfg["mindspore"]["common_dump_settings"]["kernels"][0].endswith("/Log-op0")
    assert cfg["cann"]["dump_layer"].split()[0] == cfg["mindspore"]["common_dump_settings"]["kernels"][0]
    inside = ms_nan / "redump.json"
    code, _, err = run(capsys, "triage", str(ms_nan), "--export-config", str(inside), "--cache-dir", str(tmp_path))
    assert code == 1 and "inside the dump tree" in err and not inside.exists()


def test_overflow_and_compare_exit_code(capsys, ms_nan, block, tmp_path):
    c = ["--cache-dir", str(tmp_path)]
    assert run(capsys, "overflow", str(ms_nan), "--exit-code", "--json", *c)[0] == 3
    assert run(capsys, "overflow", str(ms_nan), "--json", *c)[0] == 0  # without the flag: as before
    (tmp_path / "empty").mkdir()
    assert run(capsys, "overflow", str(tmp_path / "empty"), "--exit-code", *c)[0] == 1  # nothing looked at
    assert run(capsys, "compare", str(block / "golden"), str(block / "nan"), "--exit-code", "--json", *c)[0] == 3
    assert run(capsys, "compare", str(block / "golden"), str(block / "rerun"), "--exit-code", "--json", *c)[0] == 0
    assert run(capsys, "compare", str(block / "golden"), str(block / "nan"), "--json", *c)[0] == 0


def test_explorer_opens_where_triage_points(capsys, dp2, fp16, tmp_path):
    """The explorer's opening rule (``start_place`` + ``first_bad_op`` on what the index knows) lands on the
    origin triage names, once the evidence is in the index (statistics, or triage's own scan of tensors)."""
    from dumpscope.core.engines.overflow.lookup import first_bad_op, start_place, trouble_places
    from dumpscope.core.query import open_query

    for root in (dp2, fp16):
        doc = triage_json(capsys, str(root), "--cache-dir", str(tmp_path))
        q = open_query(str(root), cache_directory=tmp_path)
        place, by_trouble = start_place(q, trouble_places(q))
        op = first_bad_op(q, *place)
        assert by_trouble and place == (doc["origin"]["rank"], doc["origin"]["step"])
        assert op.name == doc["origin"]["name"]


def test_explorer_compare_view_selects_the_row_triage_names(block, tmp_path):
    """``dumpscope GOLDEN --compare TARGET`` selects compare's first divergence (view_compare.prepare): the
    same op and tensor triage --golden reports for a one-place pair."""
    from dumpscope.core.engines.compare import compare_dumps
    from dumpscope.core.query import open_query
    from dumpscope.core.engines.triage.build import triage
    from dumpscope.tui.view_compare import compare_columns, prepare

    g = open_query(str(block / "golden"), cache_directory=tmp_path)
    t = open_query(str(block / "scale"), cache_directory=tmp_path)
    first = prepare(compare_dumps(g, t), "0", compare_columns(lambda: None)).first
    o = triage(t, g)["origin"]
    assert (first["name"], first["io"], first["slot"]) == (o["golden_name"], o["io"], o["slot"])


def test_readme_triage_example_runs(capsys, tmp_path, monkeypatch):
    """The first command the README shows after install and tests is triage's: run it as written."""
    text = (REPO / "README.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("dumpscope triage "))
    argv = shlex.split(line.split("#", 1)[0])
    assert argv[:2] == ["dumpscope", "triage"]
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, *argv[1:], "--cache-dir", str(tmp_path))
    assert code == 3, err
    assert "exit 3" in line  # the README says what the exit status will be
    name = out.splitlines()[0].split()[2]
    doc = triage_json(capsys, *argv[2:], "--cache-dir", str(tmp_path))
    assert doc["origin"]["name"] == name
    y = np.load(Path(argv[2]) / doc["outputs"][0]["file"])
    assert np.isinf(y).any() and all(np.isfinite(np.load(Path(argv[2]) / t["file"])).all() for t in doc["inputs"])


def test_completion_offers_triage_and_its_options():
    from dumpscope.tui.cli.parser import build_parser
    from dumpscope.tui.cli.completion import script

    bash = script("bash", build_parser())
    assert "triage" in bash and "--merge" in bash and "--golden" in bash and "--exit-code" in bash


def test_step_and_rank_narrow_and_a_missing_one_is_named(capsys, ms_nan, tmp_path):
    doc = triage_json(capsys, str(ms_nan), "--step", "1", "--cache-dir", str(tmp_path))
    assert [(p["rank"], p["step"]) for p in doc["covered"]["places"]] == [(0, 1)]
    assert doc["origin"]["step"] == 1 and doc["asked"] == {"rank": "all", "step": 1}
    code, _, err = run(capsys, "triage", str(ms_nan), "--step", "9", "--cache-dir", str(tmp_path))
    assert code == 1 and err.count("\n") == 1 and "(it has 0, 1, 2)" in err


def test_merge_of_one_golden_document_is_that_document(capsys, block, tmp_path):
    doc = _golden(block, "scale", capsys, tmp_path)
    path = tmp_path / "one.json"
    path.write_text(json.dumps(doc))
    merged = triage_json(capsys, "--merge", str(path))
    for key in (*KEYS, "why", "compare", "candidates"):
        assert merged[key] == doc[key], key


def test_an_unreadable_tensor_is_named_in_covered(capsys, ms_nan, block, tmp_path):
    """Never a silent answer: a truncated output file is listed with its problem (overflow engine), and a
    truncated tensor in a golden pair likewise (compare engine)."""
    job = tmp_path / "nan"
    shutil.copytree(ms_nan, job)
    victim = next(p for p in sorted(job.rglob("*Square-op0*output.0*.npy")) if "/Net/0/1/" in str(p))
    victim.write_bytes(victim.read_bytes()[:100])
    doc = triage_json(capsys, str(job), "--cache-dir", str(tmp_path / "c"))
    assert doc["verdict"] == "overflow"
    named = [u["path"] for u in doc["covered"]["unreadable"]] + [p["path"] for p in doc["covered"]["problems"]]
    assert any(str(victim.relative_to(job)) in p or str(victim) in p for p in named)
    pair = tmp_path / "scale"
    shutil.copytree(block / "scale", pair)
    victim = sorted(pair.rglob("*Softmax*output.0*.npy"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    doc = triage_json(capsys, str(pair), "--golden", str(block / "golden"), "--cache-dir", str(tmp_path / "c"))
    named = [u["path"] for u in doc["covered"]["unreadable"]] + [p["path"] for p in doc["covered"]["problems"]]
    assert any(victim.name in p for p in named)
