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


def spelled(*pieces: bytes) -> list[int]:
    return [TOKEN_ID[p] for p in pieces]


def test_learns_the_models_own_spelling_from_committed_output():
    proposer = ForcedProposer(encode, token_bytes=TOKENS)
    m, out = SetMatcher(PEOPLE), []
    out = advance(m, "{")
    assert proposer.propose(context(m, out), 8).token_ids == encode('"name":"')  # canonical: `":"` merged
    # The model wrote the key as `"` `name` `":` `"` and went on; the proposer sees that next time.
    model_tokens = spelled(b'"', b"name", b'":', b'"', b"Bob")
    for t in model_tokens:
        m.accept_token(t)
    proposer.propose(context(m, out + model_tokens), 8)
    fresh = SetMatcher(PEOPLE)
    first = advance(fresh, "{")
    draft = proposer.propose(ProposalContext("other", [1], first, SamplingParams(), fresh), 8)
    assert draft.token_ids == spelled(b'"', b"name", b'":', b'"')
    assert fresh.validate_tokens(draft.token_ids) == len(draft)


def test_unverified_drafts_are_not_learned_and_a_merged_tail_is_held_back():
    lang = [b'{"a":"x"}', b'{"a":1}']
    proposer = ForcedProposer(encode, token_bytes=TOKENS)
    m = SetMatcher(lang)
    out = advance(m, '{"a')
    assert proposer.propose(context(m, out), 8).token_ids == spelled(b'":')
    # The model writes `":"` as one token, running past the forced `":`. As an unverified draft
    # (num_drafted) this teaches nothing...
    tokens = spelled(b'":"', b"x")
    for t in tokens:
        m.accept_token(t)
    proposer.propose(ProposalContext("r", [1], out + tokens, SamplingParams(), m, num_drafted=2), 8)
    fresh = SetMatcher(lang)
    assert proposer.propose(ProposalContext("s", [1], advance(fresh, '{"a'), SamplingParams(), fresh), 8).token_ids == spelled(b'":')
    # ...once committed, the proposer learns that no token ends inside `":` and proposes nothing.
    proposer.propose(ProposalContext("r", [1], out + tokens, SamplingParams(), m), 8)
    fresh = SetMatcher(lang)
    assert len(proposer.propose(ProposalContext("t", [1], advance(fresh, '{"a'), SamplingParams(), fresh), 8)) == 0


def test_learned_piece_rewrites_apply_to_other_forced_texts():
    proposer = ForcedProposer(encode, token_bytes=TOKENS)
    m = SetMatcher(PEOPLE)
    out = advance(m, "{")
    proposer.propose(context(m, out), 8)
    model_tokens = spelled(b'"', b"name", b'":', b'"', b"Bob")  # `":"` written as `":` `"`
    for t in model_tokens:
        m.accept_token(t)
    proposer.propose(context(m, out + model_tokens), 8)
    # A different forced text containing the canonical `":"` piece gets the model's spelling.
    other = SetMatcher([b'{"city":"x"}', b'{"city":"y"}'])
    first = advance(other, "{")
    draft = proposer.propose(ProposalContext("o", [1], first, SamplingParams(), other), 8)
    assert draft.token_ids == spelled(b'"', b"city", b'":', b'"')


def write_key(proposer, request_id, spelling):
    """One request: the proposer proposes the `"name":"` key, the model commits `spelling` + Bob."""
    m = SetMatcher(PEOPLE)
    out = advance(m, "{")
    proposer.propose(ProposalContext(request_id, [1], out, SamplingParams(), m), 8)
    for t in spelling + spelled(b"Bob"):
        m.accept_token(t)
    proposer.propose(ProposalContext(request_id, [1], out + spelling + spelled(b"Bob"), SamplingParams(), m), 8)


def test_proposes_the_spelling_the_model_used_most_often():
    proposer = ForcedProposer(encode, token_bytes=TOKENS)
    merged, split = spelled(b'"', b"name", b'":"'), spelled(b'"', b"name", b'":', b'"')

    def proposal():
        fresh = SetMatcher(PEOPLE)
        return proposer.propose(ProposalContext("probe", [1], advance(fresh, "{"), SamplingParams(), fresh), 8).token_ids

    write_key(proposer, "a", split)
    write_key(proposer, "b", merged)
    assert proposal() == merged  # one each: the latest wins the tie
    write_key(proposer, "c", split)
    assert proposal() == split  # two against one
    write_key(proposer, "d", merged)
    write_key(proposer, "e", merged)
    assert proposal() == merged  # at T > 0 the counts follow the model's most likely spelling


def test_at_t_above_zero_a_spelling_is_drawn_from_the_observed_ones_with_dense_q():
    import torch

    proposer = ForcedProposer(encode, token_bytes=TOKENS)
    merged, split = spelled(b'"', b"name", b'":"'), spelled(b'"', b"name", b'":', b'"')
    for request_id, spelling in [("a", merged), ("b", split), ("c", split), ("d", split)]:
        write_key(proposer, request_id, spelling)

    def draw(seed, temperature=1.0):
        fresh = SetMatcher(PEOPLE)
        first = advance(fresh, "{")
        generator = torch.Generator().manual_seed(seed)
        params = SamplingParams(temperature=temperature)
        return proposer.propose(ProposalContext("probe", [1], first, params, fresh, generator=generator), 8), fresh

    seen = {}
    for seed in range(200):
        draft, fresh = draw(seed)
        assert draft.token_ids in (merged, split) and fresh.validate_tokens(draft.token_ids) == len(draft)
        assert draft.probs is not None and draft.probs.shape == (len(draft), len(TOKENS))
        assert torch.allclose(draft.probs.sum(1), torch.ones(len(draft)))
        # Rows 0-1 (`"`, `name`) are shared by every spelling; row 2 splits 1 : 3.
        assert draft.probs[0, merged[0]] == 1 and draft.probs[1, merged[1]] == 1
        assert draft.probs[2, merged[2]] == 0.25 and draft.probs[2, split[2]] == 0.75
        if draft.token_ids == split:
            assert draft.probs[3, split[3]] == 1
        seen[tuple(draft.token_ids)] = seen.get(tuple(draft.token_ids), 0) + 1
        assert draw(seed)[0].token_ids == draft.token_ids  # a function of the generator's state
    # Drawn with q: 200 draws at share 0.25, a binomial; the bounds hold with probability > 0.999.
    assert 25 <= seen[tuple(merged)] <= 78
    greedy, _ = draw(0, temperature=0.0)  # greedy: the most frequent spelling, one-hot
    assert greedy.token_ids == split and greedy.probs is None
