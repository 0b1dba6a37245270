"""Peak memory of reading a big weight-layout tensor in chunks (issue 30): a child process walks every chunk of
a FRACTAL_Z / FRACTAL_Z_3D / C1HWNCoC0 tensor of 200-300 MB and reports its own peak RSS (VmHWM), which must stay far
below the tensor (the whole conversion held the device array and its converted copy: over twice the size).
The payloads are sparse files (zeros cost no disk; what is read and converted is the same work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dumpscope.core.formats.device_format import ceil_div
from synth.cann_writer import write_sparse_dump

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB, sparse files: Linux")

_CHILD = r"""
import json, sys
import numpy as np
from dumpscope.core.formats.cann_dump import read_header
from dumpscope.core.formats.device_chunks import device_chunks
t = read_header(sys.argv[1]).outputs[0]
made = device_chunks(sys.argv[1], t.offset, t.format, t.shape, t.original_shape, np.dtype("float16"),
                     chunk_bytes=4 << 20)
count = biggest = 0
if made is not None:
    for chunk in made[0]():
        count += chunk.size
        biggest = max(biggest, chunk.nbytes)
# VmHWM, not ru_maxrss: ru_maxrss carries the RSS of the process that forked this one (a big test worker)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"streamed": made is not None, "count": count, "biggest": biggest, "peak_mb": hwm / 1024}))
"""


def _fz(n, c, h, w):
    return (ceil_div(c, 16) * h * w, ceil_div(n, 16), 16, 16), (n, c, h, w)


CASES = {  # (device shape, original shape): a 3x3 conv weight, a 3-D one, a C1HWNCoC0 (16x its logical size)
    "FRACTAL_Z": _fz(4096, 4096, 3, 3),
    "FRACTAL_Z_3D": ((3 * 128 * 3 * 3, 128, 16, 16), (2048, 2048, 3, 3, 3)),
    "C1HWNCoC0": ((64, 3, 3, 1024, 16, 16), (1024, 1024, 3, 3)),
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_peak_rss_of_a_big_weight_stays_far_below_its_size(tmp_path, fmt):
    dev, orig = CASES[fmt]
    path = tmp_path / "Conv2D.w.1.2.1718260502000000"
    size = write_sparse_dump(path, "w", fmt, dev, orig)
    assert size >= 200 << 20
    env = dict(os.environ, DUMPSCOPE_WORKERS="1")
    res = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["streamed"] and got["count"] == int(np.prod(orig))
    assert got["biggest"] <= 4 << 20
    # numpy and the package take ~30-40 MB; chunks of 4 MiB add a few times that; whole: > 2x the tensor
    assert got["peak_mb"] < min(120, size / (1 << 20) / 2), (got, size >> 20)
