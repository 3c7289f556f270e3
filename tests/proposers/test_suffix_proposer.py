import pytest

from constrained_spec.proposers import ProposalContext, SuffixProposer
from constrained_spec.sampling import SamplingParams
from proposer_toys import PEOPLE, SetMatcher, decode, encode


def context(output, matcher=None):
    return ProposalContext("r", prompt_ids=[7, 7], output_ids=list(output), params=SamplingParams(), matcher=matcher)


def test_learns_from_earlier_outputs():
    proposer = SuffixProposer()
    assert len(proposer.propose(context([1, 2]), 4)) == 0  # nothing learned yet
    proposer.observe([9], [1, 2, 3, 4, 5, 0])
    draft = proposer.propose(context([8, 2, 3]), 3)
    assert draft.token_ids == [4, 5, 0] and draft.probs is None and draft.source == "suffix"


def test_start_of_output_is_matched():
    proposer = SuffixProposer()
    proposer.observe([], [4, 5, 6])
    proposer.observe([], [9, 4, 8])
    assert proposer.propose(context([]), 3).token_ids == [4, 5, 6]  # not [4, 8]: outputs start with 4 5 6


def test_most_frequent_continuation_and_min_frequency():
    proposer = SuffixProposer(min_frequency=0.5)
    for _ in range(3):
        proposer.observe([], [1, 2, 3])
    proposer.observe([], [1, 2, 4])
    assert proposer.propose(context([6, 1, 2]), 2).token_ids == [3]
    strict = SuffixProposer(min_frequency=0.9)
    for tail in (3, 3, 4):
        strict.observe([], [1, 2, tail])
    assert strict.propose(context([6, 1]), 4).token_ids == [2]  # 2 always follows 1; 3 only 2 of 3 times


def test_old_outputs_are_forgotten():
    proposer = SuffixProposer(max_outputs=2)
    proposer.observe([], [1, 2, 3])
    proposer.observe([], [5, 6])
    proposer.observe([], [7, 8])
    assert len(proposer.propose(context([1, 2]), 2)) == 0
    assert proposer.propose(context([7]), 2).token_ids == [8]


def test_draft_cut_by_grammar():
    proposer = SuffixProposer()
    proposer.observe([], encode('{"name":"Alixx"}'))
    m = SetMatcher(PEOPLE)
    out = encode('{"name":"')
    for t in out:
        m.accept_token(t)
    draft = proposer.propose(context(out, m), 10)
    assert decode(draft.token_ids) == b"Ali"
    assert m.validate_tokens(draft.token_ids) == len(draft)


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_match < depth"):
        SuffixProposer(max_match=8, depth=8)
