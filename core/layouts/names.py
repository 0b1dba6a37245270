"""Entries the walker left out: names that are not valid UTF-8, and symlinks leaving PATH.

Such a name cannot be stored in the index, printed or put in JSON; rather than let one odd
file break the whole tree, the walker leaves it out (``DirListing.bad_names``) and this
layout names it under ``problems``.  A symlink whose target lies outside PATH is not followed
unless ``--follow-links`` is given (``DirListing.outside_links``): named here too.
"""

from __future__ import annotations

import os
from typing import Iterable

from dumpscope.core.layouts.base import DirListing, Item, Layout
from dumpscope.core.model import Problem
from dumpscope.core.layouts.walk import OUTSIDE_LINK


class BadNamesLayout(Layout):
    name = "file_names"
    title = "entries whose names are not valid UTF-8"

    def scan_dir(self, listing: DirListing) -> Iterable[Item]:
        for shown in listing.bad_names:
            yield Problem(os.path.join(listing.dirpath, shown),
                          "name is not valid UTF-8: not indexed (rename it to read it)")
        for name in listing.outside_links:
            yield Problem(os.path.join(listing.dirpath, name), OUTSIDE_LINK)
