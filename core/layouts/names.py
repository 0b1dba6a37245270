"""Entries the walker could not index because their names are not valid UTF-8.

Such a name cannot be stored in the index, printed or put in JSON; rather than let one odd
file break the whole tree, the walker leaves it out (``DirListing.bad_names``) and this
layout names it under ``problems``.
"""

from __future__ import annotations

import os
from typing import Iterable

from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.model import Problem


class BadNamesLayout(Layout):
    name = "file_names"
    title = "entries whose names are not valid UTF-8"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        for shown in listing.bad_names:
            yield Problem(os.path.join(listing.dirpath, shown),
                          "name is not valid UTF-8: not indexed (rename it to read it)")
