"""The triage document in words: the human form (fits 80 columns) and a Markdown report.

Pure functions of the document ``core.triage`` makes (or ``merge``s): what the screen says is
what ``--json`` says.  Text from a dump passes through ``inert`` (the CLI's stream makes it inert
again; a Markdown report pasted into an issue has no other guard).
"""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any, Optional

from dumpscope.core.inert import inert

_STACK_SHOWN = 8


def _num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _span(values: list[int]) -> str:
    v = sorted(set(values))
    if not v:
        return "-"
    return f"{v[0]}..{v[-1]}" if len(v) > 2 and v == list(range(v[0], v[-1] + 1)) else ",".join(map(str, v))


def places_text(places: list[dict[str, Any]]) -> str:
    """"rank 0..1 × step 0..2 (6 places)", or the list when they are not a full grid."""
    if not places:
        return "none"
    ranks = {p["rank"] for p in places}
    steps = {p["step"] for p in places}
    n = len(places)
    if len(ranks) * len(steps) == n:
        return f"rank {_span(list(ranks))} × step {_span(list(steps))} ({n} place{'s' if n != 1 else ''})"
    return ", ".join(f"r{p['rank']} s{p['step']}" for p in places[:12]) + (f" … ({n} places)" if n > 12 else "")


def _frame(f: Optional[dict[str, Any]], short: bool = False) -> str:
    """``file:line  code``; ``short``: a library frame's path cut to its last two parts (--json has it whole)."""
    if not f:
        return "-"
    path = str(f.get("file") or "")
    if short and not f.get("user") and path.count("/") > 2:
        path = "…/" + "/".join(path.rsplit("/", 2)[-2:])
    code = f"  {f['code']}" if f.get("code") else ""
    return f"{inert(path)}:{inert(f.get('line'))}{inert(code)}"


def _stats(t: dict[str, Any]) -> str:
    if "value" in t and "min" not in t:
        return f"= {inert(json.dumps(t['value'], default=str))}"
    parts = [f"min {_num(t.get('min'))}", f"max {_num(t.get('max'))}", f"mean {_num(t.get('mean'))}"]
    counts = [(w, t.get(k)) for w, k in (("nan", "nan"), ("+inf", "posinf"), ("-inf", "neginf"))]
    if any(c is not None for _, c in counts):
        parts.append(" ".join(f"{w} {_num(c)}" for w, c in counts))
    if t.get("recorded_nonfinite"):
        parts.append("recorded " + ", ".join(f"{k} {v}" for k, v in t["recorded_nonfinite"].items()))
    if t.get("error"):
        parts.append(f"unreadable: {inert(t['error'])}")
    return "  ".join(parts)


def _side(s: Optional[dict[str, Any]]) -> str:
    if not s:
        return "-"
    if s.get("value") is not None and s.get("max") is None:
        return f"= {inert(json.dumps(s['value'], default=str))}"
    return f"min {_num(s.get('min'))}  max {_num(s.get('max'))}  mean {_num(s.get('mean'))}"


def _tensor_lines(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(head, body) pairs for the origin's inputs and outputs."""
    out = []
    for t in [*doc.get("inputs", []), *doc.get("outputs", [])]:
        head = f"{t['io']} {t['slot']}"
        if "target" in t or "golden" in t:  # compare: target beside golden
            sides = t.get("target") or t.get("golden") or {}
            rule = str(t.get("rule") or "")
            verdict = str(t.get("verdict"))
            said = rule if rule.startswith(verdict) else f"{verdict}: {rule}" if rule else verdict
            out.append((head, f"{inert(sides.get('dtype') or '')} {sides.get('shape', '')}  {inert(said)}"
                              + (f"  cos {_num(t.get('cosine'))}" if t.get("cosine") is not None else "")))
            out.append(("  target", _side(t.get("target"))))
            out.append(("  golden", _side(t.get("golden"))))
        else:
            out.append((head, f"{inert(t.get('dtype'))} {t.get('shape')}  {_stats(t)}"
                              + (f"  ({t['evidence']})" if t.get("evidence") else "")))
    return out


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1] if "/" in name else name


def _nb_lines(nb: Optional[dict[str, Any]]) -> list[tuple[str, str]]:
    if not nb:
        return []
    out = []
    for lv, nodes in nb.get("levels", {}).items():
        label = lv if not lv.lstrip("-").isdigit() else (f"+{lv}" if int(lv) > 0 else lv)
        shown = ", ".join(f"{inert(_short(n['name']))} ({inert(n.get('type'))}) {n.get('verdict')}" for n in nodes)
        cut = nb.get("cut", {}).get(lv)
        out.append((f"  {label}", shown + (f" +{cut} more" if cut else "") if nodes else "-"))
    return out


def summary_line(doc: dict[str, Any]) -> str:
    o = doc.get("origin")
    v = doc["verdict"]
    if o:
        return (f"{v.upper()}: {inert(o['name'])} ({inert(o.get('type'))}) rank {o['rank']} step {o['step']} "
                f"{o['io']} {o['slot']}")
    return f"{v.upper()}: {inert(doc.get('why'))}"


def _covered_text(doc: dict[str, Any]) -> list[tuple[str, str]]:
    cov = doc["covered"]
    ev = ", ".join(f"{k} {v}" for k, v in sorted(cov.get("evidence", {}).items())) or "none"
    unknown = sum(p.get("unknown") or 0 for p in cov["places"])
    lines = [("covered", f"{places_text(cov['places'])}; evidence: {ev}"
                         + (f"; {unknown} ops without readable outputs (not judged)" if unknown else ""))]
    if cov.get("not_covered"):
        lines.append(("not covered", "; ".join(f"rank {p['rank']} step {p['step']}: {p['why']}"
                                               for p in cov["not_covered"][:6])
                      + (f" … ({len(cov['not_covered'])})" if len(cov["not_covered"]) > 6 else "")))
    files = sum(t.get("files", 0) for t in cov.get("trees", []))
    lines.append(("files", f"{files} under {len(cov.get('trees', []))} tree(s); not recognised "
                           f"{cov.get('not_recognised', 0)}; problems {len(cov.get('problems', []))}; "
                           f"unreadable outputs {len(cov.get('unreadable', []))}"))
    for p in [*cov.get("problems", []), *cov.get("unreadable", [])][:5]:
        lines.append(("  !", f"{inert(p.get('path'))}: {inert(p.get('error'))}"))
    if cov.get("unmatched") and any(cov["unmatched"].values()):
        u = cov["unmatched"]
        lines.append(("unmatched", f"{u.get('golden_ops', 0)} golden ops, {u.get('target_ops', 0)} target ops, "
                                   f"{u.get('tensors', 0)} tensors"))
    return lines


def _precision_lines(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """With --golden: what each side ran in, as compare says it (its ``precision`` texts), when it does."""
    out = []
    for c in doc.get("compare", []):
        p = c.get("precision") or {}
        if p.get("golden_text") or p.get("target_text"):
            out.append(("precision", f"target {inert(p.get('target_text') or '?')}; golden "
                                     f"{inert(p.get('golden_text') or '?')}"))
    return list(dict.fromkeys(out))


def _spread_text(sp: Optional[dict[str, Any]]) -> str:
    if not sp:
        return "-"
    parts = [f"{sp['bad_ops_after']} more bad op(s) in {len(sp['bad_places'])} place(s)",
             f"ranks bad: {_span(sp['ranks_bad'])}"]
    if sp.get("ranks_received"):
        parts.append(f"received through a collective: rank {_span(sp['ranks_received'])}")
    parts.append(f"later steps: {_span(sp['later_steps'])}" if sp["later_steps"] else "no later step")
    return "; ".join(parts)


def _config_part(rc: dict[str, Any]) -> tuple[str, Any]:
    """The part of the config the run's own tool reads (all of it when unknown)."""
    cfg = rc["config"]
    if rc.get("tool") == "mindspore":
        return "MindSpore common_dump_settings.kernels", cfg["mindspore"]
    if rc.get("tool") == "cann":
        return "CANN dump_layer (acl.json dump_list)", cfg["cann"]
    if rc.get("tool") == "msprobe":
        return "msprobe list", cfg["msprobe"]
    return "MindSpore / CANN / msprobe", cfg


def text(doc: dict[str, Any], width: int = 80) -> str:
    """The human form: a verdict line, then labelled sections wrapped to ``width`` columns."""
    lab = 13
    out: list[str] = []

    def put(label: str, body: str) -> None:
        lines = textwrap.wrap(body, width=max(20, width - lab), break_long_words=True, break_on_hyphens=False,
                              replace_whitespace=False) or [""]
        out.append(f"{label:<{lab}}{lines[0]}".rstrip())
        out.extend(f"{'':<{lab}}{ln}".rstrip() for ln in lines[1:])

    put("triage", summary_line(doc))
    if doc.get("origin"):
        put("why", inert(doc.get("why") or "-"))
    o = doc.get("origin")
    if o:
        kind = f"{o.get('kind')}: " if o.get("kind") else ""
        put("judgement", kind + inert(o.get("judgement") or "-"))
        where = f"exec {o.get('exec_index')}" + (f"; evidence {o['evidence']}" if o.get("evidence") else "")
        if o.get("golden_name") and o["golden_name"] != o["name"]:
            where += f"; golden {inert(o['golden_name'])}"
        if "golden_step" in o and (o["golden_rank"], o["golden_step"]) != (o["rank"], o["step"]):
            where += f"; golden rank {o['golden_rank']} step {o['golden_step']}"
        put("where", where)
        src = o.get("source") or []
        user = src[0] if src and src[0].get("user") else None
        put("your code", _frame(user) if user else "no source line in the dump")
        stack = src[1:] if user else src
        if stack:
            cut = len(stack) - _STACK_SHOWN
            put("stack", "outermost first, > your code" + (f"; {cut} outer frames in --json" if cut > 0 else ""))
            for f in stack[-_STACK_SHOWN:]:
                put("  >" if f.get("user") else "", _frame(f, short=True))
        for head, body in _tensor_lines(doc):
            put(head, body)
        nb = doc.get("neighbourhood")
        if nb:
            put("neighbours", "producers (-) and consumers (+), two hops" if nb.get("graph") else inert(nb["note"]))
            for head, body in _nb_lines(nb):
                put(head, body)
        put("spread", _spread_text(doc.get("spread")))
    for head, body in _covered_text(doc):
        put(head, body)
    for head, body in _precision_lines(doc):
        put(head, body)
    if doc.get("hosts", 1) > 1:
        put("merged", f"{doc['hosts']} documents")
    rc = doc.get("redump_config")
    if rc:
        what, _ = _config_part(rc)
        put("re-dump", f"{len(rc['ops'])} op(s) as {what}: " + ", ".join(inert(_short(n)) for n in rc["ops"])
            + "; --export-config FILE writes it" + (f"; {rc['note']}" if rc.get("note") else ""))
    return "\n".join(out) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    """A Markdown report, ready to paste into an issue: the config in a fenced JSON block."""
    def code(v: Any) -> str:
        return "`" + inert(str(v)).replace("`", "'") + "`"

    o = doc.get("origin")
    lines = [f"## dumpscope triage: {doc['verdict']}", "", f"**{inert(summary_line(doc))}**", "",
             f"- why: {inert(doc.get('why'))}"]
    if o:
        lines += [f"- origin: {code(o['name'])} ({code(o.get('type'))}), rank {o['rank']}, step {o['step']}, "
                  f"{o['io']} {o['slot']}",
                  f"- judgement: {o.get('kind') or '-'}: {inert(o.get('judgement'))}"]
        src = o.get("source") or []
        if src and src[0].get("user"):
            lines.append(f"- your code: {code(_frame(src[0]))}")
        lines.append(f"- spread: {_spread_text(doc.get('spread'))}")
        rows = _tensor_lines(doc)
        if rows:
            lines += ["", "| tensor | facts |", "|---|---|"]
            lines += [f"| {h.strip()} | {b.replace('|', '/')} |" for h, b in rows]
        nb = _nb_lines(doc.get("neighbourhood"))
        if nb:
            lines += ["", "neighbourhood (producers -, consumers +):", ""]
            lines += [f"- {h.strip()}: {b}" for h, b in nb]
        stack = src[1:] if src and src[0].get("user") else src
        if stack:
            lines += ["", "stack (outermost first, > your code):", "", "```"]
            lines += [("> " if f.get("user") else "  ") + _frame(f) for f in stack]
            lines += ["```"]
    lines += [""] + [f"- {h}: {inert(b)}" for h, b in _covered_text(doc) + _precision_lines(doc)]
    rc = doc.get("redump_config")
    if rc:
        what, part = _config_part(rc)
        lines += ["", f"re-dump config ({what}; `--export-config FILE` writes all three forms):", "", "```json",
                  json.dumps(part, indent=1, ensure_ascii=False), "```"]
    return "\n".join(lines) + "\n"


def write_config(doc: dict[str, Any], path: str, roots: list[str]) -> list[str]:
    """``--export-config``: the origin and its producers through the one config writer (refuses a
    path inside a dump tree); the names left out of ``dump_layer``."""
    from dumpscope.core.engines.redump_config import RedumpConfigError, write_redump_config

    rc = doc.get("redump_config")
    if not rc:
        raise RedumpConfigError(f"{path}: nothing to re-dump (verdict {doc['verdict']}); not written")
    return write_redump_config(rc["ops"], path, [os.path.abspath(r) for r in roots if r], rc.get("models"))
