"""Reduce the blocks of one big tensor in forked processes (``dumpscope stats`` on float32/float64).

Why processes: on this kind of VM, two threads making many short numpy calls each spend about twice
the CPU of one thread (GIL hand-offs around every call), so threads made the float engine *slower*;
forked children share the memory map (or read their own range of the file) and never contend.

One job: :class:`BlockProcs` takes contiguous ranges of a tensor's block numbers (see
:func:`split_ranges`), keeps the first range for the calling process and forks one child per other
range.  Each :meth:`BlockProcs.run` is a *phase* (pass 1, then pass 2 with what pass 1 found): every
process calls ``handler(msg, block_no)`` for each block of its range, and the caller gets every
block's result back **in block order** — so the caller merges exactly as one thread would.

Results cross the pipe as one JSON line per block (``[block_no, result]``: plain numbers the handler
made, never anything unpickled; JSON floats round-trip exactly, NaN/Infinity included).  A child
that dies, errors or writes a bad line is killed and the caller computes the blocks it did not
deliver itself, with the same handler: same answer.  Children never run atexit handlers
(``os._exit``), ignore nothing of the parent's but their own range, and are reaped on every exit
path (KeyboardInterrupt included): no zombie is left.

Safe only in a single-threaded process (forking a process whose other threads hold locks can
deadlock the child): :func:`can_fork` is the gate — true in the ``dumpscope`` CLI, false in the
explorer, which has threads and keeps the thread path.
"""

from __future__ import annotations

import array
import json
import mmap
import os
import select
import signal
import sys
import threading
from typing import Any, Callable, Iterator, Optional

#: called in a child before each block as ``hook(msg, block_no, hints, slot)``: tests kill a child
#: mid-way with it, hold it back, or return bytes that the child writes instead of that block's line
_fault_hook: Optional[Callable[[Any, int, memoryview, int], Optional[bytes]]] = None
#: whether the calling process takes the blocks a child has not started yet (tests turn it off to see
#: the children do their share whatever the timing)
STEAL = True


def can_fork() -> bool:
    """Whether forking is safe here: Linux (macOS system frameworks, Accelerate BLAS among them, are
    not fork-safe: Python itself spawns there) and this is the only (main) thread."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1
            and threading.current_thread() is threading.main_thread())


def split_ranges(first: int, stop: int, parts: int) -> list[tuple[int, int]]:
    """``[first, stop)`` in ``parts`` contiguous ranges of (nearly) equal length, none empty."""
    n = max(0, stop - first)
    parts = max(1, min(parts, n))
    return [(first + n * k // parts, first + n * (k + 1) // parts) for k in range(parts)]


class _Child:
    def __init__(self, pid: int, cmd_fd: int, out_fd: int, blocks: tuple[int, int], slot: int) -> None:
        self.pid = pid
        self.cmd_fd: Optional[int] = cmd_fd  # parent -> child: one JSON line per phase
        self.out_fd: Optional[int] = out_fd  # child -> parent: one JSON line per block
        self.blocks = blocks
        self.slot = slot  # its three words in the shared hints: [progress, limit, phase]
        self.buf = b""
        self.got: dict[int, Any] = {}
        self.ended = False  # this phase: it stopped (its range done, or it met what the parent took)
        self.alive = True


class BlockProcs:
    """Block ranges split over this process and one forked child per extra range.

    Use as a context manager; :meth:`start` returns None when nothing can be forked (the caller
    keeps its one-process path).

    Work stealing (``steal=True``): once its own range is done, this process takes the blocks a
    child has not started yet, from the end of that child's range backwards, so a child that runs
    slower (a busy core) never holds the answer up.  The hints live in a small shared map: each
    child publishes the block it is starting (``progress``) and stops at ``limit``, the lowest
    block taken from it.  The hints may race (both sides may compute the same block: same result;
    or each may leave it to the other): a child always ends its phase with an end line, and every
    block nobody delivered is computed here, so the answer never depends on the race.  A third word
    holds the phase, so a child still finishing a phase this process has closed stops at once.
    """

    def __init__(self, handler: Callable[[Any, int], Any], own: tuple[int, int], slots: int,
                 steal: bool) -> None:
        self.handler = handler
        self.own = own
        self.steal = steal
        self.children: list[_Child] = []
        self.phase = 0
        try:
            self._map: Any = mmap.mmap(-1, 24 * max(1, slots))  # shared with the children (anonymous)
        except (OSError, ValueError):  # no shared map: no stealing (each side keeps its own copy)
            self._map, self.steal = bytearray(24 * max(1, slots)), False
        self.hints = memoryview(self._map).cast("q")

    @classmethod
    def start(cls, handler: Callable[[Any, int], Any], ranges: list[tuple[int, int]],
              steal: Optional[bool] = None) -> Optional["BlockProcs"]:
        """This process keeps ``ranges[0]``; one child is forked per other range (contiguous block
        numbers ``[start, stop)``, in order).  ``steal``: see the class (default :data:`STEAL`)."""
        if len(ranges) < 2 or not can_fork():
            return None
        procs = cls(handler, ranges[0], len(ranges) - 1, STEAL if steal is None else steal)
        try:
            for rng in ranges[1:]:
                procs._fork(rng)
        except OSError:  # no fork possible (limits): what was forked still works, the rest is ours
            pass
        except BaseException:
            procs.close()
            raise
        if not procs.children:
            procs.close()
            return None
        return procs

    def _fork(self, blocks: tuple[int, int]) -> None:
        slot = len(self.children)
        self.hints[3 * slot : 3 * slot + 3] = _words(blocks[0] - 1, blocks[1], 0)  # nothing started, no limit
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (cmd_r, cmd_w, out_r, out_w):
                os.close(fd)
            raise
        if pid == 0:  # child: never returns
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends it at once
                for c in self.children:  # the other children's pipe ends: their EOFs must not wait on us
                    for fd in (c.cmd_fd, c.out_fd):
                        if fd is not None:
                            os.close(fd)
                os.close(cmd_w)
                os.close(out_r)
                _child_main(self.handler, blocks, cmd_r, out_w, self.hints, slot)
                code = 0
            finally:
                os._exit(code)
        os.close(cmd_r)
        os.close(out_w)
        os.set_blocking(out_r, False)
        self.children.append(_Child(pid, cmd_w, out_r, blocks, slot))

    # -- a phase -----------------------------------------------------------------------------

    def run(self, msg: Any) -> Iterator[tuple[int, Any]]:
        """``(block_no, handler(msg, block_no))`` of every block, in block order."""
        self.phase += 1
        line = (json.dumps([self.phase, msg]) + "\n").encode()
        for c in self.children:
            c.got, c.ended = {}, False
            if self.steal:  # before the child reads the phase: this phase (first: a child that sees the
                # new limit sees it too), nothing started, no limit
                self.hints[3 * c.slot + 2] = self.phase
                self.hints[3 * c.slot : 3 * c.slot + 2] = _words(c.blocks[0] - 1, c.blocks[1])
            if c.alive:
                try:
                    _write_all(c.cmd_fd, line)
                except OSError:
                    self._drop(c)
        for b in range(*self.own):
            yield b, self.handler(msg, b)
            self._poll(0.0)  # keep the children's pipes drained: a full pipe would stall them
        for c in self.children:
            lo, hi = c.blocks
            taken: dict[int, Any] = {}
            scan, nxt = lo, hi - 1  # all below scan and all above nxt are in hand
            while c.alive and not c.ended:
                while scan < hi and (scan in c.got or scan in taken):
                    scan += 1
                while nxt >= scan and (nxt in c.got or nxt in taken):
                    nxt -= 1  # the next block to take from this child, from its end backwards
                if nxt < scan:
                    break  # every block of this child is in hand
                if self.steal:
                    self.hints[3 * c.slot + 1] = nxt  # the child stops before nxt ...
                    if self.hints[3 * c.slot] < nxt:  # ... unless it has started it already
                        taken[nxt] = self.handler(msg, nxt)
                        self._poll(0.0)
                        continue
                self._poll(None, only=c)  # nothing left to take: wait for the child's next line
            for b in range(lo, hi):
                if b in c.got:
                    yield b, c.got.pop(b)
                elif b in taken:
                    yield b, taken.pop(b)
                else:  # the child died, erred, or the hints raced: compute it here
                    yield b, self.handler(msg, b)

    def _poll(self, timeout: Optional[float], only: Optional[_Child] = None) -> None:
        live = [c for c in ([only] if only else self.children) if c.alive]
        if not live:
            return
        ready, _, _ = select.select([c.out_fd for c in live], [], [], timeout)
        for c in live:
            if c.out_fd in ready:
                self._read(c)

    def _read(self, c: _Child) -> None:
        try:
            data = os.read(c.out_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # EOF: the child ended before delivering everything of this phase
            self._drop(c)
            return
        c.buf += data
        *lines, c.buf = c.buf.split(b"\n")
        lo, hi = c.blocks
        for raw in lines:
            try:
                phase, b, result = json.loads(raw)
                ok = (isinstance(phase, int) and isinstance(b, int) and phase <= self.phase
                      and (lo <= b < hi or b == -1))
            except (ValueError, TypeError):
                ok = False
            if not ok:
                self._drop(c)
                return
            if phase < self.phase:
                continue  # a late line of an earlier phase (a block this process took meanwhile)
            if b == -1:
                c.ended = True
            else:
                c.got[b] = result

    def _drop(self, c: _Child) -> None:
        """Stop using a child (dead, erring or garbled): the blocks it has not delivered yet are
        computed here (those it delivered in good lines are kept)."""
        c.alive = False
        self._end(c, kill=True)

    # -- cleanup -----------------------------------------------------------------------------

    def _end(self, c: _Child, kill: bool) -> None:
        for attr in ("cmd_fd", "out_fd"):
            fd = getattr(c, attr)
            if fd is not None:
                setattr(c, attr, None)
                try:
                    os.close(fd)
                except OSError:
                    pass
        if c.pid:
            if kill:
                try:
                    os.kill(c.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(c.pid, 0)
            except ChildProcessError:
                pass
            c.pid = 0

    def close(self, kill: bool = True) -> None:
        """End every child (closing its command pipe ends it after its phase) and reap it."""
        for c in self.children:
            self._end(c, kill=kill and c.alive)

    def __enter__(self) -> "BlockProcs":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(kill=True)


def _words(*values: int) -> memoryview:
    """int64 words to copy into the shared hints."""
    return memoryview(array.array("q", values))


def _write_all(fd: Optional[int], data: bytes) -> None:
    if fd is None:
        raise OSError("closed")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _child_main(handler: Callable[[Any, int], Any], blocks: tuple[int, int], cmd_fd: int, out_fd: int,
                hints: memoryview, slot: int) -> None:
    """Run each phase the parent sends over this child's blocks (up to the parent's ``limit``),
    then an end line; end at EOF of the commands."""
    with os.fdopen(cmd_fd, "rb") as cmds:
        for line in cmds:
            phase, msg = json.loads(line)
            for b in range(*blocks):
                hints[3 * slot] = b  # progress: publish first, then look at the limit
                if b >= hints[3 * slot + 1] or hints[3 * slot + 2] > phase:
                    break  # the parent took the rest of the range, or has moved on to the next phase
                if _fault_hook is not None:
                    garbled = _fault_hook(msg, b, hints, slot)
                    if garbled is not None:  # a test's broken line instead of the result
                        _write_all(out_fd, garbled)
                        continue
                _write_all(out_fd, (json.dumps([phase, b, handler(msg, b)]) + "\n").encode())
            _write_all(out_fd, (json.dumps([phase, -1, None]) + "\n").encode())
