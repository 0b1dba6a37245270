"""Forward transforms: logical array -> device layout with zero padding (FORMATS.md §2).

Used only to SYNTHESISE dumps for tests, samples and benchmarks.  Written independently of the
readers in ``core.device_format``: every transform scatters each logical element to the device
index given by the element-wise formula in FORMATS.md / GE ``format_transfer_*.cc`` — no
reshape/transpose tricks copied from the inverse — so a round trip really checks the reader.

``source`` names the axis order of the logical array (default NCHW for 4-D formats, NCDHW for
5-D ones).  Logical arrays of lower rank are expanded the way GE stores them: ``[C]`` ->
``(1,C,1,1)``, ``[N,C]`` -> ``(N,C,1,1)``, ``[C,H,W]`` -> ``(1,C,H,W)``.
"""

from __future__ import annotations

from math import gcd
from typing import Optional

import numpy as np


def default_c0(bits: int) -> int:
    """Cube C0 by element width (GE GetCubeSizeByDataType): 1 byte -> 32, 4 bit -> 64, else 16."""
    if bits <= 4:
        return 64
    return 32 if bits == 8 else 16


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _to_canon(a: np.ndarray, source: str, canon: str) -> np.ndarray:
    """Reorder axes from ``source`` letters to ``canon`` letters, expanding short ranks."""
    if a.ndim < len(canon) and len(canon) == 4:
        s = a.shape
        if a.ndim == 0:
            return a.reshape(1, 1, 1, 1)
        if a.ndim == 1:
            return a.reshape(1, s[0], 1, 1)
        if a.ndim == 2:
            return a.reshape(s[0], s[1], 1, 1)
        return a.reshape(1, s[0], s[1], s[2])
    if a.ndim != len(source):
        raise ValueError(f"array of rank {a.ndim} does not match layout {source}")
    return np.transpose(a, [source.index(ch) for ch in canon])


def nc1hwc0(a: np.ndarray, c0: int, source: str = "NCHW") -> np.ndarray:
    x = _to_canon(a, source, "NCHW")
    n, c, h, w = x.shape
    out = np.zeros((n, _cdiv(c, c0), h, w, c0), dtype=x.dtype)
    i_n, i_c, i_h, i_w = np.indices(x.shape)
    out[i_n, i_c // c0, i_h, i_w, i_c % c0] = x
    return out


def ndc1hwc0(a: np.ndarray, c0: int, source: str = "NCDHW") -> np.ndarray:
    x = _to_canon(a, source, "NCDHW")
    n, c, d, h, w = x.shape
    out = np.zeros((n, d, _cdiv(c, c0), h, w, c0), dtype=x.dtype)
    i_n, i_c, i_d, i_h, i_w = np.indices(x.shape)
    out[i_n, i_d, i_c // c0, i_h, i_w, i_c % c0] = x
    return out


def fractal_z(a: np.ndarray, c0: int, source: str = "NCHW", n0: int = 16) -> np.ndarray:
    """Device ``[C1*H*W, N1, N0, C0]``; element (n,c,h,w) at ``[(c//C0)*H*W + h*W + w, n//N0, n%N0, c%C0]``."""
    x = _to_canon(a, source, "NCHW")
    n, c, h, w = x.shape
    out = np.zeros((_cdiv(c, c0) * h * w, _cdiv(n, n0), n0, c0), dtype=x.dtype)
    i_n, i_c, i_h, i_w = np.indices(x.shape)
    out[(i_c // c0) * h * w + i_h * w + i_w, i_n // n0, i_n % n0, i_c % c0] = x
    return out


def fractal_z_grouped(a: np.ndarray, c0: int, groups: int, source: str = "NCHW", n0: int = 16) -> np.ndarray:
    """Grouped conv weight (N = groups*Cout, C = Cin per group) -> GE grouped FRACTAL_Z.

    Follows GE ``TransFormatWithGroups`` (FORMATS.md §2.4) with explicit loops.
    """
    x = _to_canon(a, source, "NCHW")
    n, cin, h, w = x.shape
    cout = n // groups
    lcm = lambda p, q: p * q // gcd(p, q)  # noqa: E731
    e_mult = min(lcm(lcm(cin, c0) // cin, lcm(cout, n0) // cout), groups)
    cin_opt = _cdiv(e_mult * cin, c0) * c0
    cout_opt = _cdiv(e_mult * cout, n0) * n0
    c1 = cin_opt // c0
    g_blocks = _cdiv(groups, e_mult)
    flat = np.zeros(g_blocks * c1 * h * w * cout_opt * c0, dtype=x.dtype)
    for g in range(groups):
        e = g % e_mult
        for ci in range(cin):
            dst_ci = e * cin + ci
            for hh in range(h):
                for ww in range(w):
                    for co in range(cout):
                        dst_co = e * cout + co
                        idx = ((g // e_mult) * c1 * h * w * cout_opt * c0 + (dst_ci // c0) * h * w * cout_opt * c0
                               + hh * w * cout_opt * c0 + ww * cout_opt * c0 + dst_co * c0 + dst_ci % c0)
                        flat[idx] = x[g * cout + co, ci, hh, ww]
    return flat.reshape(g_blocks * c1 * h * w, cout_opt // n0, n0, c0)


def fractal_z_3d(a: np.ndarray, c0: int, source: str = "NCDHW", n0: int = 16) -> np.ndarray:
    """GE dhwcn->FRACTAL_Z_3D: flat index d*(C1HW N1N0 C0) + c1*(HW N1N0 C0) + h*(W N1N0 C0) + w*(N1N0 C0) + n*C0 + c0."""
    x = _to_canon(a, source, "NCDHW")
    n, c, d, h, w = x.shape
    c1, nn = _cdiv(c, c0), _cdiv(n, n0) * n0
    flat = np.zeros(d * c1 * h * w * nn * c0, dtype=x.dtype)
    i_n, i_c, i_d, i_h, i_w = np.indices(x.shape)
    idx = (i_d * (c1 * h * w * nn * c0) + (i_c // c0) * (h * w * nn * c0) + i_h * (w * nn * c0)
           + i_w * (nn * c0) + i_n * c0 + i_c % c0)
    flat[idx] = x
    return flat.reshape(d * c1 * h * w, nn // n0, n0, c0)


def fractal_nz(a: np.ndarray, c0: int, h0: int = 16) -> np.ndarray:
    """Logical ``[..., H, W]`` -> ``[..., ceil(W/W0), ceil(H/16), 16, W0]``; 1-D ``[W]`` uses H = 1."""
    x = a.reshape(1, a.shape[0]) if a.ndim == 1 else (a.reshape(1, 1) if a.ndim == 0 else a)
    *batch, h, w = x.shape
    xb = x.reshape(-1, h, w)
    out = np.zeros((xb.shape[0], _cdiv(w, c0), _cdiv(h, h0), h0, c0), dtype=x.dtype)
    i_b, i_h, i_w = np.indices(xb.shape)
    out[i_b, i_w // c0, i_h // h0, i_h % h0, i_w % c0] = xb
    return out.reshape(tuple(batch) + out.shape[1:])


def c1hwncoc0(a: np.ndarray, c0: int, source: str = "NCHW") -> np.ndarray:
    """HWCN element (h,w,c,n) at ``[c//C0, h, w, n, c%C0, c%C0]``; off-diagonal stays zero."""
    x = _to_canon(a, source, "NCHW")
    n, c, h, w = x.shape
    out = np.zeros((_cdiv(c, c0), h, w, n, c0, c0), dtype=x.dtype)
    i_n, i_c, i_h, i_w = np.indices(x.shape)
    out[i_c // c0, i_h, i_w, i_n, i_c % c0, i_c % c0] = x
    return out


def to_device(a: np.ndarray, fmt: str, c0: Optional[int] = None, source: Optional[str] = None,
              groups: int = 1, itemsize_bits: Optional[int] = None) -> np.ndarray:
    """Logical array -> device-layout array (its shape is the device shape).

    ``c0`` defaults from the element width (``itemsize_bits`` or ``a.dtype``); ``*_C04`` formats use 4.
    Plain and unknown formats are returned unchanged.
    """
    f = fmt.upper()
    if f.startswith("FORMAT_"):
        f = f[7:]
    if c0 is None:
        c0 = 4 if f.endswith("_C04") else default_c0(itemsize_bits or a.dtype.itemsize * 8)
    if f in ("NC1HWC0", "NC1HWC0_C04"):
        return nc1hwc0(a, c0, source or "NCHW")
    if f == "NDC1HWC0":
        return ndc1hwc0(a, c0, source or "NCDHW")
    if f in ("FRACTAL_Z", "FRACTAL_Z_C04"):
        if groups > 1:
            return fractal_z_grouped(a, c0, groups, source or "NCHW")
        return fractal_z(a, c0, source or "NCHW")
    if f == "FRACTAL_Z_3D":
        return fractal_z_3d(a, c0, source or "NCDHW")
    if f == "FRACTAL_NZ" or f.startswith("FRACTAL_NZ_C0_"):
        return fractal_nz(a, c0)
    if f == "C1HWNCOC0":
        return c1hwncoc0(a, c0, source or "NCHW")
    return a
