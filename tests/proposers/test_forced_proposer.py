import pytest

from constrained_spec.proposers import ForcedProposer, ProposalContext
from constrained_spec.sampling import SamplingParams
from proposer_toys import PEOPLE, TOKEN_ID, SetMatcher, TOKENS, decode, encode


def context(matcher, output=()):
    return ProposalContext("r", prompt_ids=[1, 2], output_ids=list(output), params=SamplingParams(), matcher=matcher)


def advance(matcher, text: str):
    ids = encode(text)
    for t in ids:
        matcher.accept_token(t)
    return ids


def test_proposes_forced_key_after_open_brace():
    m = SetMatcher(PEOPLE)
    out = advance(m, "{")
    draft = ForcedProposer(encode).propose(context(m, out), 8)
    assert decode(draft.token_ids) == b'"name":"'
    assert draft.token_ids == encode('"name":"')
    assert draft.probs is None and draft.num_forced == len(draft) and draft.source == "forced"
    assert m.validate_tokens(draft.token_ids) == len(draft)


def test_deterministic_and_leaves_matcher_untouched():
    m = SetMatcher(PEOPLE)
    advance(m, "{")
    before = list(m.history)
    proposer = ForcedProposer(encode)
    drafts = [proposer.propose(context(m), 8).token_ids for _ in range(3)]
    assert drafts[0] == drafts[1] == drafts[2]
    assert m.history == before


def test_nothing_forced_gives_empty_draft():
    m = SetMatcher(PEOPLE)
    advance(m, '{"name":"')  # Alice / Bob / Rome: no common continuation
    assert len(ForcedProposer(encode).propose(context(m), 8)) == 0
    assert len(ForcedProposer(encode).propose(context(None), 8)) == 0


def test_max_tokens_and_tail_drop():
    m = SetMatcher(PEOPLE)
    advance(m, "{")
    full = ForcedProposer(encode).propose(context(m), 8).token_ids
    assert len(full) >= 2
    assert ForcedProposer(encode).propose(context(m), 1).token_ids == full[:1]
    assert ForcedProposer(encode, tail="drop").propose(context(m), 8).token_ids == full[:-1]


def test_cut_where_grammar_rejects_the_encoding():
    # An encoder that appends a token the grammar forbids: the draft stops right before it.
    m = SetMatcher([b'{"name": "x"}', b'{"name": "y"}'])
    advance(m, "{")
    draft = ForcedProposer(lambda text: encode(text) + [TOKEN_ID[b"}"]]).propose(context(m), 16)
    assert m.validate_tokens(draft.token_ids) == len(draft)
    assert decode(draft.token_ids) == b'"name": "'


def test_token_bytes_cut_where_encoding_does_not_spell_the_forced_text():
    m = SetMatcher(PEOPLE)
    advance(m, "{")
    space_first = lambda text: [TOKEN_ID[b" "]] + encode(text)  # like a SentencePiece prefix space
    assert len(ForcedProposer(space_first, token_bytes=TOKENS).propose(context(m), 8)) == 0


def test_incomplete_utf8_is_cut_to_whole_characters():
    class Forced:
        def __init__(self, data):
            self.data = data

        def is_terminated(self):
            return False

        def forced_bytes(self, max_bytes=64):
            return self.data

        def validate_tokens(self, ids):
            return len(ids)

    seen = []
    ForcedProposer(lambda text: seen.append(text) or [1]).propose(context(Forced("né".encode()[:-1])), 4)
    assert seen == ["n"]


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="tail='maybe'"):
        ForcedProposer(encode, tail="maybe")
    with pytest.raises(TypeError, match="expected a tokenizer"):
        ForcedProposer(42)
