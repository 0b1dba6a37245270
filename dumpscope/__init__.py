"""dumpscope: a terminal explorer for Ascend NPU operator dumps.

The engine lives in ``dumpscope.core`` (source folder ``core/``) and the Textual app and
command line in ``dumpscope.tui`` (source folder ``tui/``).
"""

__version__ = "0.1.0"
