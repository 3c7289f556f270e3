"""Lookahead-free regexes for "none of these literal strings": neither llguidance nor our
regex translator has lookarounds, and real schemas write exclusions with them.

`literals_complement(words)`: an anchored regex matching every string except those equal to
(exact) or starting with (prefix) one of `words`, built on their trie. `leading_lookaheads(p)`:
a pattern `^(?!A)(?!B|C$)REST` whose lookaheads exclude literal strings (`org\\.bukkit\\.`,
`(?:meta|local)$`) split into patterns whose conjunction is the same set: `^(?:REST)` and
the complement of the excluded words (ECMA semantics: `$` is the end of the string, a pattern
matches where it is found, so REST may stop anywhere).
"""

from __future__ import annotations

import itertools
import re
from re import _constants as sre  # noqa: PLC2701 - the parser's opcodes, to read literals
from re import _parser as sre_parse  # noqa: PLC2701

__all__ = ["leading_lookaheads", "literals_complement"]

_MAX_WORDS = 256  # alternatives a lookahead may spell out


def _escape(ch: str) -> str:
    return ch if ch.isalnum() or ch == "_" else "\\" + ch


def literals_complement(words: list[tuple[str, bool]]) -> str:
    """An anchored regex for the strings that equal no `(word, True)` and start with no
    `(word, False)`; `[\\s\\S]` for any character, line breaks included."""
    trie: dict = {}
    for word, exact in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = node.get("") or ("exact" if exact else "prefix")
        if not exact:
            node[""] = "prefix"

    def blocked(node: dict) -> bool:
        return node.get("") == "prefix"

    def rest(node: dict) -> str:
        """Strings x such that (the prefix to `node`) + x is allowed."""
        options = [] if "" in node else [""]
        edges = sorted(ch for ch in node if ch)
        options.append(f"[^{''.join(_escape(c) for c in edges)}][\\s\\S]*" if edges else "[\\s\\S]+")
        options += [_escape(ch) + rest(node[ch]) for ch in edges if not blocked(node[ch])]
        return "(?:" + "|".join(options) + ")"

    if blocked(trie):
        return "^[^\\s\\S]"  # the empty prefix excludes every string
    return "^" + rest(trie) + "$"


def leading_lookaheads(pattern: str) -> list[str] | None:
    """`pattern` as patterns that must all match, without its leading negative lookaheads of
    literal strings, or None where it does not have that form (or has another lookaround)."""
    if not pattern.startswith("^(?!"):
        return None
    at, words = 1, []
    while pattern.startswith("(?!", at):
        end = _group_end(pattern, at)
        found = None if end is None else _literal_words(pattern[at + 3 : end - 1])
        if found is None:
            return None
        words += found
        at = end
    rest = pattern[at:]
    if re.search(r"\(\?<?[=!]", rest) or len(words) > _MAX_WORDS:
        return None
    return [f"^(?:{rest})", literals_complement(words)]


def _group_end(pattern: str, start: int) -> int | None:
    """The index after the `)` closing the group opened at `start` (escapes and classes skipped)."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _literal_words(body: str) -> list[tuple[str, bool]] | None:
    """The (word, exact) pairs a lookahead body of literals, alternations and a final `$` spells,
    or None for anything else (classes, repeats, flags, ...)."""
    try:
        parsed = sre_parse.parse(body)
    except (re.error, ValueError, OverflowError):
        return None
    if parsed.state.flags & ~sre.SRE_FLAG_UNICODE:  # an inline flag such as (?i) changes what a literal matches
        return None
    found = _sequence(list(parsed), 0)
    return None if found is None else [(w, e) for w, e in found]


def _sequence(items: list, depth: int) -> list[tuple[str, bool]] | None:
    words: list[tuple[str, bool]] = [("", False)]
    for index, (op, arg) in enumerate(items):
        if op is sre.AT and arg is sre.AT_BEGINNING and index == 0 and depth == 0:
            continue  # at the lookahead's start: the string's start already
        if op is sre.AT and arg is sre.AT_END and index == len(items) - 1:
            if any(exact for _, exact in words):
                return None
            words = [(w, True) for w, _ in words]
            continue
        if op is sre.LITERAL:
            parts = [(chr(arg), False)]
        elif op is sre.SUBPATTERN and not arg[1] and not arg[2]:  # (group, add flags, del flags, body)
            parts = _sequence(list(arg[3]), depth + 1)
        elif op is sre.BRANCH:
            options = [_sequence(list(branch), depth) for branch in arg[1]]
            parts = None if any(o is None for o in options) else [p for o in options for p in o]
        else:
            return None
        if parts is None or any(exact for _, exact in words):
            return None  # nothing may follow an end
        words = [(w + p, e) for (w, _), (p, e) in itertools.product(words, parts)]
        if len(words) > _MAX_WORDS:
            return None
    return words
