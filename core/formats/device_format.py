"""Device layouts -> logical layout (FORMATS.md §2).

"Logical layout" means: the array has exactly ``original_shape`` (padding sliced away), and its
axes are in the order named by ``target``.  ``target`` defaults to the framework's usual origin
format: NCHW for 4-D formats (NC1HWC0, FRACTAL_Z, C1HWNCoC0 — so FRACTAL_Z weights come back as
NCHW), NCDHW for 5-D ones (NDC1HWC0, FRACTAL_Z_3D), ND for FRACTAL_NZ.  The dump header does not
record the origin format, so a caller that knows it (graph ``origin_format``) passes e.g.
``target="NHWC"`` and ``original_shape`` is then read as N,H,W,C.

C0 (and N0/H0) are taken from the device shape (last dims), never from the dtype: the dump drops
the C0 bits of ``ge::Format`` (§1.3, §2.1).  Plain formats (ND, NCHW, NHWC, HWCN, NCDHW, …) need
no conversion.  Original shapes of rank < 4 under 4-D device formats (e.g. a bias ``[C]`` stored
as NC1HWC0 ``[1, C1, 1, 1, C0]``) are expanded to the first 4-D candidate consistent with the
device shape (``[C]`` -> ``(1,C,1,1)``, ``[N,C]`` -> ``(N,C,1,1)``, ``[C,H,W]`` -> ``(1,C,H,W)`` …)
and the result is reshaped back to ``original_shape``.
"""

from __future__ import annotations

from math import gcd, prod
from typing import Optional, Sequence

import numpy as np


class DeviceFormatError(ValueError):
    """The device layout cannot be converted (unknown format, inconsistent shapes, …)."""


_FORMAT_ROWS = [
    "NCHW", "NHWC", "ND", "NC1HWC0", "FRACTAL_Z", "NC1C0HWPAD", "NHWC1C0", "FSR_NCHW", "FRACTAL_DECONV",
    "C1HWNC0", "FRACTAL_DECONV_TRANSPOSE", "FRACTAL_DECONV_SP_STRIDE_TRANS", "NC1HWC0_C04", "FRACTAL_Z_C04",
    "CHWN", "FRACTAL_DECONV_SP_STRIDE8_TRANS", "HWCN", "NC1KHKWHWC0", "BN_WEIGHT", "FILTER_HWCK",
    "HASHTABLE_LOOKUP_LOOKUPS", "HASHTABLE_LOOKUP_KEYS", "HASHTABLE_LOOKUP_VALUE", "HASHTABLE_LOOKUP_OUTPUT",
    "HASHTABLE_LOOKUP_HITS", "C1HWNCoC0", "MD", "NDHWC", "FRACTAL_ZZ", "FRACTAL_NZ", "NCDHW", "DHWCN",
    "NDC1HWC0", "FRACTAL_Z_3D", "CN", "NC", "DHWNC", "FRACTAL_Z_3D_TRANSPOSE", "FRACTAL_ZN_LSTM",
    "FRACTAL_Z_G", "RESERVED", "ALL", "NULL", "ND_RNN_BIAS", "FRACTAL_ZN_RNN", "YUV", "YUV_A", "NCL",
    "FRACTAL_Z_WINO", "C1HWC0", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32", "FRACTAL_NZ_C0_2", "FRACTAL_NZ_C0_4",
    "FRACTAL_NZ_C0_8",
]
#: Proto ``OutputFormat`` / ``ge::Format`` primary-format numbering: code -> name (no FORMAT_ prefix).
FORMAT_NAMES: dict[int, str] = dict(enumerate(_FORMAT_ROWS))
FORMAT_NAMES[255] = "MAX"
FORMAT_CODE_OF: dict[str, int] = {name: code for code, name in FORMAT_NAMES.items()}
_UPPER = {name.upper(): name for name in FORMAT_CODE_OF}
#: MindSpore kOpFormat spellings that differ from the GE names.
_MS_ALIASES = {"FRACZ": "FRACTAL_Z", "FRACNZ": "FRACTAL_NZ", "FRACZN_LSTM": "FRACTAL_ZN_LSTM"}

#: Formats whose stored order is the logical order (no conversion needed).
PLAIN_FORMATS = frozenset({
    "ND", "NCHW", "NHWC", "HWCN", "CHWN", "NCDHW", "NDHWC", "DHWCN", "DHWNC", "NC", "CN", "NCL", "MD",
    "DefaultFormat", "RESERVED", "ALL", "NULL", "MAX",
})
_DEFAULT_TARGET = {"NC1HWC0": "NCHW", "FRACTAL_Z": "NCHW", "C1HWNCoC0": "NCHW",
                   "NDC1HWC0": "NCDHW", "FRACTAL_Z_3D": "NCDHW", "FRACTAL_NZ": "ND"}
_TARGETS_4D = {"NCHW": "NCHW", "NHWC": "NHWC", "HWCN": "HWCN", "CHWN": "CHWN"}
_TARGETS_5D = {"NCDHW": "NCDHW", "NDHWC": "NDHWC", "DHWCN": "DHWCN", "DHWNC": "DHWNC"}


def format_name(code: int) -> str:
    """Format name for a proto/ge format code; ``"UNKNOWN(N)"`` for codes not in the table."""
    name = FORMAT_NAMES.get(code)
    return name if name is not None else f"UNKNOWN({code})"


def canonical_format(fmt: str) -> str:
    """Canonical spelling: strips ``FORMAT_``, fixes case (``nc1hwc0`` -> ``NC1HWC0``).

    MindSpore's ``DefaultFormat`` is kept as is; unknown names are returned upper-cased.
    """
    f = fmt.strip()
    if f.upper().startswith("FORMAT_"):
        f = f[7:]
    if f.lower() in ("defaultformat", "default"):
        return "DefaultFormat"
    up = f.upper()
    return _UPPER.get(up) or _MS_ALIASES.get(up, up)


def conversion_kind(fmt: str) -> str:
    """Map a canonical format to the converter family that handles it."""
    if fmt in ("NC1HWC0", "NC1HWC0_C04"):
        return "NC1HWC0"
    if fmt in ("FRACTAL_Z", "FRACTAL_Z_C04", "FRACTAL_Z_G"):
        return "FRACTAL_Z"
    if fmt == "FRACTAL_NZ" or fmt.startswith("FRACTAL_NZ_C0_"):
        return "FRACTAL_NZ"
    if fmt in ("NDC1HWC0", "FRACTAL_Z_3D", "C1HWNCoC0"):
        return fmt
    if fmt in PLAIN_FORMATS:
        return "PLAIN"
    return "UNKNOWN"


# ---------------------------------------------------------------------------------------------
# logical dims resolution


def _perm_from(layout: str, canon: str) -> tuple[int, ...]:
    """Axis permutation taking an array in ``canon`` order to ``layout`` order."""
    return tuple(canon.index(ch) for ch in layout)


def _dims_in(layout: str, shape: Sequence[int], canon: str) -> dict[str, int]:
    return dict(zip(layout, shape))


def _resolve_target(kind: str, target: Optional[str], rank: int) -> str:
    tgt = canonical_format(target) if target else _DEFAULT_TARGET[kind]
    table = _TARGETS_4D if rank == 4 else _TARGETS_5D
    if tgt not in table:
        raise DeviceFormatError(f"target layout {tgt} not supported for {kind} (use one of {sorted(table)})")
    return tgt


_EXPAND_4D = {  # NCHW candidates for a short original shape, first consistent one wins
    0: [lambda s: (1, 1, 1, 1)],
    1: [lambda s: (1, s[0], 1, 1), lambda s: (1, 1, 1, s[0]), lambda s: (s[0], 1, 1, 1)],
    2: [lambda s: (s[0], s[1], 1, 1), lambda s: (1, 1, s[0], s[1]), lambda s: (1, s[0], s[1], 1),
        lambda s: (1, s[0], 1, s[1])],
    3: [lambda s: (1, s[0], s[1], s[2]), lambda s: (s[0], s[1], s[2], 1), lambda s: (s[0], 1, s[1], s[2])],
}


def logical_candidates(original: tuple[int, ...], tgt: str, canon: str) -> list[tuple[int, ...]]:
    """Logical dims in ``canon`` order for the original shape (one, or several expansions)."""
    rank = len(canon)
    if len(original) == rank:
        d = _dims_in(tgt, original, canon)
        return [tuple(d[ch] for ch in canon)]
    if rank == 4 and len(original) < 4:
        return [f(original) for f in _EXPAND_4D[len(original)]]
    if rank == 5 and len(original) < 5:
        four = [f(original) for f in _EXPAND_4D.get(len(original), [])] if len(original) < 4 else [original]
        # NCHW -> NCDHW with D = 1, plus D-leading variants for 4-D originals
        out = [(n, c, 1, h, w) for n, c, h, w in four]
        if len(original) == 4:
            out.append((1,) + tuple(original))
        return out
    raise DeviceFormatError(f"original shape {list(original)} has rank {len(original)}, expected {rank}")


def _finish(canon_arr: np.ndarray, canon: str, tgt: str, original: tuple[int, ...]) -> np.ndarray:
    out = canon_arr.transpose(_perm_from(tgt, canon)) if tgt != canon else canon_arr
    if original and out.shape != original:
        out = out.reshape(original)
    return np.ascontiguousarray(out).reshape(out.shape)  # a 0-d tensor stays 0-d


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` in integers: the number of device blocks a logical dim fills."""
    return -(-a // b)


def fit_fractal_z(original: tuple[int, ...], tgt: str, dev: Sequence[int]) -> Optional[tuple[int, ...]]:
    """NCHW dims of an ungrouped FRACTAL_Z ``(C1*H*W, N1, N0, C0)`` weight of ``original`` shape, else None."""
    c1hw, n1, n0, c0 = dev
    return next((d for d in logical_candidates(original, tgt, "NCHW")
                 if d[2] * d[3] > 0 and c1hw % (d[2] * d[3]) == 0
                 and ceil_div(d[1], c0) == c1hw // (d[2] * d[3]) and ceil_div(d[0], n0) == n1), None)


def fit_fractal_z_3d(original: tuple[int, ...], tgt: str, dev: Sequence[int]) -> Optional[tuple[int, ...]]:
    """NCDHW dims of a FRACTAL_Z_3D ``(D*C1*H*W, N1, N0, C0)`` weight of ``original`` shape, else None."""
    dc1hw, n1, n0, c0 = dev
    return next((q for q in logical_candidates(original, tgt, "NCDHW")
                 if q[2] * q[3] * q[4] > 0 and dc1hw % (q[2] * q[3] * q[4]) == 0
                 and ceil_div(q[1], c0) == dc1hw // (q[2] * q[3] * q[4]) and ceil_div(q[0], n0) == n1), None)


def fit_c1hwncoc0(original: tuple[int, ...], tgt: str, dev: Sequence[int]) -> Optional[tuple[int, ...]]:
    """NCHW dims of a C1HWNCoC0 ``(C1, H, W, N, Co, C0)`` tensor of ``original`` shape (padded C when
    none is recorded), else None."""
    c1, h, w, n, _, c0 = dev
    if not original:
        return (n, c1 * c0, h, w)
    return next((d for d in logical_candidates(original, tgt, "NCHW")
                 if d[0] == n and d[2] == h and d[3] == w and ceil_div(d[1], c0) == c1), None)


# ---------------------------------------------------------------------------------------------
# converters: device array (already reshaped to device_shape) -> logical


def _nc1hwc0(x: np.ndarray, original: tuple[int, ...], tgt: str) -> np.ndarray:
    if x.ndim != 5:
        raise DeviceFormatError(f"NC1HWC0 needs a 5-D device shape, got {list(x.shape)}")
    n, c1, h, w, c0 = x.shape
    canon = "NCHW"
    if original:
        dims = next((d for d in logical_candidates(original, tgt, canon)
                     if d[0] == n and d[2] == h and d[3] == w and ceil_div(d[1], c0) == c1), None)
        if dims is None:
            raise DeviceFormatError(f"original shape {list(original)} ({tgt}) does not fit NC1HWC0 {list(x.shape)}")
        c = dims[1]
    else:
        c = c1 * c0
    full = x.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :c]
    return _finish(full, canon, tgt, original)


def _ndc1hwc0(x: np.ndarray, original: tuple[int, ...], tgt: str) -> np.ndarray:
    if x.ndim != 6:
        raise DeviceFormatError(f"NDC1HWC0 needs a 6-D device shape, got {list(x.shape)}")
    n, d, c1, h, w, c0 = x.shape
    canon = "NCDHW"
    if original:
        dims = next((q for q in logical_candidates(original, tgt, canon)
                     if q[0] == n and q[2] == d and q[3] == h and q[4] == w and ceil_div(q[1], c0) == c1), None)
        if dims is None:
            raise DeviceFormatError(f"original shape {list(original)} ({tgt}) does not fit NDC1HWC0 {list(x.shape)}")
        c = dims[1]
    else:
        c = c1 * c0
    full = x.transpose(0, 2, 5, 1, 3, 4).reshape(n, c1 * c0, d, h, w)[:, :c]
    return _finish(full, canon, tgt, original)


def _fractal_z(x: np.ndarray, original: tuple[int, ...], tgt: str, groups: int) -> np.ndarray:
    if x.ndim != 4:
        raise DeviceFormatError(f"FRACTAL_Z needs a 4-D device shape, got {list(x.shape)}")
    if not original:
        raise DeviceFormatError("FRACTAL_Z needs original_shape (H and W are not recoverable from the device shape)")
    c1hw, n1, n0, c0 = x.shape
    canon = "NCHW"
    if groups > 1:
        dims_list = logical_candidates(original, tgt, canon)
        return _finish(_fractal_z_grouped(x, dims_list[0], groups), canon, tgt, original)
    dims = fit_fractal_z(original, tgt, x.shape)
    if dims is None:
        raise DeviceFormatError(f"original shape {list(original)} ({tgt}) does not fit FRACTAL_Z {list(x.shape)}")
    n, c, h, w = dims
    c1 = c1hw // (h * w)
    full = x.reshape(c1, h, w, n1, n0, c0).transpose(3, 4, 0, 5, 1, 2).reshape(n1 * n0, c1 * c0, h, w)
    return _finish(full[:n, :c], canon, tgt, original)


def grouped_fz_params(cout: int, cin: int, groups: int, c0: int, n0: int = 16) -> tuple[int, int, int, int]:
    """GE grouped FRACTAL_Z parameters for per-group ``cout``/``cin``: (e_mult, cin_opt, cout_opt, G).

    ``e_mult = min(lcm(lcm(Cin,C0)/Cin, lcm(Cout,16)/Cout), groups)`` groups are packed together
    into one block-diagonal cube (GE ``format_transfer_fractal_z.cc``, FORMATS.md §2.4).
    """
    def lcm(a: int, b: int) -> int:
        return a * b // gcd(a, b)

    e_mult = min(lcm(lcm(cin, c0) // cin, lcm(cout, n0) // cout), groups)
    cin_opt = ceil_div(e_mult * cin, c0) * c0
    cout_opt = ceil_div(e_mult * cout, n0) * n0
    return e_mult, cin_opt, cout_opt, ceil_div(groups, e_mult)


def _fractal_z_grouped(x: np.ndarray, dims: tuple[int, ...], groups: int) -> np.ndarray:
    n, c, h, w = dims
    c0, n0 = x.shape[3], x.shape[2]
    if n % groups:
        raise DeviceFormatError(f"grouped FRACTAL_Z: N={n} is not divisible by groups={groups}")
    cout = n // groups
    if cout <= 0 or c <= 0 or c0 <= 0 or n0 <= 0:  # (the packing's least common multiples divide by them)
        raise DeviceFormatError(f"grouped FRACTAL_Z: original shape {list(dims)} with groups={groups} holds no "
                                f"channels to pack")
    e_mult, cin_opt, cout_opt, g_blocks = grouped_fz_params(cout, c, groups, c0, n0)
    c1 = cin_opt // c0
    want = (g_blocks * c1 * h * w, cout_opt // n0, n0, c0)
    if tuple(x.shape) != want:
        raise DeviceFormatError(f"grouped FRACTAL_Z (groups={groups}) device shape {list(x.shape)} "
                                f"!= expected {list(want)} for NCHW {list(dims)}")
    g, nn, cc, hh, ww = np.indices((groups, cout, c, h, w), sparse=True)
    e = g % e_mult
    ci = e * c + cc
    co = e * cout + nn
    idx = ((((g // e_mult) * c1 + ci // c0) * h + hh) * w + ww) * cout_opt * c0 + co * c0 + ci % c0
    return x.reshape(-1)[idx].reshape(n, c, h, w)


def _fractal_z_3d(x: np.ndarray, original: tuple[int, ...], tgt: str) -> np.ndarray:
    if x.ndim != 4:
        raise DeviceFormatError(f"FRACTAL_Z_3D needs a 4-D device shape, got {list(x.shape)}")
    if not original:
        raise DeviceFormatError("FRACTAL_Z_3D needs original_shape (D, H, W are not recoverable)")
    dc1hw, n1, n0, c0 = x.shape
    canon = "NCDHW"
    dims = fit_fractal_z_3d(original, tgt, x.shape)
    if dims is None:
        raise DeviceFormatError(f"original shape {list(original)} ({tgt}) does not fit FRACTAL_Z_3D {list(x.shape)}")
    n, c, d, h, w = dims
    c1 = dc1hw // (d * h * w)
    dhwcn = (x.reshape(d, c1, h, w, n1 * n0, c0).transpose(0, 2, 3, 1, 5, 4)
             .reshape(d, h, w, c1 * c0, n1 * n0)[..., :c, :n])
    return _finish(dhwcn.transpose(4, 3, 0, 1, 2), canon, tgt, original)


def _fractal_nz(x: np.ndarray, original: tuple[int, ...]) -> np.ndarray:
    if x.ndim < 4:
        raise DeviceFormatError(f"FRACTAL_NZ needs a device shape of rank >= 4, got {list(x.shape)}")
    *batch, w1, h1, h0, w0 = x.shape
    b = prod(batch)
    if original:
        if len(original) == 1:
            hh, ww = 1, original[0]
        else:
            hh, ww = original[-2], original[-1]
        ob = prod(original[:-2]) if len(original) > 2 else 1
        if ob != b or ceil_div(ww, w0) != w1 or ceil_div(hh, h0) != h1:
            raise DeviceFormatError(f"original shape {list(original)} does not fit FRACTAL_NZ {list(x.shape)}")
    else:
        hh, ww = h1 * h0, w1 * w0
    full = x.reshape(b, w1, h1, h0, w0).transpose(0, 2, 3, 1, 4).reshape(b, h1 * h0, w1 * w0)[:, :hh, :ww]
    shape = original if original else tuple(batch) + (hh, ww)
    return np.ascontiguousarray(full).reshape(shape)


def _c1hwncoc0(x: np.ndarray, original: tuple[int, ...], tgt: str) -> np.ndarray:
    if x.ndim != 6 or x.shape[4] != x.shape[5]:
        raise DeviceFormatError(f"C1HWNCoC0 needs a 6-D device shape with Co == C0, got {list(x.shape)}")
    c1, h, w, n, _, c0 = x.shape
    canon = "NCHW"
    dims = fit_c1hwncoc0(original, tgt, x.shape)
    if dims is None:
        raise DeviceFormatError(f"original shape {list(original)} ({tgt}) does not fit C1HWNCoC0 {list(x.shape)}")
    c = dims[1]
    diag = np.diagonal(x, axis1=4, axis2=5)  # (C1, H, W, N, C0)
    hwcn = diag.transpose(1, 2, 0, 4, 3).reshape(h, w, c1 * c0, n)[:, :, :c, :]
    return _finish(hwcn.transpose(3, 2, 0, 1), canon, tgt, original)


# ---------------------------------------------------------------------------------------------
# public API


def to_logical(data: np.ndarray, fmt: str, device_shape: Sequence[int], original_shape: Sequence[int],
               sub_format: int = 0, target: Optional[str] = None) -> np.ndarray:
    """Convert a decoded device-layout array (flat or shaped) to the logical layout.

    ``original_shape`` empty means "not recorded": plain formats then keep the device shape,
    5-D/6-D formats keep their padded channel count, FRACTAL_Z/_3D raise (H, W unknowable).
    ``sub_format > 1`` on FRACTAL_Z is the group count of a grouped convolution weight.
    Raises ``DeviceFormatError`` with a one-line reason.
    """
    dev = tuple(int(d) for d in device_shape)
    orig = tuple(int(d) for d in original_shape)
    if any(d < 0 for d in dev + orig):  # e.g. -1 of a dynamic shape recorded unresolved
        raise DeviceFormatError(f"negative dimension in device shape {list(dev)} / original shape {list(orig)}")
    need = prod(dev)
    flat = np.asarray(data).reshape(-1)
    if flat.size < need:
        raise DeviceFormatError(f"{flat.size} elements cannot fill device shape {list(dev)} ({need} elements)")
    flat = flat[:need]
    canon_fmt = canonical_format(fmt)
    kind = conversion_kind(canon_fmt)
    if kind == "PLAIN" or kind == "UNKNOWN":
        if not orig:
            return flat.reshape(dev)
        if prod(orig) == need:
            return flat.reshape(orig)
        if kind == "UNKNOWN":
            raise DeviceFormatError(f"unsupported device format {canon_fmt} (device shape {list(dev)}, "
                                    f"original shape {list(orig)})")
        raise DeviceFormatError(f"{canon_fmt}: original shape {list(orig)} has {prod(orig)} elements, "
                                f"device shape {list(dev)} has {need}")
    x = flat.reshape(dev)
    if need == 0:  # an empty tensor: nothing to unpack (and a zero block size would divide by zero)
        if not orig:
            return x
        if prod(orig) == 0:
            return np.zeros(orig, dtype=flat.dtype)
        raise DeviceFormatError(f"{canon_fmt}: device shape {list(dev)} is empty, original shape {list(orig)} is not")
    if kind == "FRACTAL_NZ":
        return _fractal_nz(x, orig)
    rank = 5 if kind in ("NDC1HWC0", "FRACTAL_Z_3D") else 4
    tgt = _resolve_target(kind, target, rank)
    if kind == "NC1HWC0":
        return _nc1hwc0(x, orig, tgt)
    if kind == "NDC1HWC0":
        return _ndc1hwc0(x, orig, tgt)
    if kind == "FRACTAL_Z":
        return _fractal_z(x, orig, tgt, int(sub_format) if sub_format else 1)
    if kind == "FRACTAL_Z_3D":
        return _fractal_z_3d(x, orig, tgt)
    return _c1hwncoc0(x, orig, tgt)


def logical_shape(fmt: str, device_shape: Sequence[int], original_shape: Sequence[int],
                  target: Optional[str] = None) -> tuple[int, ...]:
    """The shape ``to_logical`` would return, without touching data (for indexing)."""
    dev = tuple(int(d) for d in device_shape)
    orig = tuple(int(d) for d in original_shape)
    if orig:
        return orig
    kind = conversion_kind(canonical_format(fmt))
    if kind in ("NC1HWC0", "C1HWNCoC0", "NDC1HWC0") and dev:
        tgt = _resolve_target(kind, target, 5 if kind == "NDC1HWC0" else 4)
        if kind == "NC1HWC0" and len(dev) == 5:
            canon, dims = "NCHW", (dev[0], dev[1] * dev[4], dev[2], dev[3])
        elif kind == "C1HWNCoC0" and len(dev) == 6:
            canon, dims = "NCHW", (dev[3], dev[0] * dev[5], dev[1], dev[2])
        elif kind == "NDC1HWC0" and len(dev) == 6:
            canon, dims = "NCDHW", (dev[0], dev[2] * dev[5], dev[1], dev[3], dev[4])
        else:
            return dev
        return tuple(dims[canon.index(ch)] for ch in tgt)
    if kind == "FRACTAL_NZ" and len(dev) >= 4:
        return dev[:-4] + (dev[-3] * dev[-2], dev[-4] * dev[-1])
    return dev
