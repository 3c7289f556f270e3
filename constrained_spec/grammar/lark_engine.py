"""Context-free grammars in Lark's EBNF, compiled to exact token masks.

A configuration = (LALR stack, lexer state): the parser when the current lexeme started, and the
state of that lexeme in the context's product DFA (`lexer.py`). A token is allowed iff its bytes
extend the text to a prefix Lark would lex and parse (see `lexer.py` for the lexing rule). With
`every_match` (JSON schemas' grammars) a lexeme that several terminals match is read as each of
them, and may also end where one accepts while another goes on, so a request's state is a set of
configurations (one per parse still possible: a union's branches whose terminals overlap, `"123"`
as a digit string and as any string, both stay) and the text is held to the grammar's language.

Masks are built from precomputed per-(lexer context, DFA state) token tables (`token_tables.py`):
one table lookup tells, for every token at once, whether it stays inside the current lexeme (then
it is allowed iff a terminal the parser can shift is still alive) or where it ends the lexeme
(then the emitted terminal is fed to the parser and the rest of the token is resolved the same way
from the next lexer context, for all such tokens together). Results are cached per state on the
compiled grammar, which is shared by all matchers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import torch

from ..bitmask import bitmask_width
from .lark_parser import LALR_PLUGINS, LalrTable, Stack
from .lexer import LexerContext, terminals_from_lark
from .protocol import GrammarError
from .token_tables import TokenLayout
from .vocabulary import trim_partial_utf8

__all__ = ["compile_lark", "LarkGrammar", "LarkMatcher"]

Configs = tuple[tuple[Stack, int], ...]  # the configurations a request may be in (one, but for every_match)
_START = -1  # lexer state of the empty lexeme at the very start (state 0, nothing read yet)
_CACHE_LIMIT = 200_000  # entries of the small caches (forced bytes)
_CACHE_BYTES = 256 << 20  # each mask cache of a grammar is cleared past this (a 49k vocabulary: ~5,000 bool rows)
_MAX_CONFIGS = 256  # parses followed at once (every_match): past it the grammar is refused at run time, loudly
_SMALL_GROUP = 48  # below this many tokens, resolve token by token instead of vectorized
_DIRECT_GROUP = 2048  # up to this many, walk the group's own bytes; above, a cached walk of all
_layouts: dict[str, TokenLayout] = {}
_layout_lock = threading.Lock()


def compile_lark(
    text: str, vocab, start: str = "start", lexer: str = "contextual", precompute: bool = True, every_match: bool = False,
) -> "LarkGrammar":
    """Compile a Lark grammar (LALR, `%import common` allowed) for `vocab`.

    `lexer` is Lark's lexer option ("contextual", Lark's LALR default, or "basic"); masks follow
    what `lark.Lark(text, parser="lalr", lexer=lexer, start=start)` accepts. A bad grammar raises
    GrammarError with Lark's message. every_match: a lexeme several terminals match is read as
    each of them, not as Lark's first, and may also end where a terminal accepts while another
    goes on (the grammar's language, for JSON schemas' grammars, whose union branches may hold
    overlapping terminals or write one text at different grains)."""
    import lark  # local: keeps `import constrained_spec.grammar` light

    if lexer not in ("contextual", "basic"):
        raise GrammarError(f"lexer must be 'contextual' or 'basic', got {lexer!r}")
    try:
        parser = lark.Lark(text, parser="lalr", lexer=lexer, start=start, _plugins=LALR_PLUGINS)
    except Exception as e:  # lark raises several exception types for bad grammars
        parts = [part for part in str(e).split("\n\n") if part.strip()]  # one per LALR conflict
        more = f"\n({len(parts) - 1} more like it)" if len(parts) > 1 else ""
        raise GrammarError(f"invalid Lark grammar: {parts[0] if parts else e}{more}") from e
    if parser.options.postlex is not None:
        raise GrammarError("Lark postlexers (e.g. Indenter) are not supported")
    return LarkGrammar(parser, vocab, start, lexer, precompute, every_match)


class LarkGrammar:
    """Immutable compiled grammar (CompiledGrammar protocol); its caches only memoize."""

    def __init__(self, parser, vocab, start: str, lexer: str, precompute: bool, every_match: bool = False) -> None:
        self.vocab = vocab
        self._size = int(vocab.size)
        self.eos_token_id = int(vocab.eos_token_id)
        self.table = LalrTable.from_lark(parser, start)
        terms = terminals_from_lark(parser.terminals)
        self.ignore = frozenset(str(n) for n in parser.ignore_tokens)
        self._token_bytes = vocab.token_bytes
        self.layout = _layout_for(vocab)

        # One lexer context per distinct terminal set offered by the lexer (per LALR state for
        # the contextual lexer, a single one for the basic lexer).
        self.contexts: list[LexerContext] = []
        self._ctx_of_state: dict[int, LexerContext] = {}
        by_key: dict[frozenset[str], LexerContext] = {}
        for state in self.table.states:
            if lexer == "basic":
                names = frozenset(terms)
            else:
                names = frozenset(s for s in self.table.symbols(state) if s in terms) | self.ignore
            ctx = by_key.get(names)
            if ctx is None:
                ctx = LexerContext([terms[n] for n in names], self.ignore, every_match=every_match)
                by_key[names] = ctx
                self.contexts.append(ctx)
            self._ctx_of_state[state] = ctx

        self._stride = self.layout.max_len + 1
        self._tables: dict[tuple[int, int], _Table] = {}
        self._suffixes: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._viable: dict[Stack, int] = {}
        self._allowed: dict[tuple[Stack, int], np.ndarray] = {}
        self._packed: dict[tuple[Stack, int], torch.Tensor] = {}
        self._forced: dict[tuple[Configs, int], bytes] = {}
        if precompute:  # the lexeme-start tables; mid-lexeme ones are built on first use
            for ctx in self.contexts:
                self._table(ctx, 0)

    # ---- CompiledGrammar -------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self._size

    def matcher(self) -> "LarkMatcher":
        return LarkMatcher(self)

    @property
    def initial_state(self) -> Configs:
        return ((self.table.start, _START),)

    # ---- parser / lexer steps ------------------------------------------------------------

    def ctx(self, stack: Stack) -> LexerContext:
        return self._ctx_of_state[stack[-1]]

    def viable_bits(self, stack: Stack) -> int:
        """Terminals of the stack's lexer context that may end a lexeme here: ignored ones, and
        those the parser can shift (after its reductions)."""
        got = self._viable.get(stack)
        if got is None:
            ctx = self.ctx(stack)
            got = 0
            for i, name in enumerate(ctx.terms):
                if name in self.ignore or self.table.feed(stack, name) is not None:
                    got |= 1 << i
            self._viable[stack] = got
        return got

    def emit(self, stack: Stack, ctx: LexerContext, term: int) -> Stack | None:
        """The parser after the lexeme ends as terminal `term` (ignored terminals: unchanged)."""
        name = ctx.terms[term]
        return stack if name in self.ignore else self.table.feed(stack, name)

    def advance(self, stack: Stack, s: int, data: bytes) -> list[tuple[Stack, int]]:
        """Exact byte-by-byte step of one configuration (the reference the masks agree with):
        the configurations it leads to, none if `data` is not allowed."""
        out: list[tuple[Stack, int]] = []
        todo = [(stack, 0 if s == _START else s, 0)]  # (stack, lexer state, bytes of data read)
        while todo:
            stack, s, i = todo.pop()
            ctx = self.ctx(stack)
            for i in range(i, len(data)):
                b = data[i]
                nxt = ctx.row(s)[b]
                # b ends the lexeme (or may, every_match, where a terminal accepts and another goes
                # on): emit it as each terminal it may be, b starts the next one
                for w in ctx.ends[s] if nxt < 0 else ctx.early[s]:
                    new_stack = self.emit(stack, ctx, w)
                    if new_stack is not None and (t := self.ctx(new_stack).row(0)[b]) >= 0:
                        todo.append((new_stack, t, i + 1))
                if nxt < 0:
                    break
                s = nxt
            else:
                if ctx.alive_bits[s] & self.viable_bits(stack) and (stack, s) not in out:
                    out.append((stack, s))
        return out

    def step(self, configs: Configs, data: bytes) -> Configs:
        """Every configuration `data` leads to from `configs` (empty: not allowed)."""
        if len(configs) == 1:
            return tuple(self.advance(*configs[0], data))
        out = dict.fromkeys(c for stack, s in configs for c in self.advance(stack, s, data))
        return tuple(out)

    def accepting(self, stack: Stack, s: int) -> bool:
        """The text so far is a complete parse (the pending lexeme, if any, ends as a terminal)."""
        if s == _START:
            return self.table.accepts_end(stack)
        ctx = self.ctx(stack)
        for w in ctx.ends[s]:
            new_stack = self.emit(stack, ctx, w)
            if new_stack is not None and self.table.accepts_end(new_stack):
                return True
        return False

    # ---- masks ---------------------------------------------------------------------------

    def _table(self, ctx: LexerContext, s: int) -> "_Table":
        """Every token walked from lexer state s of ctx, grouped by how it leaves the lexeme."""
        key = (id(ctx), s)
        got = self._tables.get(key)
        if got is None:
            layout = self.layout
            going_on = ctx.trans[s, :256] != ctx.dead  # bool [256]: first bytes that continue the lexeme
            # where most tokens end the lexeme at their first byte (inside a key, a literal goes on
            # with one byte), only the others are walked: the rest is one group, or none where
            # the lexeme cannot end here
            few = layout.starting_count(going_on) * 4 < layout.num_tokens
            rows = layout.rows_starting(going_on) if few else np.arange(layout.num_tokens)
            death, state, stops = layout.walk_rows_early(ctx.trans, rows, 0, s, ctx.early_states if ctx.has_early else None)
            got = _Table.build(ctx, rows, death, state, self._stride, stops)
            if few and ctx.end_arr[s] >= 0:
                got.groups.append((int(ctx.end_arr[s]), 0, layout.rows_starting(~going_on)))
            # mid-lexeme tables (token rows, int64 [N] each) are dropped past the budget; the
            # lexeme-start ones, one per context, are the grammar's own size and stay
            mid = len(self._tables) - len(self.contexts)
            if s != 0 and mid * self.layout.num_tokens * 8 > _CACHE_BYTES:
                self._tables = {k: t for k, t in self._tables.items() if k[1] == 0}
            self._tables[key] = got
        return got

    def _suffix(self, ctx: LexerContext, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Walks of `token[d:]` from the lexeme start of ctx for every token longer than d (the
        sorted rows are longest first, so these are rows [0, M)); cached per (ctx, d)."""
        key = (id(ctx), d)
        got = self._suffixes.get(key)
        if got is None:
            longer = np.arange(int(np.searchsorted(-self.layout.lengths, -d, side="left")))
            got = self.layout.walk_rows(ctx.trans, longer, d, 0)
            self._suffixes[key] = got
        return got

    def allowed_sorted(self, stack: Stack, s: int) -> np.ndarray:
        """Bool [N] over the layout's sorted tokens: allowed from this state (EOS excluded)."""
        key = (stack, s)
        got = self._allowed.get(key)
        if got is not None:
            return got
        ctx = self.ctx(stack)
        table = self._table(ctx, 0 if s == _START else s)
        got = np.zeros(self.layout.num_tokens, dtype=bool)
        got[table.stay_rows] = ctx.good_states(self.viable_bits(stack))[table.stay_state]
        for end, d, rows in table.groups:
            for w in ctx.end_sets[end]:
                new_stack = self.emit(stack, ctx, w)
                if new_stack is None:
                    continue  # the lexeme read as this terminal here: the parser rejects it
                if d == 0:
                    # The lexeme ends before the first byte: the whole token is read from the next
                    # lexeme's start, i.e. exactly that state's (cached) mask.
                    got[rows] |= self.allowed_sorted(new_stack, 0)[rows]
                else:
                    got[rows] |= self._resolve_rows(new_stack, rows, d)
        if len(self._allowed) * self.layout.num_tokens > _CACHE_BYTES:
            self._allowed.clear()
        self._allowed[key] = got
        return got

    def _resolve_rows(self, stack: Stack, rows: np.ndarray, d: int) -> np.ndarray:
        """Bool [M]: tokens `rows` [M] whose bytes from offset d start a fresh lexeme here."""
        if len(rows) <= _SMALL_GROUP:  # a few tokens: the exact per-byte step is cheaper
            tb, ids = self._token_bytes, self.layout.ids
            return np.array([bool(self.advance(stack, 0, tb[ids[r]][d:])) for r in rows.tolist()], dtype=bool)
        ctx = self.ctx(stack)
        stops: list = []
        if ctx.has_early:
            death, state, stops = self.layout.walk_rows_early(ctx.trans, rows, d, 0, ctx.early_states)
        elif len(rows) <= _DIRECT_GROUP:
            death, state = self.layout.walk_rows(ctx.trans, rows, d, 0)
        else:  # large groups recur with every new stack: walk all tokens once per (ctx, d)
            s_death, s_state = self._suffix(ctx, d)
            death, state = s_death[rows], s_state[rows]
        out = np.zeros(len(rows), dtype=bool)
        stayed = death < 0
        out[stayed] = ctx.good_states(self.viable_bits(stack))[state[stayed]]
        for end_k, d_k, sel in _end_groups(ctx, death, state, stops, self._stride):
            for w in ctx.end_sets[end_k]:
                new_stack = self.emit(stack, ctx, w)
                if new_stack is not None:
                    out[sel] |= self._resolve_rows(new_stack, rows[sel], d_k)
        return out

    def packed_mask(self, stack: Stack, s: int) -> torch.Tensor:
        """Int32 [ceil(V/32)] bitmask of this state, EOS included where accepting (cached)."""
        key = (stack, s)
        got = self._packed.get(key)
        if got is None:
            allowed = np.zeros(bitmask_width(self._size) * 32, dtype=bool)
            allowed[self.layout.ids] = self.allowed_sorted(stack, s)
            if self.accepting(stack, s) and self.eos_token_id < self._size:
                allowed[self.eos_token_id] = True
            words = np.packbits(allowed, bitorder="little").view("<u4").view(np.int32)
            got = torch.from_numpy(words.copy())
            if len(self._packed) * 4 * len(words) > _CACHE_BYTES:
                self._packed.clear()
            self._packed[key] = got
        return got

    def configs_mask(self, configs: Configs) -> torch.Tensor:
        """The packed mask of a set of configurations: the OR of each one's."""
        got = self.packed_mask(*configs[0])
        for stack, s in configs[1:]:
            got = got | self.packed_mask(stack, s)
        return got

    def configs_accepting(self, configs: Configs) -> bool:
        return any(self.accepting(stack, s) for stack, s in configs)

    # ---- forced bytes --------------------------------------------------------------------

    def forced(self, configs: Configs, max_bytes: int) -> bytes:
        """Bytes every continuation must start with, reading ignored terminals (whitespace) as
        absent, i.e. the compact canonical text; stops where EOS or a choice is possible."""
        key = (configs, max_bytes)
        got = self._forced.get(key)
        if got is not None:
            return got
        out = bytearray()
        while len(out) < max_bytes and configs and not self.configs_accepting(configs):
            nxt = self._single_next_byte(configs)
            if nxt is None:
                break
            out.append(nxt[0])
            configs = nxt[1]
        got = trim_partial_utf8(bytes(out))
        if len(self._forced) > _CACHE_LIMIT:
            self._forced.clear()
        self._forced[key] = got
        return got

    def _single_next_byte(self, configs: Configs) -> tuple[int, Configs] | None:
        """The one byte the compact text can go on with from `configs`, and where it leads."""
        found: tuple[int, dict] | None = None
        for b, after in self._next_bytes(configs).items():
            if found is not None:
                return None
            found = (b, after)
        return None if found is None else (found[0], tuple(found[1]))

    def _next_bytes(self, configs: Configs) -> dict[int, dict]:
        """Byte -> the configurations (as dict keys, in order) it leads to, over the compact
        text's next bytes from `configs` (not closing or continuing only ignored lexemes)."""
        out: dict[int, dict] = {}
        for stack, s in configs:
            ctx = self.ctx(stack)
            state = 0 if s == _START else s
            row = ctx.row(state)
            ends = ctx.ends[state] if s != _START else ()
            cand = {b for b, t in enumerate(row) if t >= 0}
            for w in ends:
                new_stack = self.emit(stack, ctx, w)
                if new_stack is not None:
                    cand.update(b for b, t in enumerate(self.ctx(new_stack).row(0)) if t >= 0)
            ends_ignored = bool(ends) and all(ctx.terms[w] in self.ignore for w in ends)
            for b in sorted(cand):
                if row[b] < 0 and ends_ignored:
                    continue  # b would close an ignored lexeme (whitespace): not the compact text
                for stack2, s2 in self.advance(stack, s, bytes([b])):
                    c2 = self.ctx(stack2)
                    if c2.alive_bits[s2] & self.viable_bits(stack2) & ~c2.ignore_bits:  # not only whitespace goes on
                        out.setdefault(b, {})[(stack2, s2)] = None
        return out


class _Table:
    """One (lexer context, state)'s token walk, grouped once: tokens staying inside the lexeme
    (with their end state) and, per (the terminals it may end as: an index into ctx.end_sets,
    byte offset), the tokens ending it there (_end_groups)."""

    __slots__ = ("stay_rows", "stay_state", "groups")

    @staticmethod
    def build(ctx: LexerContext, rows: np.ndarray, death: np.ndarray, state: np.ndarray, stride: int,
              stops: list[tuple[int, np.ndarray, np.ndarray]]) -> "_Table":
        t = _Table()
        stayed = death < 0
        t.stay_rows, t.stay_state = rows[stayed], state[stayed]
        t.groups = [(end, d, rows[sel]) for end, d, sel in _end_groups(ctx, death, state, stops, stride)]
        return t


def _end_groups(
    ctx: LexerContext, death: np.ndarray, state: np.ndarray, stops: list[tuple[int, np.ndarray, np.ndarray]], stride: int
) -> list[tuple[int, int, np.ndarray]]:
    """A walk's tokens (death, state [M]: TokenLayout.walk_rows_early) grouped by where the
    lexeme ends: (end set, byte offset, indices [K] into the walk's rows), for the tokens whose
    byte there continues no terminal (death), then, every_match, for those passing an early
    state (`stops`: the lexeme may also end before that byte)."""
    ended = np.flatnonzero(death >= 0)
    end = ctx.end_arr[state[ended]]
    ok = end >= 0  # ending where no terminal matches: never allowed
    ended, end = ended[ok], end[ok]
    keys = end.astype(np.int64) * stride + death[ended]
    order = np.argsort(keys, kind="stable")
    keys, ended = keys[order], ended[order]
    uniq, starts = np.unique(keys, return_index=True)
    bounds = list(starts[1:]) + [len(keys)]
    groups = [(int(k // stride), int(k % stride), ended[a:b]) for k, a, b in zip(uniq.tolist(), starts.tolist(), bounds)]
    for p, at, states in stops:
        ends = ctx.early_arr[states]
        groups += [(e, p, at[ends == e]) for e in np.unique(ends).tolist()]
    return groups


class LarkMatcher:
    """One request's position (GrammarMatcher protocol). History is a persistent linked list
    of states, so rollback is unbounded and fork is O(1)."""

    def __init__(self, grammar: LarkGrammar, node=None) -> None:
        self._g = grammar
        # node = ((configs, terminated), parent_node, depth)
        self._node = node if node is not None else ((grammar.initial_state, False), None, 0)

    @property
    def vocab_size(self) -> int:
        return self._g.vocab_size

    def _state(self) -> tuple[Configs, bool]:
        return self._node[0]

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        configs, done = self._state()
        if done:
            bitmask[row].zero_()
        else:
            bitmask[row].copy_(self._g.configs_mask(configs))

    def _step(self, state: tuple[Configs, bool], token_id: int) -> tuple[Configs, bool] | None:
        configs, done = state
        if done:
            return None
        if token_id == self._g.eos_token_id:
            return (configs, True) if self._g.configs_accepting(configs) else None
        tb = self._g._token_bytes
        if not 0 <= token_id < len(tb) or not tb[token_id]:
            return None
        nxt = self._g.step(configs, tb[token_id])
        if len(nxt) > _MAX_CONFIGS:
            raise GrammarError(f"the grammar is ambiguous beyond {_MAX_CONFIGS} parses followed at once here")
        return (nxt, False) if nxt else None

    def accept_token(self, token_id: int) -> None:
        state = self._state()
        nxt = self._step(state, int(token_id))
        if nxt is None:
            why = "the matcher is terminated" if state[1] else "not allowed by the grammar here"
            raise GrammarError(f"token {token_id} rejected: {why}")
        self._node = (nxt, self._node, self._node[2] + 1)

    def validate_tokens(self, token_ids: Sequence[int]) -> int:
        state = self._state()
        for n, tok in enumerate(token_ids):
            state = self._step(state, int(tok))
            if state is None:
                return n
        return len(token_ids)

    def rollback(self, num_tokens: int) -> None:
        if num_tokens < 0 or num_tokens > self._node[2]:
            raise GrammarError(f"cannot roll back {num_tokens} tokens: only {self._node[2]} accepted")
        node = self._node
        for _ in range(num_tokens):
            node = node[1]
        self._node = node

    def is_accepting(self) -> bool:
        configs, done = self._state()
        return not done and self._g.configs_accepting(configs)

    def is_terminated(self) -> bool:
        configs, done = self._state()
        if done:
            return True
        return not self._g.configs_accepting(configs) and not any(self._g.allowed_sorted(stack, s).any() for stack, s in configs)

    def forced_bytes(self, max_bytes: int = 64) -> bytes:
        configs, done = self._state()
        return b"" if done else self._g.forced(configs, max_bytes)

    def fork(self) -> "LarkMatcher":
        return LarkMatcher(self._g, self._node)

    @property
    def num_accepted(self) -> int:
        return self._node[2]


def _layout_for(vocab) -> TokenLayout:
    """One TokenLayout per vocabulary (by fingerprint), shared by all its grammars."""
    key = getattr(vocab, "fingerprint", None) or str(id(vocab))
    with _layout_lock:
        got = _layouts.get(key)
        if got is None:
            tb = list(vocab.token_bytes)
            if 0 <= vocab.eos_token_id < len(tb):
                tb[vocab.eos_token_id] = None  # EOS is handled by the grammar's accept state
            got = TokenLayout(tb)
            if len(_layouts) > 8:
                _layouts.clear()
            _layouts[key] = got
        return got
