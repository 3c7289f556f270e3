"""Regex backend (outlines-core index): masks, accept, rollback, validate_tokens, forced bytes, errors."""

from __future__ import annotations

import threading

import pytest
import torch

from constrained_spec.bitmask import new_bitmask, unpack_bitmask
from constrained_spec.grammar import GrammarError, GrammarMatcher, Vocabulary, compile_choices, compile_regex
from constrained_spec.grammar.regex_backend import CompiledRegex, regex_escape

TOKENS = ["<eos>", "a", "b", "c", "ab", "abc", "1", "2", "12", "-", '"', "{", "}", ":", "é", "\u00e9a"]
EOS = 0


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_tokens(TOKENS, EOS, size=40)  # 40 > 16: padding ids must stay masked


def allowed(matcher) -> set[int]:
    bm = new_bitmask(1, matcher.vocab_size)
    matcher.fill_bitmask(bm)
    return set(torch.nonzero(unpack_bitmask(bm[0], matcher.vocab_size)).flatten().tolist())


def ids(*pieces: str) -> list[int]:
    return [TOKENS.index(p) for p in pieces]


def test_mask_follows_regex_and_eos_only_when_accepting(vocab):
    m = compile_regex("ab(c|12)?", vocab).matcher()
    assert isinstance(m, GrammarMatcher)
    assert allowed(m) == set(ids("a", "ab", "abc"))
    m.accept_token(TOKENS.index("ab"))
    assert m.is_accepting() and allowed(m) == set(ids("c", "1", "12")) | {EOS}
    m.accept_token(TOKENS.index("1"))
    assert not m.is_accepting() and allowed(m) == set(ids("2"))
    m.accept_token(TOKENS.index("2"))
    assert allowed(m) == {EOS}
    m.accept_token(EOS)
    assert m.is_terminated() and allowed(m) == set()


def test_rejected_token_raises_and_keeps_state(vocab):
    m = compile_regex("ab", vocab).matcher()
    m.accept_token(TOKENS.index("a"))
    with pytest.raises(GrammarError, match="token 1 is not allowed"):
        m.accept_token(TOKENS.index("a"))
    with pytest.raises(GrammarError, match="not allowed"):
        m.accept_token(EOS)  # not accepting yet
    m.accept_token(TOKENS.index("b"))
    assert m.is_accepting()


def test_rollback_and_validate(vocab):
    m = compile_regex("(ab|c)*1", vocab).matcher()
    seq = ids("ab", "c", "a", "b", "1")
    assert m.validate_tokens(seq + [EOS]) == 6
    assert m.validate_tokens(ids("ab", "1", "1")) == 2
    for t in seq:
        m.accept_token(t)
    before = allowed(m)
    m.rollback(3)
    assert allowed(m) == allowed(compile_regex("(ab|c)*1", vocab).matcher())
    with pytest.raises(GrammarError, match="cannot roll back 3 tokens: only 2 accepted"):
        m.rollback(3)
    for t in seq[2:]:
        m.accept_token(t)
    assert allowed(m) == before
    m.accept_token(EOS)
    m.rollback(1)  # rolling back over EOS un-terminates
    assert not m.is_terminated() and m.is_accepting()


def test_fork_is_independent(vocab):
    m = compile_regex("abc|ab1", vocab).matcher()
    m.accept_token(TOKENS.index("ab"))
    f = m.fork()
    f.accept_token(TOKENS.index("c"))
    assert f.is_accepting() and not m.is_accepting()
    assert allowed(m) == set(ids("c", "1"))


def test_forced_bytes(vocab):
    m = compile_regex('\\{"abc":(1|2)\\}', vocab).matcher()
    assert m.forced_bytes() == b'{"abc":'
    assert m.forced_bytes(max_bytes=3) == b'{"a'
    for t in ids("{", '"', "ab"):
        m.accept_token(t)
    assert m.forced_bytes() == b'c":'
    m.accept_token(TOKENS.index("c"))
    m.accept_token(TOKENS.index('"'))
    m.accept_token(TOKENS.index(":"))
    assert m.forced_bytes() == b""  # 1 or 2: not forced


def test_forced_bytes_never_end_inside_a_character(vocab):
    # "é" is two bytes; a vocabulary with only a whole-character token still forces it whole
    m = compile_regex("éa", vocab).matcher()
    forced = m.forced_bytes()
    forced.decode("utf-8")  # valid UTF-8
    assert "éa".encode().startswith(forced)


def test_choices_escape_and_match(vocab):
    m = compile_choices(["a-b", "{c}"], Vocabulary.from_tokens(["<eos>", "a", "-", "b", "{", "c", "}"], 0)).matcher()
    assert m.validate_tokens([1, 2, 3, 0]) == 4
    assert regex_escape("a.b*{") == r"a\.b\*\{"


def test_bad_regex_and_misuse_raise_clear_errors(vocab):
    with pytest.raises(GrammarError, match="cannot compile regex"):
        compile_regex("(ab", vocab)
    m = compile_regex("a", vocab).matcher()
    with pytest.raises(GrammarError, match="bitmask must be int32"):
        m.fill_bitmask(torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(GrammarError, match="choices must be a non-empty list"):
        compile_choices([], vocab)


def test_compiled_grammar_is_cached_and_thread_safe(vocab):
    compiled = [compile_regex("(a|b)+c", vocab) for _ in range(2)]
    assert compiled[0] is compiled[1]
    results: list[set[int]] = []

    def walk() -> None:
        m = compiled[0].matcher()
        for t in ids("a", "b", "a"):
            m.accept_token(t)
        results.append(allowed(m))

    threads = [threading.Thread(target=walk) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 4 and all(r == set(ids("a", "b", "c", "ab", "abc")) for r in results)


def test_accepting_state_keeps_its_continuations():
    # outlines-core 0.2.14 alone drops edges from accepting states (no "." after "1"); we must not
    vocab = Vocabulary.from_tokens(["<eos>", "1", ".", "5", ".5"], 0)
    m = compile_regex(r"[0-9]+(\.[0-9]+)?", vocab).matcher()
    m.accept_token(1)
    assert m.is_accepting() and allowed(m) == {0, 1, 2, 3, 4}
    assert m.validate_tokens([2, 3, 0]) == 3


def test_open_string_class_is_not_accepting():
    # the sentinel (U+10FFFF) is itself a member of [^"]: inside the string it is allowed as a
    # character, which must not be read as "the regex accepts here" (EOS mid-string)
    vocab = Vocabulary.from_tokens(["<eos>", '"', "a"], 0)
    m = compile_regex('"[^"]*"', vocab).matcher()
    m.accept_token(1)
    m.accept_token(2)
    assert not m.is_accepting() and allowed(m) == {1, 2}
    m.accept_token(1)
    assert m.is_accepting() and allowed(m) == {0}


def test_every_live_state_has_its_mask_row_at_compile(vocab):
    """Masks are built at compile (a fill is one copy) and equal allowed_tokens, EOS included."""
    g = CompiledRegex(r"(ab|a[0-9]+)c?", vocab)
    assert set(g._masks) == set(g._rows) and len(g._rows) > 2
    for state in g._rows:
        bits = unpack_bitmask(g.mask(state), vocab.size)
        assert set(torch.nonzero(bits).flatten().tolist()) == set(g.allowed_tokens(state))


def test_moves_kept_are_the_index_s(vocab):
    """The Index is dropped after compile (95 bytes a move); the int32 moves kept in its place
    give the same next state for every allowed token of every live state."""
    import outlines_core

    from constrained_spec.grammar.regex_backend import _SENTINEL, _outlines_vocabulary

    pattern = r"(ab|a[0-9]+)c?\{?"
    g = CompiledRegex(pattern, vocab)
    index = outlines_core.Index(f"(?:{pattern}){_SENTINEL}", _outlines_vocabulary(vocab))
    assert not hasattr(g, "_index") and g.approx_bytes > 0
    walked = 0
    for state in g._rows:
        for token in g.allowed_tokens(state):
            if token != vocab.eos_token_id:
                assert g.next_state(state, token) == index.get_next_state(state, token), (state, token)
                walked += 1
    assert walked > 10


def test_the_compile_cache_weighs_regex_grammars(vocab, monkeypatch):
    """Past its byte budget the compile cache drops its oldest grammars (a regex grammar holds
    8 bytes a move: two strings of 80 characters, 7.3M moves), never the newest."""
    from constrained_spec.grammar import compiler

    compiler.clear_cache()
    first = compile_regex("(a|b)+c", vocab)
    assert compile_regex("(a|b)+c", vocab) is first
    monkeypatch.setattr(compiler, "_CACHE_BYTES", first.approx_bytes)  # room for one such grammar
    second = compile_regex("(a|c)+b", vocab)
    assert compile_regex("(a|c)+b", vocab) is second  # the newest stays, even past the budget
    assert compile_regex("(a|b)+c", vocab) is not first  # the oldest was dropped, compiled again
    assert compiler._cache_bytes == sum(compiler._weight(c) for c in compiler._cache.values()) > 0  # the running total
    compiler.clear_cache()
    assert compiler._cache_bytes == 0


def test_builds_pause_the_garbage_collector_and_restore_it(vocab, monkeypatch):
    """A grammar is built with the cyclic collector off; after it the collector is as it was
    (on stays on, off stays off), a failed build included."""
    import gc

    from constrained_spec.grammar import compiler

    seen = []
    real = compiler.CompiledRegex

    def watched(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(compiler, "CompiledRegex", watched)
    was_on = gc.isenabled()
    try:
        for start_on in (True, False):
            (gc.enable if start_on else gc.disable)()
            compiler.clear_cache()
            compile_regex("(a|b)+c", vocab)
            assert gc.isenabled() is start_on
            with pytest.raises(GrammarError):
                compile_regex("(a", vocab)
            assert gc.isenabled() is start_on
        assert len(seen) == 4 and not any(seen)  # each build (the failed ones too) ran with it off
    finally:
        (gc.enable if was_on else gc.disable)()
        compiler.clear_cache()
