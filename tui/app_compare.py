"""The explorer's compare (``--compare TARGET``): the target's index and the compare run in a thread worker,
its result turned into the verdict badges and the compare view.

At open (no ``--rank``/``--step``) the explorer goes to the whole job's first divergence, the one
``dumpscope triage TARGET --golden PATH`` names (``compare_places`` over every rank and step, where triage
reads it), and shows that place's compare with the cursor on the golden op: the screen and the report agree.

``CompareWorkers`` is a part of ``DumpscopeApp`` (its base class).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from textual import work
from textual.worker import get_current_worker

from dumpscope.core.query import DumpQuery, OpRow
from dumpscope.tui.app_index import IN_APP_WORKERS
from dumpscope.tui.app_messages import CompareProgress, CompareReady, IndexProgress, progress_text


class CompareWorkers:
    """The compare, as a part of the app: ``DumpscopeApp`` is the class that holds the state."""

    @work(thread=True, exclusive=True, group="compare", name="compare dumps")
    def _run_compare(self, q: DumpQuery, rank: int, step: int, whole_job: bool = False) -> None:
        """Compare ``rank``/``step`` of both dumps; ``whole_job``: first find the place of the whole job's first
        divergence, compare that one, and say which golden op to open on."""
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

            def progress(done: int, total: int, what: str = "{done:,}/{total:,} tensors") -> None:
                now = time.monotonic()
                if now - last[0] > 0.25:
                    last[0] = now
                    self.post_message(CompareProgress("comparing… " + what.format(
                        done=done, total=total, share=done * 100 // max(total, 1))))

            open_on: Optional[OpRow] = None
            result: Optional[dict[str, Any]] = None
            if whole_job:
                rank, step, result = self._job_first_place(q, self.target_q, (rank, step), progress)
            if result is None:
                result = compare_dumps(q, self.target_q, rank=rank, step=step, progress=progress,
                                       workers=IN_APP_WORKERS)
            if whole_job:
                open_on = _first_divergence_op(q, result)
            from dumpscope.tui.view_compare import warm_view

            warm_view(self, result)  # the compare table sorted and counted here, so `c` has nothing to wait for
        except IndexCancelled:
            return
        except Exception as exc:
            self.post_message(CompareReady(None, f"compare failed: {type(exc).__name__}: {exc}".splitlines()[0]))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(CompareReady(result, None, place=(rank, step) if whole_job else None,
                                           open_on=open_on))

    def on_compare_progress(self, message: CompareProgress) -> None:
        if self.compare_result is None:
            self.compare_status = message.text
            self._main().update_status()

    def _job_first_place(self, golden: DumpQuery, target: DumpQuery, shown: tuple[int, int],
                         progress: Callable[[int, int, str], None]
                         ) -> tuple[int, int, Optional[dict[str, Any]]]:
        """The golden place of the whole job's first divergence, the one ``triage TARGET --golden PATH`` names
        (its origin is ``compare_places``' first divergence over every rank and step: compare's rules in each
        pair of places, the whole-job rule among them), and that place's compare when the whole-job pass made
        it (golden and target at the same place: it is not compared a second time); ``shown`` and None when
        nothing diverges.  A job of one pair of places is compared once, there (None: by the caller)."""
        from dumpscope.core.engines.compare.places import job_first_divergence, place_docs, place_pairs

        pairs, unpaired = place_pairs(golden, target, rank="all", step="all")
        if len(pairs) == 1 and not unpaired["golden"] and not unpaired["target"]:
            return (*pairs[0][0], None)
        if not pairs:
            return (*shown, None)
        docs, _ = place_docs(golden, target, rank="all", step="all", spool_rows=True, workers=IN_APP_WORKERS,
                             progress=lambda done, total: progress(done, total, "every rank and step, {share}%"))
        fd = job_first_divergence(target, [d["first_divergence"] for d in docs if d.get("first_divergence")])
        if not fd:
            return (*shown, None)
        place = (fd["rank"], fd["step"])
        doc = next((d for d in docs if (d["golden"]["rank"], d["golden"]["step"]) == place
                    and (d["target"]["rank"], d["target"]["step"]) == place), None)
        if doc is None:  # the target's place differs: compared again, golden and target at the golden place
            return (*place, None)
        # the explorer's compare holds its rows (sorted, filtered by the view); the trees' problems are
        # listed in the first place's document only
        return (*place, dict(doc, rows=list(doc["rows"]), problems=docs[0].get("problems", [])))

    def on_compare_ready(self, message: CompareReady) -> None:
        if message.place is not None and message.result is not None and not self._follow_compare(message):
            return
        self.compare_result, self.compare_error = message.result, message.error
        self.compare_status = ""
        self.badges.verdicts.clear()
        for row in (message.result or {}).get("rows", []):
            self.badges.add_verdict(row.get("golden_op_id"), row.get("verdict"))
        self._main().badges_changed()
        from dumpscope.tui.view_compare import CompareScreen

        if isinstance(self.screen, CompareScreen):
            self.screen.load()

    def _follow_compare(self, message: CompareReady) -> bool:
        """The opening compare is done: go to its place and op unless the user has moved on meanwhile (then
        compare the place shown instead: False)."""
        main = self._main()
        moved = self._user_placed or bool(main.history or main.hits)
        if message.place != (self.rank, self.step):
            if moved or self.q is None:
                self._run_compare(self.q, self.rank, self.step)
                return False
            self.rank, self.step = message.place
            main.place_changed(select=message.open_on)
        if message.open_on is not None and not moved:
            main.jump_to(message.open_on, remember=False)
        return True


def _first_divergence_op(q: DumpQuery, result: dict[str, Any]) -> Optional[OpRow]:
    """The golden op of a compare document's first divergence (its row names the op's id), or None."""
    from dumpscope.tui.compare_rows import is_first_divergence

    fd = result.get("first_divergence")
    if not fd:
        return None
    row = next((r for r in result.get("rows", []) if is_first_divergence(r, fd)), None)
    op_id = row.get("golden_op_id") if row else None
    return q.op_by_id(op_id) if op_id is not None else None
