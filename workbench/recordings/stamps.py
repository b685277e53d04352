"""Time stamps as integer nanoseconds: decimal text read exactly, seconds since an origin.

A recording's clock is often the epoch (ROS stamps: seconds since 1970, about
1.7e9 s today). In float64 such a time keeps about 2.4e-7 s, so stamps parsed
as float seconds are rounded, and rounded differently from the same stamps
read as ``sec, nanosec`` from a bag. Time stamps are therefore kept as
integer nanoseconds (int64: ±292 years) until they are made relative to the
recording's first stamp (:func:`seconds_since`), which turns them into the
float seconds nearest the exact ones for recordings up to 2**53 ns (104 days)
long: one time stamp, read from a CSV cell or from a bag, gives one float.

:func:`decimal_ns` reads decimal text (``1732712345.123456789``, ``-2.5``,
``1.5e-05``) into integers exactly, rounded to the nearest nanosecond
(halves away from zero) when it has more digits, with NumPy's string
functions on blocks of rows (no Python per row; numpy >= 2.3).
"""

from __future__ import annotations

import numpy as np

from workbench.lie import Array

NS_PER_S = 1_000_000_000
UNIT_DIGITS = {"s": 9, "ms": 6, "us": 3, "ns": 0}  # a unit's decimal exponent to nanoseconds
TEXT_WIDTH = 40  # bytes per time cell read as text; longer cells are read as floats
_BLOCK = 1 << 15  # rows per block of the parser (bounds its temporary strings)
LARGEST_NS = 9_000_000_000_000_000_000  # stamps stay below (the int64 limit is 9.22e18)
_POWERS = 10 ** np.arange(19, dtype=np.int64)


def decimal_ns(text: np.ndarray, digits: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Decimal numbers as integers: ``round(value * 10**digits)`` of each entry of ``text``.

    ``text`` is a 1-D bytes array (``S`` dtype, as ``np.loadtxt(..., dtype="S40")`` gives),
    ``digits`` the decimal exponent from the text's unit to nanoseconds
    (:data:`UNIT_DIGITS`: 9 for seconds). Accepted: blanks around, an optional sign, digits
    with at most one decimal point, an optional exponent of up to three digits (``e-05``);
    more digits than ``digits`` decimals are rounded to the nearest integer, halves away
    from zero. Returns the int64 values and a mask of the entries read; the others (``nan``,
    ``inf``, other text, magnitudes of 9e18 and more) are 0 and False.
    """
    text = np.asarray(text)
    if text.dtype.kind != "S" or text.ndim != 1:
        raise TypeError(f"decimal_ns reads a 1-D bytes array (dtype S), not {text.dtype}")
    values = np.zeros(text.shape[0], dtype=np.int64)
    ok = np.zeros(text.shape[0], dtype=bool)
    for start in range(0, text.shape[0], _BLOCK):
        block = slice(start, start + _BLOCK)
        values[block], ok[block] = _parse_block(text[block], digits)
    return values, ok


def float_ns(values: Array, digits: int = 9) -> np.ndarray:
    """The integers nearest ``values * 10**digits`` of float values (NPZ columns, cells the
    text parser does not read), the fraction rounded after one product (within one unit of
    the exact rounding); not finite or beyond 9e18: 0."""
    values = np.asarray(values, dtype=float)
    good = np.isfinite(values) & (np.abs(values) < LARGEST_NS / 10.0**digits)
    x = np.where(good, values, 0.0)
    whole = np.floor(x)  # x - whole is exact: it drops the integer bits of x
    scaled = np.rint((x - whole) * 10.0**digits).astype(np.int64)
    return whole.astype(np.int64) * _POWERS[digits] + scaled


def seconds_since(ns: np.ndarray, origin: int) -> Array:
    """Float seconds of integer nanoseconds ``ns`` after ``origin`` (ns): the float nearest
    the exact seconds below 2**53 ns (the difference is an exact float, its division by 1e9
    rounded once)."""
    return (np.asarray(ns, dtype=np.int64) - np.int64(origin)).astype(float) / NS_PER_S


def _parse_block(text: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decimal_ns` of one block of rows (NumPy string functions, no Python per row)."""
    strings = np.strings
    text = strings.strip(text)
    negative = strings.startswith(text, b"-")
    body = strings.slice(text, (negative | strings.startswith(text, b"+")).astype(np.int64), None)
    body = strings.replace(body, b"E", b"e")
    mantissa, marked, exponent = map(_sized, strings.partition(body, b"e"))
    whole, _, fraction = map(_sized, strings.partition(mantissa, b"."))
    exponent_sign = np.where(strings.startswith(exponent, b"-"), -1, 1)
    exponent_digits = strings.lstrip(exponent, b"+-")
    ok = _digits_or_empty(whole) & _digits_or_empty(fraction)
    ok &= strings.str_len(whole) + strings.str_len(fraction) > 0
    ok &= (marked == b"") | (
        strings.isdigit(exponent_digits)
        & (strings.str_len(exponent_digits) <= 3)
        & (strings.str_len(exponent) - strings.str_len(exponent_digits) <= 1)
    )
    power = np.where(ok & (marked != b""), _as_int(exponent_digits, ok), 0) * exponent_sign
    shift = power + digits - strings.str_len(fraction)  # value = int(whole fraction) 10^shift
    number = _sized(strings.lstrip(strings.add(whole, fraction), b"0"))
    keep = strings.str_len(number) - np.maximum(-shift, 0)  # digits above the unit
    rounding = _sized(strings.slice(number, np.maximum(keep, 0), np.maximum(keep, 0) + 1))
    up = (keep >= 0) & (rounding >= b"5")
    kept = _sized(strings.slice(number, 0, np.maximum(keep, 0)))
    scale = np.maximum(shift, 0)
    length = np.where(kept == b"", 0, strings.str_len(kept) + scale)  # digits of the integer
    padded = strings.ljust(kept, np.where(length <= 19, length, 0), b"0")
    ok &= (length <= 18) | ((length == 19) & (padded < b"9000000000000000000"))
    value = _as_int(kept, ok)
    value = np.where(ok, value * _POWERS[np.minimum(scale, 18)] + up, 0)
    return np.where(negative, -value, value), ok


def _sized(text: np.ndarray) -> np.ndarray:
    """``text`` at least one byte wide: NumPy's string functions misread arrays of dtype S0."""
    return text if text.dtype.itemsize else text.astype("S1")


def _digits_or_empty(text: np.ndarray) -> np.ndarray:
    return np.strings.isdigit(text) | (text == b"")


def _as_int(text: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The integers of digit strings where ``ok`` (0 elsewhere and for empty strings)."""
    out = np.zeros(text.shape[0], dtype=np.int64)
    use = ok & (text != b"")
    out[use] = text[use].astype(np.int64)
    return out
