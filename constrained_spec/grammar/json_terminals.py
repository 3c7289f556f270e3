"""Regex fragments for JSON leaves: numbers with bounds, string characters, formats, patterns.

Every fragment matches only canonical JSON text (integers without leading zeros, no `-0`), so a
grammar built from them accepts a subset of the valid instances and never an invalid one.
"""

from __future__ import annotations

import re

__all__ = ["INTEGER", "NUMBER", "STRING_CHAR", "FORMATS", "int_range", "number_range", "pattern_to_json_regex"]

INTEGER = r"-?(?:0|[1-9][0-9]*)"
_FRACTION = r"\.[0-9]+"
_EXPONENT = r"[eE][+-]?[0-9]+"
NUMBER = INTEGER + f"(?:{_FRACTION})?(?:{_EXPONENT})?"
# one character of a JSON string body: plain (no quote, backslash or control) or an escape
_PLAIN = r'[^"\\\x00-\x1F]'
STRING_CHAR = _PLAIN + r'|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}'

_D2 = "[0-9]{2}"
_DATE = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[A-Za-z0-9!#$%&'*+=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*",
    "uri": r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\"\\<>^`{|}]*",
}
del _D2


def _same_length(lo: str, hi: str) -> str:
    """Regex for the decimal strings of equal length n with lo <= s <= hi."""
    if lo == hi:
        return lo
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    if lo[0] == hi[0]:
        return lo[0] + _group(_same_length(lo[1:], hi[1:]))
    rest = len(lo) - 1
    parts = [lo[0] + _group(_same_length(lo[1:], "9" * rest))]
    if int(hi[0]) - int(lo[0]) > 1:
        parts.append(f"[{int(lo[0]) + 1}-{int(hi[0]) - 1}][0-9]{{{rest}}}")
    parts.append(hi[0] + _group(_same_length("0" * rest, hi[1:])))
    return "|".join(parts)


def _group(regex: str) -> str:
    return f"(?:{regex})" if "|" in regex else regex


def _nonneg_range(lo: int, hi: int | None) -> str | None:
    """Canonical decimal integers in [lo, hi] (hi None = unbounded), lo >= 0; None if empty."""
    if hi is not None and hi < lo:
        return None
    parts = []
    top = len(str(hi)) if hi is not None else len(str(lo))
    for length in range(len(str(lo)), top + 1):
        first = 10 ** (length - 1) if length > 1 else 0
        a = max(lo, first)
        b = 10**length - 1 if hi is None else min(hi, 10**length - 1)
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(f"[1-9][0-9]{{{top},}}")
    return "|".join(parts)


def int_range(lo: int | None, hi: int | None) -> str | None:
    """Canonical JSON integers in [lo, hi] (None = unbounded); None if the range is empty."""
    parts = []
    if hi is None or hi >= 0:
        nonneg = _nonneg_range(max(lo, 0) if lo is not None else 0, hi)
        if nonneg:
            parts.append(_group(nonneg))
    if lo is None or lo < 0:
        neg = _nonneg_range(max(1, -hi) if hi is not None else 1, -lo if lo is not None else None)
        if neg:
            parts.append("-" + _group(neg))
    return "|".join(parts) if parts else None


def number_range(lo: int | None, lo_excl: bool, hi: int | None, hi_excl: bool) -> str | None:
    """Decimal JSON numbers (no exponent) in the interval with integer bounds; None if empty."""
    frac_any, frac_zero, frac_nonzero = r"(?:\.[0-9]+)?", r"(?:\.0+)?", r"\.[0-9]*[1-9][0-9]*"

    def half(lo: int | None, lo_excl: bool, hi: int | None, hi_excl: bool) -> list[str]:
        # numbers I.F >= 0 in the interval (lo >= 0 or None, i.e. from 0)
        lo = 0 if lo is None else lo
        out = []
        inner = _nonneg_range(lo + 1, None if hi is None else hi - 1)
        if inner:
            out.append(_group(inner) + frac_any)
        if hi is None or lo < hi:
            out.append(f"{lo}" + (frac_nonzero if lo_excl else frac_any))
            if hi is not None and not hi_excl:
                out.append(f"{hi}" + frac_zero)
        elif lo == hi and not lo_excl and not hi_excl:
            out.append(f"{lo}" + frac_zero)
        return out

    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_excl):  # x >= 0 part
        if lo is None or lo <= 0:
            parts += half(0, False, hi, hi_excl)
        else:
            parts += half(lo, lo_excl, hi, hi_excl)
    if lo is None or lo < 0:  # x < 0 part: y = -x > 0
        ylo, ylo_excl = (0, True) if hi is None or hi >= 0 else (-hi, hi_excl)
        ys = half(ylo, ylo_excl, None if lo is None else -lo, lo_excl)
        parts += ["-" + _group(y) for y in ys]
    return "|".join(_group(p) for p in parts) if parts else None


def pattern_to_json_regex(pattern: str) -> str:
    """A JSON-Schema `pattern` (ECMA regex, search semantics) -> regex over the JSON string body.

    Re-rendered from Python's regex parser so `.` and negated classes can never produce a raw quote,
    backslash or control character, and literal quotes/backslashes become their JSON escapes.
    Raises ValueError for constructs we cannot translate exactly (lookarounds, backreferences)."""
    import re._parser as sre  # the stdlib's own parser (stable in 3.11+)

    try:
        tree = sre.parse(pattern)
    except re.error as exc:
        raise ValueError(f"invalid pattern {pattern!r}: {exc}") from exc
    items = list(tree)
    anchored_start = bool(items) and items[0][0] == sre.AT and items[0][1] == sre.AT_BEGINNING
    anchored_end = bool(items) and items[-1][0] == sre.AT and items[-1][1] in (sre.AT_END, sre.AT_END_STRING)
    body = items[int(anchored_start) : len(items) - int(anchored_end)]
    inner = "".join(_render(op, av, sre) for op, av in body)
    any_chars = f"(?:{STRING_CHAR})*"
    return (("" if anchored_start else any_chars) + f"(?:{inner})" + ("" if anchored_end else any_chars))


def _char_literal(code: int) -> str:
    ch = chr(code)
    if ch == '"':
        return r'\\"'
    if ch == "\\":
        return r"\\\\"
    if code < 0x20:
        return {8: r"\\b", 9: r"\\t", 10: r"\\n", 12: r"\\f", 13: r"\\r"}.get(code, f"\\\\u{code:04x}")
    if ch in r"\.+*?()|[]{}^$#&-~":
        return "\\" + ch
    return ch


_CATEGORIES = {
    "CATEGORY_DIGIT": "0-9",
    "CATEGORY_WORD": "A-Za-z0-9_",
    "CATEGORY_SPACE": " ",  # \s inside a JSON body: only the plain space is unescaped
}


def _class_member(op, av, sre) -> str:
    if op == sre.LITERAL:
        ch = chr(av)
        if ch in '"\\' or av < 0x20:
            raise ValueError("a character class containing a quote, backslash or control character")
        return "\\" + ch if ch in "]\\^-[" else ch
    if op == sre.RANGE:
        lo, hi = av
        if lo <= 0x22 <= hi or lo <= 0x5C <= hi or lo < 0x20:
            raise ValueError("a character range spanning a quote, backslash or control character")
        return f"{_class_member(sre.LITERAL, lo, sre)}-{_class_member(sre.LITERAL, hi, sre)}"
    if op == sre.CATEGORY and str(av) in _CATEGORIES:
        return _CATEGORIES[str(av)]
    raise ValueError(f"unsupported construct {op} in a character class")


def _render(op, av, sre) -> str:
    if op == sre.LITERAL:
        return _char_literal(av)
    if op == sre.ANY:
        return f"(?:{_PLAIN})"
    if op == sre.IN:
        negate = bool(av) and av[0][0] == sre.NEGATE
        members = av[1:] if negate else av
        if negate:
            return "[^" + "".join(_class_member(o, a, sre) for o, a in members) + '"\\\\\\x00-\\x1F]'
        return "[" + "".join(_class_member(o, a, sre) for o, a in members) + "]"
    if op == sre.SUBPATTERN:
        return "(?:" + "".join(_render(o, a, sre) for o, a in av[-1]) + ")"
    if op == sre.BRANCH:
        return "(?:" + "|".join("".join(_render(o, a, sre) for o, a in branch) for branch in av[1]) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        lo, hi, item = av
        inner = "".join(_render(o, a, sre) for o, a in item)
        hi_s = "" if hi == sre.MAXREPEAT else str(hi)
        return f"(?:{inner}){{{lo},{hi_s}}}"
    if op == sre.CATEGORY and str(av) in _CATEGORIES:
        return f"[{_CATEGORIES[str(av)]}]"
    raise ValueError(f"unsupported regex construct {str(op).lower()}")
