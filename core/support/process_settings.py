"""Process-wide settings a process takes when it ends with its command (the console script, the explorer's
index builder child), and that a longer-lived caller of the same code (a test run, an app embedding the
engine) does not get."""

from __future__ import annotations

import os

from dumpscope.core.support import gc_pause


def one_shot() -> None:
    """Called first thing by a one-shot process's entry, before anything imports numpy.

    * OpenBLAS's threads: one.  dumpscope never makes a threaded BLAS call (its dot products are cut into
      single-threaded rows, ``compare.metrics._dot``; its parallelism is the process pool), yet OpenBLAS
      starts a thread per further core when numpy is imported, and that thread spins idle for its
      timeout: ~0.09 s of a core in every command (10 % of a cold 20k-file ``summary``).  A value the
      user set is kept (and children started from here inherit it).
    * pool forks freeze the heap first (``gc_pause.freeze_before_forks``).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc_pause.freeze_before_forks()
