"""Regex fragments for JSON leaves: numbers with bounds, string characters, formats, patterns.

Every fragment matches only canonical JSON text (integers without leading zeros, no `-0`), so a
grammar built from them accepts a subset of the valid instances and never an invalid one.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from typing import Any, Callable

from .regular import intersection

__all__ = [
    "INTEGER", "NUMBER", "NON_STRING_FORMATS", "PLAIN_CHAR", "STRING_CHAR", "KEY_CHAR", "FORMATS", "FORMAT_PATTERNS", "int_range", "number_range", "pattern_to_json_regex", "trie_complement",
    "string_except", "multiple_of_int",
]  # fmt: skip

INTEGER = r"-?(?:0|[1-9][0-9]*)"
_FRACTION = r"\.[0-9]+"
_EXPONENT = r"[eE][+-]?[0-9]+"
NUMBER = INTEGER + f"(?:{_FRACTION})?(?:{_EXPONENT})?"
# one character of a JSON string body: plain (no quote, backslash or control) or an escape
PLAIN_CHAR = r'[^"\\\x00-\x1F]'  # a character written as itself (no escape)
# (a surrogate pair, \\ud83d\\ude00, is one unit: one character to JSON schema; a lone surrogate is left out)
STRING_CHAR = PLAIN_CHAR + (r'|\\["\\/bfnrt]|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})'
                            r'|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}')
# one character written the way json.dumps(..., ensure_ascii=False) writes it: every character has
# exactly one spelling, so "this key is not one of the declared names" is a question about text
_SHORT_ESCAPES = ['\\"', "\\\\", "\\b", "\\f", "\\n", "\\r", "\\t"]
_CONTROL_ESCAPES = [f"\\u{c:04x}" for c in range(0x20) if c not in (8, 9, 10, 12, 13)]
KEY_CHAR = PLAIN_CHAR + r'|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f])'

_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001..9999
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP}-02-29)"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DURATION_TIME = r"T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_H16 = r"[0-9a-fA-F]{1,4}"
_IPV6 = "|".join([
    rf"(?:{_H16}:){{7}}{_H16}",
    rf"(?:{_H16}:){{1,7}}:",
    rf"(?:{_H16}:){{1,6}}:{_H16}",
    rf"(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}",
    rf"(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}",
    rf"(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}",
    rf"(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}",
    rf"{_H16}:(?::{_H16}){{1,6}}",
    rf":(?:(?::{_H16}){{1,7}}|:)",
])  # fmt: skip
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
_PCHAR = r"(?:[A-Za-z0-9\-._\~!$\&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_REG_NAME = r"(?:[A-Za-z0-9\-._\~!$\&'()*+,;=]|%[0-9A-Fa-f]{2})*"
# RFC 3986 / 3987: hier-part (an authority without userinfo or IP literal, absolute, rootless or
# empty path) and relative-ref (the same, whose first segment holds no ":"), over `pchar`;
# then query and fragment. IRIs add the BMP's ucschar to the unreserved characters.
_UCS = "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"


def _uri(pchar: str, reg_name: str, reference: bool) -> str:
    no_colon = pchar.replace("=:@]", "=@]")  # (the class's ":")
    after = rf"(?://{reg_name}(?::[0-9]*)?(?:/{pchar}*)*|/(?:{pchar}+(?:/{pchar}*)*)?|FIRST+(?:/{pchar}*)*)?"
    rest = rf"(?:\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
    absolute = r"[A-Za-z][A-Za-z0-9+.\-]*:" + after.replace("FIRST", pchar) + rest
    return rf"(?:{absolute}|{after.replace('FIRST', no_colon)}{rest})" if reference else absolute


_IPCHAR = _PCHAR.replace("A-Za-z0-9", "A-Za-z0-9" + _UCS)
_IREG_NAME = _REG_NAME.replace("A-Za-z0-9", "A-Za-z0-9" + _UCS)
# RFC 6570 (levels 1-3 and level 4's modifiers): literals, and expressions {op var,var:3,list*}
_TEMPLATE_LITERAL = r"(?:[!#$\&()*+,\-./0-9:;=?@A-Z\[\]_a-z\~]|%[0-9A-Fa-f]{2})"
_VARCHAR = r"[A-Za-z0-9_]"  # (not pct-encoded: the uri_template checker refuses that in a name)
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,2}}|\*)?"  # (prefixes up to 999: the checker's bound)
# Each is a subset of what the usual checkers accept (jsonschema's format checker, RFC 3339,
# RFC 3986, ipaddress): generation may be narrower than validation, never wider.
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "duration": rf"P(?:(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:{_DURATION_TIME})?|{_DURATION_TIME}|[0-9]+W)",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[A-Za-z0-9!#$%\&'*+=?^_`{|}\~\-]+(?:\.[A-Za-z0-9!#$%\&'*+=?^_`{|}\~\-]+)*@" + rf"{_LABEL}(?:\.{_LABEL})*",
    "hostname": rf"(?:{_LABEL}\.){{0,2}}[A-Za-z](?:[A-Za-z0-9\-]{{0,61}}[A-Za-z0-9])?",
    "ipv4": rf"(?:{_OCTET}\.){{3}}{_OCTET}",
    "ipv6": f"(?:{_IPV6})",
    "uri": _uri(_PCHAR, _REG_NAME, reference=False),
    "uri-reference": _uri(_PCHAR, _REG_NAME, reference=True),
    "iri": _uri(_IPCHAR, _IREG_NAME, reference=False),
    "iri-reference": _uri(_IPCHAR, _IREG_NAME, reference=True),
    "uri-template": rf"(?:{_TEMPLATE_LITERAL}|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*",
    "byte": r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
}
# formats of numbers (OpenAPI's): no constraint on a string
NON_STRING_FORMATS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float", "double"}
FORMATS["idn-email"] = FORMATS["email"]  # checkers ask for an "@"; an ASCII address is an IDN one
# IDNA 2008 labels: no "--" (reserved for xn-- labels), no hyphen at either end, at most 63 characters
_IDN_LABEL = r"[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,2}"
FORMATS["idn-hostname"] = rf"(?:{_IDN_LABEL}\.){{0,3}}{_IDN_LABEL}"
_POINTER = r"(?:/(?:[A-Za-z0-9 _.\-:@!$\&'()*+,;=%]|~[01])*)*"
FORMATS["json-pointer"] = _POINTER
# jsonschema's checker refuses a digit after any 0 ("709"): no 0 but the last digit
FORMATS["relative-json-pointer"] = rf"(?:0|[1-9]+0?)(?:#|{_POINTER})"


# a counted repetition re.compile accepts: {m}, {m,}, and {m,n} with m <= n (one-digit m below a
# one-digit n or any n of two or three digits, two-digit m below any three-digit n; {16,3} is an error)
_COUNT = (r"\{(?:[0-9]{1,3},?|[0-9],[1-9][0-9]{1,2}|[1-9][0-9],[1-9][0-9]{2}|"
          + "|".join(f"{m},[{m}-9]" for m in range(10)) + r")\}")


def _regex_format(backslash: str, quote: str) -> str:
    """Python regexes that re.compile accepts (what format checkers run), as a regular subset:
    literals, escapes, classes, quantifiers, anchors and groups two deep. `backslash` and
    `quote`: the regexes for one backslash and one `"` of the value (each is two characters in
    JSON text: `['\\"]` is a class of quotes)."""
    escape = backslash + r"(?:[.*+?()\[\]{}|^$/dDwWsSntr\-]|" + backslash + ")"
    item = rf"(?:[A-Za-z0-9 _,:;@#%=!'<>.*+?(){{}}|$/]|{quote}|a-z|A-Z|0-9|" + backslash + r"[dDwWsS.\-\]\[/])"
    atom = rf"(?:[A-Za-z0-9 _\-,:;/@#%&=~!'<>.]|{quote}|{escape}|\[\^?-?{item}+-?\])"
    for _ in range(2):  # a group holds the atoms one level down
        alternatives = rf"(?:{atom}(?:[*+?]|{_COUNT})?\??|\^|\$)*"
        atom = rf"(?:{atom}|\((?:\?:)?{alternatives}(?:\|{alternatives})*\))"
    branch = rf"(?:{atom}(?:[*+?]|{_COUNT})?\??|\^|\$)*"
    return rf"{branch}(?:\|{branch})*"


FORMATS["regex"] = _regex_format(r'\\\\', r'\\"')
# the same formats as patterns over the decoded string (what a JSON-schema `pattern` reads)
FORMAT_PATTERNS = {**FORMATS, "regex": _regex_format(r"\\", '"')}


def _same_length(lo: str, hi: str) -> str:
    """Regex for the decimal strings of equal length n with lo <= s <= hi."""
    if lo == hi:
        return lo
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    if lo == "0" * len(lo) and hi == "9" * len(hi):  # every string: without this, 2^n branches
        return f"[0-9]{{{len(lo)}}}"
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
    full: list[int] = []  # lengths whose every number is in range, written as one piece
    for length in range(len(str(lo)), top + 1):
        first = 10 ** (length - 1) if length > 1 else 0
        a = max(lo, first)
        b = 10**length - 1 if hi is None else min(hi, 10**length - 1)
        if length > 1 and (a, b) == (first, 10**length - 1):
            full.append(length)
        elif a <= b:
            parts.append(_same_length(str(a), str(b)))
    if full:  # consecutive: only the shortest and the longest lengths can be partial
        parts.append(f"[1-9][0-9]{{{full[0] - 1},{full[-1] - 1}}}")
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


def multiple_of_int(m: int, lo: int | None, hi: int | None) -> str | None:
    """Canonical JSON integers in [lo, hi] that are multiples of m; None when not expressible
    compactly (m must divide a power of ten, or the range hold at most 1000 multiples)."""
    if m == 1:
        return int_range(lo, hi) if (lo, hi) != (None, None) else INTEGER
    if lo is not None and hi is not None:
        first = -(-lo // m) * m
        values = list(range(first, hi + 1, m)) if first <= hi else []
        if len(values) > 1000:
            return None
        return "|".join(str(v) for v in values) if values else None
    if lo is not None or hi is not None:
        return None
    k = 0
    while 10**k % m and k < 6:
        k += 1
    if 10**k % m or 10**k // m > 1000:
        return None
    small = [str(v) for v in range(0, 10**k, m)]  # written with at most k digits
    tails = "|".join(v.zfill(k) for v in small)
    positive = f"(?:{'|'.join(v for v in small if v != '0')}|[1-9][0-9]*(?:{tails}))"
    return f"0|-?{positive}"


def number_range(lo: Number | None, lo_excl: bool, hi: Number | None, hi_excl: bool, places: int | None = None) -> str | None:
    """Decimal JSON numbers (no exponent) in the interval, bounds ints, floats or Decimals (a
    float read as its shortest repr, the text a schema holds); with `places`, at most that many
    fraction digits (multipleOf 10^-places). None if empty."""
    lo_d = None if lo is None else _decimal(lo)
    hi_d = None if hi is None else _decimal(hi)
    parts = []
    if hi_d is None or hi_d > 0 or (hi_d == 0 and not hi_excl):  # x >= 0
        from_zero = lo_d is None or lo_d < 0
        parts += _nonneg_part(Decimal(0) if from_zero else lo_d, False if from_zero else lo_excl, hi_d, hi_excl, places)
    if lo_d is None or lo_d < 0:  # x < 0 as -y, y > 0 (0 was written above)
        y_lo, y_lo_excl = (Decimal(0), True) if hi_d is None or hi_d >= 0 else (-hi_d, hi_excl)
        parts += ["-" + _group(y) for y in _nonneg_part(y_lo, y_lo_excl, None if lo_d is None else -lo_d, lo_excl, places)]
    return "|".join(_group(p) for p in parts) if parts else None


Number = int | float | Decimal


def _decimal(value: Number) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _split(value: Decimal) -> tuple[int, str]:
    """A non-negative decimal as its integer part and its fraction's digits (no trailing zeros)."""
    whole = int(value)
    digits = format(value - whole, "f").partition(".")[2].rstrip("0")
    return whole, digits


def _nonneg_part(lo: Decimal, lo_excl: bool, hi: Decimal | None, hi_excl: bool, places: int | None) -> list[str]:
    """Numbers I[.F] >= 0 from lo to hi (lo >= 0): the integer parts strictly inside, then lo's
    and hi's integer parts, each with the fractions its bound allows."""
    if hi is not None and (hi < lo or (hi == lo and (lo_excl or hi_excl))):
        return []
    (lo_int, lo_frac), (hi_int, hi_frac) = _split(lo), (None, None) if hi is None else _split(hi)
    any_fraction = _fraction(None, True, None, True, places)
    if hi_int == lo_int:
        ends = [(lo_int, _fraction(lo_frac, not lo_excl, hi_frac, not hi_excl, places))]
    else:
        inner = _nonneg_range(lo_int + 1, None if hi_int is None else hi_int - 1)
        ends = [(lo_int, _fraction(lo_frac, not lo_excl, None, True, places))]
        if hi_int is not None:
            ends.append((hi_int, _fraction(None, True, hi_frac, not hi_excl, places)))
    out = [_group(inner) + any_fraction] if hi_int != lo_int and inner else []
    return out + [f"{whole}{fraction}" for whole, fraction in ends if fraction is not None]


def _fraction(lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool, places: int | None) -> str | None:
    """The optional `.digits` after an integer part, whose value 0.digits lies between 0.lo and
    0.hi (digit strings without trailing zeros; None: no bound), with at most `places` digits.
    None if no fraction (not even none) fits."""
    empty, nonempty = _digits(lo, lo_incl, hi, hi_incl, places)
    if nonempty is None:
        return "" if empty else None
    return f"(?:\\.{_group(nonempty)})" + ("?" if empty else "")


@functools.lru_cache(maxsize=4096)
def _digits(lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool, places: int | None) -> tuple[bool, str | None]:
    """Digit strings D (at most `places` long) with 0.lo <= 0.D <= 0.hi (strict where not
    incl): whether the empty one fits, and a regex for the non-empty ones (None: none fits)."""
    if lo == "" and lo_incl:
        lo = None  # >= 0: no bound
    zero_fits = lo is None and (hi is None or hi != "" or hi_incl)
    if places == 0:
        return zero_fits, None
    if lo is None and hi is None:
        return True, "[0-9]" + ("+" if places is None else f"{{1,{places}}}" if places > 1 else "")
    if hi == "":  # at most 0: only zeros
        return zero_fits, None if not zero_fits else "0+" if places is None else f"0{{1,{places}}}"
    if lo == "" and hi is None and places is None:  # above 0: some non-zero digit
        return False, "[0-9]*[1-9][0-9]*"
    rest = None if places is None else places - 1
    by_tail: dict[str, list[int]] = {}
    for digit in range(10):
        low = lo if lo is None else lo[1:] if (lo[:1] or "0") == str(digit) else None if int(lo[:1] or "0") < digit else False
        high = hi if hi is None else hi[1:] if hi[0] == str(digit) else None if int(hi[0]) > digit else False
        if low is False or high is False:
            continue
        empty, tail = _digits(low, lo_incl if low is not None else True, high, hi_incl if high is not None else True, rest)
        if tail is not None or empty:
            by_tail.setdefault("" if tail is None else _optional(tail) if empty else _group(tail), []).append(digit)
    pieces = [_digit_class(digits) + tail for tail, digits in by_tail.items()]
    return zero_fits, "|".join(pieces) if pieces else None


def _optional(regex: str) -> str:
    """`regex` or nothing."""
    if regex in ("[0-9]+", "0+"):
        return regex[:-1] + "*"
    return f"(?:{regex})?"


def _digit_class(digits: list[int]) -> str:
    if len(digits) == 1:
        return str(digits[0])
    if digits == list(range(digits[0], digits[-1] + 1)):
        return f"[{digits[0]}-{digits[-1]}]"
    return "[" + "".join(map(str, digits)) + "]"


_REGULAR_BOUND = 64  # lengths met with a pattern's automaton up to this bound (the regex grows with it)


def pattern_to_json_regex(pattern: str, min_length: int = 0, max_length: int | None = None) -> str:
    """A JSON-Schema `pattern` (ECMA regex, search semantics) -> regex over the JSON string body.

    Re-rendered from Python's regex parser so `.` and negated classes can never produce a raw quote,
    backslash or control character, and literal quotes/backslashes become their JSON escapes.
    With min_length/max_length the lengths are intersected exactly when the pattern has at most
    one variable-length part (e.g. `^[a-z]+$`, `^ab`); lookaheads, and lengths beside several
    variable parts, go through regular.py (the pattern's language, met with the lengths', written
    back without lookarounds). Raises ValueError for what neither can translate exactly
    (backreferences, lookbehinds, anchors inside a group, automata past their budget)."""
    try:
        return _translated(pattern, min_length, max_length)
    except ValueError as exc:
        if str(exc).startswith(("invalid pattern", "pattern and minLength/maxLength", "pattern must be")) or max(min_length, max_length or 0) > _REGULAR_BOUND:
            raise
        bounds = [] if (min_length, max_length) == (0, None) else [f"^[\\x00-\\U0010ffff]{{{min_length},{'' if max_length is None else max_length}}}$"]
        try:
            regex = intersection([pattern, *bounds])
        except ValueError:
            raise exc from None
        if regex is None:
            raise ValueError("pattern and minLength/maxLength allow no string" if bounds else "no string matches the pattern") from None
        return _translated(regex)


def _translated(pattern: str, min_length: int = 0, max_length: int | None = None) -> str:
    import re._parser as sre  # the stdlib's own parser (stable in 3.11+)

    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string, got {type(pattern).__name__}")
    try:
        tree = sre.parse(pattern)
    except re.error as exc:
        raise ValueError(f"invalid pattern {pattern!r}: {exc}") from exc
    items = list(tree)
    branches = [i for i, (op, _) in enumerate(items) if op == sre.BRANCH]
    if len(branches) == 1 and all(op == sre.AT for op, _ in items[: branches[0]] + items[branches[0] + 1 :]):
        # a|b|c as a whole, each branch with its own anchors (`^\d{4}$|^neutral$`, which the
        # parser writes as ^ then the branches); bounds only where every branch implies them
        k = branches[0]
        ways = [items[:k] + list(b) + items[k + 1 :] for b in items[k][1][1]]
        implied = {_lengths_implied(way, sre.SubPattern(tree.state, way).getwidth(), sre, min_length, max_length) for way in ways}
        if implied == {False}:
            raise ValueError("pattern and minLength/maxLength allow no string")
        if implied == {True}:
            return "(?:" + "|".join(_search_regex(way, sre) for way in ways) + ")"
    if (min_length, max_length) != (0, None):
        implied = _lengths_implied(items, tree.getwidth(), sre, min_length, max_length)
        if implied is False:
            raise ValueError("pattern and minLength/maxLength allow no string")
        if implied:
            return _translated(pattern)
    return _search_regex(items, sre, min_length, max_length)


def format_lengths_implied(fmt: str, min_length: int, max_length: int | None) -> bool | None:
    """`_lengths_implied` for a format of FORMATS (True where no bound is given). Its regex over
    the JSON body writes no escape (but `regex`'s), so its widths are the decoded string's:
    `uuid` beside maxLength 36, `date` beside minLength 10, `ipv4` beside maxLength 15 add nothing."""
    import re._parser as sre

    if (min_length, max_length) == (0, None):
        return True
    regex = FORMATS[fmt]
    if "\\\\" in regex:  # it may write a backslash escape: JSON characters are not string characters
        return None
    return _lengths_implied([(sre.AT, sre.AT_BEGINNING), (sre.AT, sre.AT_END)], sre.parse(regex).getwidth(), sre, min_length, max_length)


def _lengths_implied(items: list, width: tuple[int, int], sre: Any, min_length: int, max_length: int | None) -> bool | None:
    """Whether every string the pattern admits has a length in [min_length, max_length] (True:
    the bounds add nothing), none has (False), or either may be (None). `width`: the shortest
    and longest match in characters (the parser's; huge where unbounded). A string matching
    with search semantics holds a match: it is at least that long, and at most that long only
    where the pattern is anchored at both ends. (`^[a-z]+(-[a-z]+)*$` beside minLength 1, or
    `^[0-9]{5}(-[0-9]{4})?$` beside maxLength 10, had been refused: several variable parts.)"""
    anchored = bool(items) and items[0] == (sre.AT, sre.AT_BEGINNING) and items[-1][0] == sre.AT and items[-1][1] in (sre.AT_END, sre.AT_END_STRING)
    shortest, longest = width
    if anchored and (longest < min_length or (max_length is not None and shortest > max_length)):
        return False
    if shortest >= min_length and (max_length is None or (anchored and longest <= max_length)):
        return True
    return None


def _search_regex(items: list, sre: Any, min_length: int = 0, max_length: int | None = None) -> str:
    """Regex over the JSON string body for parsed pattern `items` (search semantics)."""
    anchored_start = bool(items) and items[0][0] == sre.AT and items[0][1] == sre.AT_BEGINNING
    anchored_end = bool(items) and items[-1][0] == sre.AT and items[-1][1] in (sre.AT_END, sre.AT_END_STRING)
    body = items[int(anchored_start) : len(items) - int(anchored_end)]
    any_chars = f"(?:{STRING_CHAR})*"
    if (min_length, max_length) == (0, None):
        inner = "".join(_render(op, av, sre) for op, av in body)
        return ("" if anchored_start else any_chars) + f"(?:{inner})" + ("" if anchored_end else any_chars)
    # pieces: (regex of one character, min repeats, max repeats or None)
    pieces = [] if anchored_start else [(STRING_CHAR, 0, None)]
    for op, av in body:
        pieces.append(_char_piece(op, av, sre))
    if not anchored_end:
        pieces.append((STRING_CHAR, 0, None))
    variable = [i for i, (_, lo, hi) in enumerate(pieces) if lo != hi]
    fixed = sum(lo for _, lo, hi in pieces if lo == hi)
    if len(variable) > 1:
        raise ValueError("a pattern with several variable-length parts together with minLength/maxLength")
    if not variable:
        if fixed < min_length or (max_length is not None and fixed > max_length):
            raise ValueError("pattern and minLength/maxLength allow no string")
    else:
        char, lo, hi = pieces[variable[0]]
        lo = max(lo, min_length - fixed)
        if max_length is not None:
            hi = max_length - fixed if hi is None else min(hi, max_length - fixed)
        if hi is not None and hi < lo:
            raise ValueError("pattern and minLength/maxLength allow no string")
        pieces[variable[0]] = (char, lo, hi)
    return "".join(f"(?:{c}){{{lo},{'' if hi is None else hi}}}" for c, lo, hi in pieces)


def _char_piece(op, av, sre) -> tuple[str, int, int | None]:
    """One pattern item as (one-character regex, min, max): a character matcher, maybe repeated."""
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        lo, hi, item = av
        if len(item) != 1:
            raise ValueError("a repeated group of several items together with minLength/maxLength")
        char, a, b = _char_piece(*item[0], sre)
        if (a, b) != (1, 1):
            raise ValueError("a nested repeat together with minLength/maxLength")
        return char, lo, None if hi == sre.MAXREPEAT else hi
    if op == sre.SUBPATTERN and len(av[-1]) == 1:
        return _char_piece(*av[-1][0], sre)
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.CATEGORY):
        return _render(op, av, sre), 1, 1
    raise ValueError(f"{str(op).lower()} in a pattern together with minLength/maxLength")


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


def _class_member(op, av, sre, drop_special: bool = False) -> str:
    """One member of a character class, in the class syntax. drop_special (a negated class, which
    leaves quotes, backslashes and controls out anyway): those are dropped, not refused."""
    if op == sre.LITERAL:
        ch = chr(av)
        if ch in '"\\' or av < 0x20:
            if drop_special:
                return ""
            raise ValueError("a character range or class mixing a quote, backslash or control character")
        return "\\" + ch if ch in "]\\^-[&~" else ch
    if op == sre.RANGE:
        lo, hi = av
        if drop_special:  # the range without controls, quote and backslash, in pieces
            cuts = [(max(lo, 0x20), min(hi, 0x21)), (max(lo, 0x23), min(hi, 0x5B)), (max(lo, 0x5D), hi)]
            return "".join(_class_member(op, (a, b), sre) for a, b in cuts if a <= b)
        if lo <= 0x22 <= hi or lo <= 0x5C <= hi or lo < 0x20:
            raise ValueError("a character range spanning a quote, backslash or control character")
        if lo == hi:
            return _class_member(sre.LITERAL, lo, sre)
        return f"{_class_member(sre.LITERAL, lo, sre)}-{_class_member(sre.LITERAL, hi, sre)}"
    if op == sre.CATEGORY and str(av) in _CATEGORIES:
        return _CATEGORIES[str(av)]
    raise ValueError(f"unsupported construct {op} in a character class")


def _render(op, av, sre) -> str:
    if op == sre.LITERAL:
        return _char_literal(av)
    if op == sre.ANY:
        return f"(?:{PLAIN_CHAR})"
    if op == sre.NOT_LITERAL:
        return _render(sre.IN, [(sre.NEGATE, None), (sre.LITERAL, av)], sre)
    if op == sre.IN:
        negate = bool(av) and av[0][0] == sre.NEGATE
        members = av[1:] if negate else av
        if negate:  # quotes, backslashes and controls are left out anyway (as for `.`)
            return "[^" + "".join(_class_member(o, a, sre, drop_special=True) for o, a in members) + '"\\\\\\x00-\\x1F]'
        special = [a for o, a in members if o == sre.LITERAL and (chr(a) in '"\\' or a < 0x20)]
        plain = "".join(_class_member(o, a, sre) for o, a in members if not (o == sre.LITERAL and a in special))
        options = ([f"[{plain}]"] if plain else []) + [_char_literal(a) for a in special]  # as JSON escapes
        return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"
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


def _key_units(name: str) -> list[str]:
    """`name` as json.dumps writes it (no quotes), split into one spelling per character."""
    import json

    body, units, i = json.dumps(name, ensure_ascii=False)[1:-1], [], 0
    while i < len(body):
        size = 1 if body[i] != "\\" else 6 if body[i + 1] == "u" else 2
        units.append(body[i : i + size])
        i += size
    return units


def _unit_regex(unit: str) -> str:
    return "".join("\\" + c if c in _CLASS_SPECIAL or c in "$.+*?()|{}" else c for c in unit)


_CLASS_SPECIAL = set("]\\^-[&~")


def _other_unit(children: dict) -> str:
    """One key character (KEY_CHAR) whose spelling is not among `children`."""
    plain = "".join(("\\" + u if u in _CLASS_SPECIAL else u) for u in children if not u.startswith("\\"))
    if not any(u.startswith("\\") for u in children):  # the usual case: every escape allowed
        return f'[^"\\\\\\x00-\\x1F{plain}]|' + KEY_CHAR.split("|", 1)[1]
    escapes = [u for u in _SHORT_ESCAPES + _CONTROL_ESCAPES if u not in children]
    return "|".join([f'[^"\\\\\\x00-\\x1F{plain}]', *(_unit_regex(u) for u in escapes)])


def string_except(names: list[str]) -> str:
    """A JSON string (with its quotes, each character spelled as json.dumps spells it) that is
    none of `names`: the complement of a finite set, written over the trie of the names."""
    return '"' + trie_complement([_key_units(name) for name in names], _unit_regex, _other_unit, KEY_CHAR) + '"'


def trie_complement(words: list[list[str]], unit: Callable[[str], str], other: Callable[[dict], str], anything: str) -> str:
    """A regex for every sequence of units but `words` (each a list of units), over their trie:
    `unit(u)` matches unit u, `other(children)` one unit not among `children` (a dict keyed by
    unit), `anything` any one unit."""
    trie: dict = {}
    for word in words:
        node = trie
        for u in word:
            node = node.setdefault(u, {})
        node[None] = {}  # end of a word

    def rest(node: dict) -> str:  # sequences that do not complete a word below `node`
        children = {u: c for u, c in node.items() if u is not None}
        parts = [f"(?:{other(children)})(?:{anything})*"]
        parts += [unit(u) + f"(?:{rest(c)})" for u, c in children.items()]
        body = "|".join(parts)
        return f"(?:{body})" if None in node else f"(?:{body})?"

    if max((len(word) for word in words), default=0) <= _NESTED_UNITS:
        return rest(trie)
    # Long words: nested, two groups a unit exceed regex parsers' nesting limits (Rust's
    # regex-syntax: 250; llguidance refused utcm-monitor's). Flat instead: for each trie node's
    # prefix p, p then a unit that leaves the trie, and p itself where no word ends there.
    parts, stack = [], [(trie, "")]
    while stack:
        node, prefix = stack.pop()
        children = {u: c for u, c in node.items() if u is not None}
        parts.append(f"{prefix}(?:{other(children)})(?:{anything})*")
        if None not in node:
            parts.append(prefix)
        stack += [(c, prefix + unit(u)) for u, c in children.items()]
    return "(?:" + "|".join(parts) + ")"


_NESTED_UNITS = 40  # words up to this long: the nested form (shorter for many words)
