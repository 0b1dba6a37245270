"""The explorer's compare (``--compare TARGET``): the target's index and the compare run in a thread worker,
its result turned into the verdict badges and the compare view.

``CompareWorkers`` is a part of ``DumpscopeApp`` (its base class).
"""

from __future__ import annotations

import time

from textual import work
from textual.worker import get_current_worker

from dumpscope.core.query import DumpQuery
from dumpscope.tui.app_index import IN_APP_WORKERS
from dumpscope.tui.app_messages import CompareProgress, CompareReady, IndexProgress, progress_text


class CompareWorkers:
    """The compare, as a part of the app: ``DumpscopeApp`` is the class that holds the state."""

    @work(thread=True, exclusive=True, group="compare", name="compare dumps")
    def _run_compare(self, q: DumpQuery, rank: int, step: int) -> None:
        from dumpscope.core.index.dump_index import DumpIndex, IndexCancelled
        from dumpscope.core.engines.compare import compare_dumps

        try:
            if self.target_q is None:
                target = DumpIndex.open(
                    self.compare_with or "", cancel=self._cancel,
                    progress=lambda p: self.post_message(IndexProgress(progress_text(p, "indexing target"))),
                    **self._cache_kwargs())
                self.target_q = DumpQuery(target)
            self.post_message(IndexProgress(""))
            last = [0.0]

            def progress(done: int, total: int) -> None:
                now = time.monotonic()
                if now - last[0] > 0.25:
                    last[0] = now
                    self.post_message(CompareProgress(f"comparing… {done:,}/{total:,} tensors"))

            result = compare_dumps(q, self.target_q, rank=rank, step=step, progress=progress,
                                   workers=IN_APP_WORKERS)
            from dumpscope.tui.view_compare import warm_view

            warm_view(self, result)  # the compare table sorted and counted here, so `c` has nothing to wait for
        except IndexCancelled:
            return
        except Exception as exc:
            self.post_message(CompareReady(None, f"compare failed: {type(exc).__name__}: {exc}".splitlines()[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(CompareReady(result, None))

    def on_compare_progress(self, message: CompareProgress) -> None:
        if self.compare_result is None:
            self.compare_status = message.text
            self._main().update_status()

    def on_compare_ready(self, message: CompareReady) -> None:
        self.compare_result, self.compare_error = message.result, message.error
        self.compare_status = ""
        self.badges.verdicts.clear()
        for row in (message.result or {}).get("rows", []):
            self.badges.add_verdict(row.get("golden_op_id"), row.get("verdict"))
        self._main().badges_changed()
        from dumpscope.tui.view_compare import CompareScreen

        if isinstance(self.screen, CompareScreen):
            self.screen.load()
