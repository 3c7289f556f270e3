"""A lexer context's product automaton against its terminals run one by one.

The product DFA (`LexerContext`) is built state by state from the terminals' own DFAs with
byte classes, sparse state keys and per-terminal edge lists; here it is checked against the
plainest reading of what it must be: after any byte string, the terminals still alive and the
terminals accepting are exactly those whose own DFA, run over the string, is alive or accepting.
Generated contexts of literal keys with shared prefixes (the JSON-schema case) and regexes.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from constrained_spec.grammar.byte_dfa import compile_byte_dfa
from constrained_spec.grammar.lexer import LexerContext, Terminal

ALPHABET = 'ab"1 '
REGEXES = ["[ab]+", '"[^"]*"', "[0-9]+", "a*b", " +"]


def terminal(name: str, source: str, is_string: bool) -> Terminal:
    return Terminal(name=name, dfa=compile_byte_dfa(source), is_string=is_string, value=source, flags=frozenset(),
                    regexp=source, sort_key=(0, (0, -len(source), name)))


literals = st.lists(st.text(ALPHABET, min_size=1, max_size=5), min_size=0, max_size=12, unique=True)
contexts = st.tuples(literals, st.lists(st.sampled_from(REGEXES), max_size=3, unique=True)).filter(lambda c: c[0] or c[1])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(contexts, st.lists(st.text(ALPHABET, max_size=7), min_size=1, max_size=12))
def test_product_states_are_the_terminals_run_one_by_one(context: tuple, texts: list[str]) -> None:
    """300 generated contexts (derandomized), each walked over 1-12 generated strings and every
    prefix of them: alive and accepting terminals, and the dead state, agree with each terminal's
    own DFA; the padding column keeps the state; the terminals a lexeme ends as are the accepting
    ones (states past a key that told terminals apart are laid down as that terminal's own DFA)."""
    keys, regexes = context
    terms = [terminal(f"K{i}", re.escape(k), True) for i, k in enumerate(keys)]
    terms += [terminal(f"R{i}", r, False) for i, r in enumerate(regexes)]
    lexer = LexerContext(terms)
    every = LexerContext(terms, every_match=True)  # the same automaton, each accepting terminal an end
    by_name = {t.name: t for t in terms}
    for text in texts:
        data = text.encode()
        state = every_state = 0
        for end in range(len(data) + 1):
            if end:
                state = int(lexer.trans[state, data[end - 1]])
                every_state = int(every.trans[every_state, data[end - 1]])
            runs = {name: by_name[name].dfa.run(data[:end]) for name in lexer.terms}
            alive = {i for i, name in enumerate(lexer.terms) if runs[name] >= 0}
            if not alive:
                assert state == lexer.dead
                break
            accepting = {i for i, name in enumerate(lexer.terms) if runs[name] in by_name[name].dfa.accepting}
            assert {i for i in range(len(lexer.terms)) if lexer.alive_bits[state] >> i & 1} == alive
            assert {i for i in range(len(lexer.terms)) if lexer.accept_bits[state] >> i & 1} == accepting
            assert int(lexer.trans[state, 256]) == state
            # the lexeme ends as Lark's one terminal, or (every_match) as each accepting one, and may
            # also end early where one accepts while another goes on
            assert lexer.ends[state] == ((lexer.winner[state],) if accepting else ())
            assert lexer.winner[state] in accepting or (not accepting and lexer.winner[state] == -1)
            assert every.ends[every_state] == tuple(sorted(accepting))
            assert every.early[every_state] == (every.ends[every_state] if accepting and alive - accepting else ())
            assert every.end_sets[every.end_arr[every_state]] == every.ends[every_state] if accepting else every.end_arr[every_state] == -1
            row = lexer.row(state)
            assert [lexer.dead if t < 0 else t for t in row] == lexer.trans[state, :256].tolist()
