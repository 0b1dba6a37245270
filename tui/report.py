"""The markdown triage report (bookmarks and findings) and CSV export of table views.

``build_report`` is a pure function of the query object and what the session found, so it
is testable without a terminal.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from dumpscope.core.inert import inert, inert_lines
from dumpscope.core.query import DumpQuery, OpRow, shown_step

MAX_PROBLEMS = 20


def _md(text: Any) -> str:
    return inert(str(text).replace("|", "\\|").replace("\n", " "))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "-" if v is None else str(v)


def build_report(q: DumpQuery, bookmarks: Iterable[OpRow], overflow: dict[tuple[int, int], list[dict[str, Any]]],
                 compare: Optional[dict[str, Any]] = None, compare_target: Optional[str] = None,
                 watch: Optional[dict[tuple[int, int], dict[str, Any]]] = None) -> str:
    s = q.summary()
    out = ["# dumpscope triage report", ""]
    out.append(f"- dump: `{inert(s['path'])}`")
    out.append(f"- layouts: {', '.join(sorted({lay['name'] for lay in s['layouts']})) or 'none'}")
    out.append(f"- ranks: {s['ranks']}  steps: {s['steps']}  ops: {s['ops']:,}  tensors: {s['tensors']:,}")
    out.append(f"- problems: {len(s['problems'])}")
    out += ["", "## Overflow / NaN / Inf", ""]
    if not overflow:
        out.append("Not scanned in this session (press `o` in the explorer, or run `dumpscope overflow`).")
    for (rank, step), rows in sorted(overflow.items()):
        if not rows:
            out.append(f"- rank {rank} step {step}: no overflow, NaN or Inf found")
            continue
        first = rows[0]
        out.append(f"- rank {rank} step {step}: {len(rows)} ops; **origin** `{inert(first.get('name'))}` "
                   f"({first.get('type')}, exec #{first.get('exec_index')}, evidence {first.get('evidence')}"
                   + (f", status {', '.join(first.get('status_words') or [])}" if first.get('status_words') else "")
                   + f", nan {first.get('nan')}, +inf {first.get('posinf')}, -inf {first.get('neginf')})")
    if compare is not None:
        out += ["", "## Compare", ""]
        if compare_target:
            out.append(f"- target: `{inert(compare_target)}`")
        rows = compare.get("rows", [])
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r.get("verdict"))] = counts.get(str(r.get("verdict")), 0) + 1
        out.append(f"- rows: {len(rows)} " + " ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        fd = compare.get("first_divergence")
        if fd:
            row = next((r for r in rows if r.get("name") == fd.get("name") and r.get("io") == fd.get("io")
                        and r.get("slot") == fd.get("slot")), {})
            out.append(f"- **first divergence**: `{inert(fd.get('name'))}` {fd.get('io')}.{fd.get('slot')} step "
                       f"{fd.get('step')}: cosine {_fmt(row.get('cosine'))}, max abs err "
                       f"{_fmt(row.get('max_abs_err'))}, rule {row.get('rule', '-')}")
        else:
            out.append("- no divergence")
        out.append(f"- unmatched: golden {len(compare.get('unmatched_golden', []))}, "
                   f"target {len(compare.get('unmatched_target', []))}")
    for (rank, step), doc in sorted((watch or {}).items()):
        watched = doc.get("watched", [])
        if watched:
            out += ["", f"## Watch (rank {rank} step {step})", ""]
            for w in watched:
                out.append(f"- `{inert(w.get('name'))}`: first change after `{inert(w.get('first_change_after'))}`"
                           if w.get("first_change_after") else f"- `{inert(w.get('name'))}`: never changed")
    out += ["", "## Bookmarks", ""]
    marks = list(bookmarks)
    if not marks:
        out.append("None (press `b` on an op to bookmark it).")
    for op in marks:
        out.append(f"### `{inert(op.name)}`")
        out.append("")
        step = "no step (constants)" if shown_step(op.step) is None else f"step {op.step}"
        out.append(f"- type {inert(op.type)}, rank {op.rank}, {step}, graph {inert(op.graph)}, exec #{op.exec_index}"
                   + ("  **overflow/NaN/Inf**" if op.bad else ""))
        out.append("")
        out.append("| tensor | dtype | shape | format | min | max | mean | nan | +inf | -inf |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for t in q.tensors(op.id):
            st = q.cached_stats(t) or (t.stats or {})
            out.append(f"| {t.io}.{t.slot} | {_md(t.dtype)} | {list(t.shape)} | {_md(t.format)} | {_fmt(st.get('min'))} "
                       f"| {_fmt(st.get('max'))} | {_fmt(st.get('mean'))} | {_fmt(st.get('nan'))} "
                       f"| {_fmt(st.get('posinf'))} | {_fmt(st.get('neginf'))} |")
        out.append("")
    problems = s["problems"]
    if problems:
        out += ["", "## Problems", ""]
        for p in problems[:MAX_PROBLEMS]:
            out.append(f"- `{inert(p['path'])}`: {_md(p['error'])}")
        if len(problems) > MAX_PROBLEMS:
            out.append(f"- … {len(problems) - MAX_PROBLEMS} more (`dumpscope summary --json`)")
    return inert_lines("\n".join(out).rstrip() + "\n")  # names from the dump: no escape reaches a `cat`


def write_compare_table(app: Any, path: str) -> int:
    """The compare view's rows as msprobe's compare table (``.csv`` / ``.xlsx``, ``core.engines.compare.table_file``).

    Reads the indexes (sides, stacks): run it off the UI thread.
    """
    from dumpscope.core.engines.compare import report as cr
    from dumpscope.core.engines.compare.table_file import write_table

    result = app.compare_result
    if not result:
        raise cr.ExportError(f"{path}: no compare result to export")
    doc = dict(result, rows=[dict(r) for r in result.get("rows", [])])  # the view keeps its own rows
    return write_table(doc, path, cr.describe_sides(doc, app.q, app.target_q))


def write_export(app: Any, path: str) -> None:
    """Write the report, or (``.csv``) the table of the view under the export dialog."""
    if path.endswith(".json"):
        # the diverging (compare view) or marked ops as MindSpore ``kernels`` / CANN ``dump_layer`` /
        # msprobe ``list``, through the one writer of ``core.redump_config``
        from dumpscope.core.engines.redump_config import RedumpConfigError, write_redump_config

        below = app.screen_stack[-2] if len(app.screen_stack) >= 2 else app.screen
        try:
            if getattr(below, "export_name", "") == "compare" and app.compare_result:
                from dumpscope.core.engines.compare import export_redump_config

                export_redump_config(app.compare_result, path)
            elif app.marked:
                ops = sorted(app.marked.values(), key=lambda o: (o.rank, o.step, o.exec_index is None,
                                                                  o.exec_index or 0, o.id))
                write_redump_config([o.name for o in ops], path, app.forbidden_roots())
            else:
                raise OSError(f"{path}: no compare result and no marked ops to export")
        except RedumpConfigError as exc:
            raise OSError(str(exc)) from None
        return
    if path.endswith(".csv"):
        screen = app.screen_stack[-2] if len(app.screen_stack) >= 2 else app.screen
        table = getattr(screen, "export_table", None)
        if table is None:
            raise OSError(f"{path}: nothing to export as CSV here")
        data = table.to_csv()
    else:
        data = build_report(app.q, app.bookmarks.values(), app.overflow_results, app.compare_result,
                            app.compare_with, app.watch_results)
    from dumpscope.core.support.atomic_write import replaced_file

    with replaced_file(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(inert_lines(data))
