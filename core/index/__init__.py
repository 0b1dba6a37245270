"""The dump index: every tensor record of a tree in one SQLite file, built, finalised, locked and checked."""
