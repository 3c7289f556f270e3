import pytest
import torch

from constrained_spec.proposers import ChainProposer, Draft, ForcedProposer, NgramProposer, ProposalContext, SuffixProposer, auto_proposer
from constrained_spec.sampling import SamplingParams
from proposer_toys import PEOPLE, VOCAB, SetMatcher, decode, encode


def context(prompt, output, matcher):
    return ProposalContext("r", prompt_ids=list(prompt), output_ids=list(output), params=SamplingParams(), matcher=matcher)


def start(text="{"):
    m = SetMatcher(PEOPLE)
    out = encode(text)
    for t in out:
        m.accept_token(t)
    return m, out


def test_forced_then_copy_then_forced_again():
    m, out = start()
    before = list(m.history)
    chain = ChainProposer([ForcedProposer(encode), NgramProposer(min_n=1)], min_reach=0)
    draft = chain.propose(context(encode('":"Alice"x'), out, m), 16)
    # forced key, the name copied from the prompt (cut before `x`), then the rest forced again.
    assert decode(draft.token_ids) == b'"name":"Alice","age":30}'
    assert draft.source == "forced+ngram+forced"
    assert draft.num_forced == len(encode('"name":"'))
    assert draft.probs is None
    assert m.validate_tokens(draft.token_ids) == len(draft)
    assert m.history == before  # the request's matcher is never advanced


def test_budget_is_respected():
    m, out = start()
    chain = ChainProposer([ForcedProposer(encode), NgramProposer(min_n=1)], min_reach=0)
    full = chain.propose(context(encode('":"Alice"x'), out, m), 16).token_ids
    for k in range(len(full) + 1):
        assert chain.propose(context(encode('":"Alice"x'), out, m), k).token_ids == full[:k]


class DenseOne:
    """A fake sampling proposer: one token with a dense q row (uniform over two tokens)."""

    name = "dense"

    def __init__(self, token):
        self.token = token

    def propose(self, context, max_tokens):
        q = torch.zeros(1, VOCAB)
        q[0, self.token] = q[0, self.token + 1] = 0.5
        return Draft(token_ids=[self.token], probs=q, source=self.name)

    def observe(self, prompt_ids, output_ids):
        self.seen = (list(prompt_ids), list(output_ids))


def test_mixed_draft_stacks_one_hot_rows_with_dense_rows():
    m, out = start()
    bob = encode("Bob")[0]
    draft = ChainProposer([ForcedProposer(encode), DenseOne(bob)], min_reach=0).propose(context([], out, m), 5)
    # forced `"`, `name`, `":"`; the dense proposer's `Bob`; forced `",` again.
    assert decode(draft.token_ids) == b'"name":"Bob",'
    assert draft.source == "forced+dense+forced" and draft.num_forced == 3
    assert draft.probs is not None and draft.probs.shape == (5, VOCAB)
    one_hot = torch.nn.functional.one_hot(torch.tensor(draft.token_ids), VOCAB).float()
    dense_row = torch.zeros(VOCAB)
    dense_row[bob] = dense_row[bob + 1] = 0.5
    assert torch.equal(draft.probs[[0, 1, 2, 4]], one_hot[[0, 1, 2, 4]])
    assert torch.equal(draft.probs[3], dense_row)


def test_observe_reaches_every_member_and_auto_learns():
    dense = DenseOne(1)
    ChainProposer([NgramProposer(), dense]).observe([1], [2, 3])
    assert dense.seen == ([1], [2, 3])
    auto = auto_proposer(encode)
    assert auto.name == "auto" and [p.name for p in auto.proposers] == ["forced", "ngram", "suffix"]
    m, out = start('{"name":"')  # three names possible: nothing forced, nothing to copy
    assert len(auto.propose(context([], out, m), 16)) == 0
    auto.observe([], encode('{"name":"Bob","age":41}'))
    pruned = auto.propose(context([], out, m), 16)  # nothing verified yet: prior 0.5 per token
    auto.min_reach = 0
    draft = auto.propose(context([], out, m), 16)  # the suffix tree recalls the whole output
    assert decode(draft.token_ids) == b'Bob","age":41}' and draft.source == "suffix"
    assert 0 < len(pruned) < len(draft) and draft.token_ids[: len(pruned)] == pruned.token_ids


def test_empty_chain_rejected():
    with pytest.raises(ValueError, match="at least one proposer"):
        ChainProposer([])


def test_suffix_after_forced_in_chain():
    suffix = SuffixProposer()
    suffix.observe([], encode('{"name":"Rome","city":"Paris"}'))
    m, out = start()
    draft = ChainProposer([ForcedProposer(encode), suffix], min_reach=0).propose(context([], out, m), 32)
    assert decode(draft.token_ids) == b'"name":"Rome","city":"Paris"}'


class Fixed:
    """A fake one-hot proposer that always offers the same tokens and records feedback."""

    def __init__(self, name, tokens):
        self.name, self.tokens, self.feedback = name, list(tokens), []

    def propose(self, context, max_tokens):
        if context.num_drafted and self.tokens[0] in context.output_ids[-context.num_drafted :]:
            return Draft(source=self.name)  # once per draft
        return Draft(token_ids=self.tokens[:max_tokens], source=self.name)

    def observe(self, prompt_ids, output_ids):
        pass

    def verified(self, request_id, num_drafted, num_accepted):
        self.feedback.append((request_id, num_drafted, num_accepted))


def plain_context(request_id="r", temperature=1.0):
    return ProposalContext(request_id, prompt_ids=[1], output_ids=[2], params=SamplingParams(temperature=temperature), matcher=None)


def test_pruning_follows_each_members_learned_acceptance():
    good, poor = Fixed("good", [5] * 8), Fixed("poor", [6] * 8)
    chain = ChainProposer([good], min_reach=0.15)
    # Prior 0.5 per token: 0.5, 0.25 kept; 0.125 < 0.15 cut.
    assert chain.propose(plain_context(), 8).token_ids == [5, 5]
    for _ in range(60):  # every drafted token accepted: the estimate climbs towards 1
        n = len(chain.propose(plain_context(), 8))
        chain.verified("r", n, n)
    assert chain.acceptance("good", 0, greedy=False) > 0.9
    assert chain.propose(plain_context(), 8).token_ids == [5] * 8
    assert chain.acceptance("good", 0, greedy=True) == 0.5  # greedy requests are tracked apart
    assert good.feedback[-1] == ("r", 8, 8)  # feedback reaches the members

    chain = ChainProposer([poor], min_reach=0.15)
    for _ in range(60):  # the first token is always rejected
        n = len(chain.propose(plain_context(), 8))
        if not n:
            break
        chain.verified("r", n, 0)
    assert chain.acceptance("poor", 0, greedy=False) < 0.15
    assert len(chain.propose(plain_context(), 8)) == 0  # not worth verifying any more
    assert len(ChainProposer([poor], min_reach=0).propose(plain_context(), 8)) == 8  # pruning off


def test_pruning_cuts_inside_a_member_and_stops_the_chain():
    first, second = Fixed("first", [5, 5]), Fixed("second", [7, 7, 7])
    chain = ChainProposer([first, second], prior={"first": 1.0, "second": 0.4}, min_reach=0.15)
    # first: 1.0, 1.0; second: 0.4 kept, 0.16 kept, 0.064 cut; nothing after a cut.
    draft = chain.propose(plain_context(), 8)
    assert draft.token_ids == [5, 5, 7, 7] and draft.source == "first+second"
    with pytest.raises(ValueError, match="min_reach"):
        ChainProposer([first], min_reach=1.0)
