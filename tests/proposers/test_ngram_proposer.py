import pytest

from constrained_spec.proposers import NgramProposer, ProposalContext
from constrained_spec.sampling import SamplingParams
from proposer_toys import PEOPLE, TOKEN_ID, TOKENS, SetMatcher, decode, encode


def context(prompt, output, matcher=None):
    return ProposalContext("r", prompt_ids=list(prompt), output_ids=list(output), params=SamplingParams(), matcher=matcher)


def test_copies_from_the_prompt():
    prompt = [5, 6, 7, 8, 9, 10, 11, 3]
    draft = NgramProposer(min_n=2).propose(context(prompt, [1, 7, 8]), 4)
    assert draft.token_ids == [9, 10, 11, 3]
    assert draft.probs is None and draft.source == "ngram"


def test_longest_match_wins_and_most_recent_breaks_ties():
    # [2, 3] is followed by 4 early and by 9 later; [1, 2, 3] only by 4: the longer match decides.
    prompt = [1, 2, 3, 4, 0, 2, 3, 9]
    assert NgramProposer(min_n=2, max_n=3).propose(context(prompt, [1, 2, 3]), 1).token_ids == [4]
    assert NgramProposer(min_n=2, max_n=2).propose(context(prompt, [7, 2, 3]), 1).token_ids == [9]


def test_no_match_and_no_budget_give_empty_drafts():
    assert len(NgramProposer().propose(context([1, 2, 3], [4, 5]), 4)) == 0
    assert len(NgramProposer(min_n=1).propose(context([1, 2, 3], [2]), 0)) == 0


def test_cut_at_first_token_the_grammar_forbids_and_prefers_grammar_valid_copy():
    # The prompt holds the JSON twice; the most recent copy continues with a forbidden token.
    good = encode('{"name":"Alice","age":30}')
    bad = encode('{"name":"Alixx')
    m = SetMatcher(PEOPLE)
    out = encode('{"name":"')
    for t in out:
        m.accept_token(t)
    draft = NgramProposer(min_n=2).propose(context(good + [1] + bad, out, m), 10)
    assert m.validate_tokens(draft.token_ids) == len(draft) > 0
    assert decode(draft.token_ids).startswith(b"Alice")


def walked(text):
    """A PEOPLE matcher advanced along `text`, and text's tokens."""
    m, out = SetMatcher(PEOPLE), encode(text)
    for t in out:
        m.accept_token(t)
    return m, out


def test_grammar_cut_with_single_candidate():
    prompt = encode('{"name":"Alixx"}')
    m, out = walked('{"name":"')
    draft = NgramProposer(min_n=2).propose(context(prompt, out, m), 10)
    assert decode(draft.token_ids) == b"Ali"


def test_deterministic():
    prompt, out = [3, 1, 4, 1, 5, 9, 2, 6, 1, 4], [1, 4]
    proposer = NgramProposer(min_n=1)
    assert len({tuple(proposer.propose(context(prompt, out), 3).token_ids) for _ in range(3)}) == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="min_n <= max_n"):
        NgramProposer(min_n=3, max_n=2)


# ---- byte matching (token_bytes given) ----


def test_byte_matching_copies_across_different_token_boundaries():
    # The prompt spells `Alice` as `Ali` `ce`; the output has `Ali` `c`: no token 2-gram matches,
    # but the bytes `Alic` do, and the match ends inside `ce`: its `e` is spelled by encode.
    prompt = encode("x Alice, 30")
    output = [TOKEN_ID[b"Ali"], TOKEN_ID[b"c"]]
    assert len(NgramProposer(min_n=2).propose(context(prompt, output), 4)) == 0
    proposer = NgramProposer(token_bytes=TOKENS, encode=encode)
    draft = proposer.propose(context(prompt, output), 5)
    assert decode(draft.token_ids) == b"e, 30" and draft.token_ids[0] == TOKEN_ID[b"e"]
    assert draft.source == "ngram" and draft.probs is None
    # Without encode, a match ending inside a token cannot be spelled: no draft.
    assert len(NgramProposer(token_bytes=TOKENS).propose(context(prompt, output), 4)) == 0


def test_byte_matching_needs_letters_or_digits_in_the_match():
    # `":"` occurred before, followed by the earlier value; a match of punctuation alone is a
    # guess, not a copy.
    prompt = encode('{"name":"Bob","city":"')
    proposer = NgramProposer(token_bytes=TOKENS, encode=encode)
    assert len(proposer.propose(context(prompt, []), 4)) == 0
    loose = NgramProposer(token_bytes=TOKENS, encode=encode, min_word_bytes=0)
    assert decode(loose.propose(context(prompt, []), 4).token_ids).startswith(b"Bob")


def test_byte_matching_respects_the_grammar_and_is_deterministic():
    prompt = encode('{"name":"Alixx"}')
    m, out = walked('{"name":"')
    proposer = NgramProposer(token_bytes=TOKENS, encode=encode)
    drafts = {tuple(proposer.propose(context(prompt, out, m), 10).token_ids) for _ in range(3)}
    assert len(drafts) == 1
    (draft,) = drafts
    assert decode(draft) == b"Ali" and m.validate_tokens(list(draft)) == len(draft)


def test_byte_matching_bad_arguments():
    with pytest.raises(ValueError, match="min_bytes"):
        NgramProposer(token_bytes=TOKENS, min_bytes=0)


def test_byte_matching_kept_history_equals_a_fresh_proposer():
    """The bytes of a request's history are kept between steps and extended by its new tokens;
    drafts must equal those of a proposer that decodes the whole history each time, also when a
    request id comes back with another history (not an extension) and across requests."""
    import random

    rng = random.Random(0)
    kept = NgramProposer(token_bytes=TOKENS, encode=encode)
    words = [encode(w) for w in ("Alice", " Bob", ", 30", '{"name":"', '"}', " Ali", "ce")]
    for round_ in range(40):
        request = f"r{round_ % 3}"  # ids come back: sometimes extended, sometimes replaced
        prompt = [t for _ in range(rng.randint(1, 4)) for t in rng.choice(words)]
        output: list[int] = []
        for _ in range(rng.randint(1, 6)):
            output += rng.choice(words)
            ctx = ProposalContext(request, prompt_ids=prompt, output_ids=list(output), params=SamplingParams(), matcher=None)
            fresh = NgramProposer(token_bytes=TOKENS, encode=encode)
            assert kept.propose(ctx, 6).token_ids == fresh.propose(ctx, 6).token_ids
