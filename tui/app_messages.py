"""The messages the explorer's workers post to the app (index built or failed, compare done, progress) and the
words of their progress; ``IndexReady`` takes the summary facts in the worker, where slow queries belong."""

from __future__ import annotations

from typing import Any, Optional

from textual.message import Message

from dumpscope.core.query import DumpQuery, OpRow


class IndexProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class IndexReady(Message):
    def __init__(self, q: DumpQuery, refreshed: bool = False, final: bool = True, just_built: bool = False,
                 facts: Optional[DumpQuery] = None) -> None:
        super().__init__()
        self.q = q
        self.refreshed = refreshed
        self.final = final  # False for the partial results of a cold build still running
        # summary facts are computed here, in the worker: some are full-table queries.  ``facts``: the
        # same index on the worker's own connection, so that the views' queries never wait for these
        q = facts or q
        from dumpscope.core.engines.overflow.lookup import start_place, trouble_places

        self.trouble = trouble_places(q)
        self.start, self.start_by_trouble = start_place(q, self.trouble)
        # partial results: only the names the status bar shows, from the folders stored (the full
        # list counts the files of every unit stored so far: a scan repeated for each partial result)
        self.layouts = q.layouts() if final else [{"name": n} for n in q.stored_layout_names()]
        # partial results, or a cold build that read every file moments ago: the problems stored (the
        # full list stats every indexed file again for ones truncated since: ~1 s per 100k files)
        self.problems = len(q.problems()) if final and not just_built else q.problem_count()


#: modules the first partial result's facts (``overflow``: its trouble places, with the CANN and protobuf


class CompareProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class IndexFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class CompareReady(Message):
    def __init__(self, result: Optional[dict[str, Any]], error: Optional[str],
                 place: Optional[tuple[int, int]] = None, open_on: Optional[OpRow] = None) -> None:
        super().__init__()
        self.result = result
        self.error = error
        #: the opening compare (the whole job's first divergence): the place compared and the golden op to open on
        self.place = place
        self.open_on = open_on



def progress_text(prog: Any, what: str = "indexing") -> str:
    if getattr(prog, "phase", "") == "joining":
        return f"{what}: joining graphs… ({prog.files:,} files)"
    return f"{what} {prog.files:,} files…"
