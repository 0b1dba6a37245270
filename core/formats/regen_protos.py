"""Regenerate every ``*_pb2.py`` beside its ``.proto`` in ``core/formats`` and ``core/graphs``.

Run ``python -m dumpscope.core.formats.regen_protos`` (needs the dev extra ``grpcio-tools``).
Generated modules are committed, so users never need protoc.  Imports between our own protos
are rewritten to package-relative form because the generated absolute ``import x_pb2``
would not resolve inside the ``dumpscope.core.*`` packages.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_DIRS = ("formats", "graphs")


def _core_dir() -> Path:
    return Path(__file__).resolve().parent.parent


def find_protos(core: Path | None = None) -> list[Path]:
    """All ``.proto`` files under the proto-owning subpackages, sorted."""
    core = core or _core_dir()
    out: list[Path] = []
    for sub in PROTO_DIRS:
        out.extend(sorted((core / sub).glob("*.proto")))
    return out


def _relativize_imports(pb2: Path, siblings: set[str]) -> None:
    text = pb2.read_text(encoding="utf-8")

    def fix(m: re.Match[str]) -> str:
        mod = m.group(1)
        return f"from . import {mod} as" if mod in siblings else m.group(0)

    new = re.sub(r"^import (\w+_pb2) as", fix, text, flags=re.M)
    if new != text:
        pb2.write_text(new, encoding="utf-8")


def _drop_version_gate(pb2: Path) -> None:
    """Remove the gencode's runtime version check.

    New protoc stamps its own version and refuses older protobuf runtimes, but the code it
    emits only uses the descriptor-pool/builder API present since protobuf 4.21.  NPU hosts
    often pin older protobuf for MindSpore or TensorFlow, so the gate is dropped.
    """
    text = pb2.read_text(encoding="utf-8")
    text = re.sub(r"^from google\.protobuf import runtime_version as _runtime_version\n", "", text, flags=re.M)
    text = re.sub(r"^_runtime_version\.ValidateProtobufRuntimeVersion\([^)]*\)\n", "", text, flags=re.M | re.S)
    pb2.write_text(text, encoding="utf-8")


def regenerate(core: Path | None = None) -> list[Path]:
    """Run protoc for each proto; return the generated module paths."""
    from grpc_tools import protoc  # dev-only dependency
    import grpc_tools

    wkt = str(Path(grpc_tools.__file__).parent / "_proto")
    generated: list[Path] = []
    for proto in find_protos(core):
        folder = proto.parent
        rc = protoc.main(["grpc_tools.protoc", f"-I{folder}", f"-I{wkt}", f"--python_out={folder}", str(proto)])
        if rc != 0:
            raise RuntimeError(f"{proto}: protoc failed with exit code {rc}")
        pb2 = folder / (proto.stem + "_pb2.py")
        siblings = {p.stem + "_pb2" for p in folder.glob("*.proto")}
        _relativize_imports(pb2, siblings)
        _drop_version_gate(pb2)
        generated.append(pb2)
    return generated


def main() -> int:
    for path in regenerate():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
