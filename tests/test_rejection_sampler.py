"""The batched, ragged rejection sampler: shapes, truncation, greedy, determinism, and seeded
Monte Carlo chi-square tests that its output is distributed exactly like the target.

Distribution tests: N = 20,000 samples each, significance level alpha = 0.001, fixed seeds. Cells
whose expected count is below 5 are pooled into one cell before the test.
"""

import itertools
import random

import pytest
import torch

from constrained_spec.bitmask import pack_allowed
from constrained_spec.rejection import draw_randomness, rejection_sample
from constrained_spec.sampling import SamplingParams, process_logits
from constrained_spec.selfcheck import chi_square

N_SAMPLES = 20_000
ALPHA = 1e-3


def chi_square_p_value(counts: dict, expected_probs: dict, n: int) -> float:
    """Pearson's chi-square (cells expected < 5 times pooled, via `selfcheck.chi_square`); first
    checks that no zero-probability outcome was emitted."""
    assert set(counts) <= {key for key, prob in expected_probs.items() if prob > 0}, "a zero-probability outcome was emitted"
    assert sum(counts.values()) == n
    keys = list(expected_probs)
    return chi_square([counts.get(key, 0) for key in keys], [expected_probs[key] for key in keys])[2]


def _run(target_probs, drafts, draft_probs, greedy, seeds):
    cu = torch.tensor([0] + list(itertools.accumulate(len(d) for d in drafts)))
    flat = torch.tensor([t for d in drafts for t in d], dtype=torch.long)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    randomness = draw_randomness(gens, [len(d) for d in drafts], target_probs.shape[1])
    return rejection_sample(target_probs, flat, cu, draft_probs, randomness, torch.tensor(greedy))


def test_output_layout_and_truncation():
    # Request 0 drafts two certain tokens (p one-hot on them): all accepted + bonus.
    # Request 1 drafts a token with p = 0: rejected at once, replacement from the residual.
    # Request 2 drafts nothing: only the bonus token.
    eye = torch.eye(4)
    target = torch.stack([eye[1], eye[2], eye[3], eye[0], eye[3], eye[2]])
    out, accepted = _run(target, [[1, 2], [1], []], None, [False, False, False], [1, 2, 3])
    assert out.tolist() == [[1, 2, 3], [0, -1, -1], [2, -1, -1]]
    assert accepted.tolist() == [2, 0, 0]


def test_greedy_matches_argmax_and_stops_at_first_mismatch():
    target = torch.tensor([[0.1, 0.9, 0.0], [0.6, 0.4, 0.0], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
    # Drafts [1, 1, 2]: position 0 matches argmax 1, position 1's argmax is 0 -> replaced, rest dropped.
    out, accepted = _run(target, [[1, 1, 2]], None, [True], [0])
    assert out.tolist() == [[1, 0, -1, -1]] and accepted.tolist() == [1]


def test_masked_draft_is_never_emitted():
    # p(x) = 0 for the drafted token; dense q puts most mass there. Over many seeds, never emitted.
    target = torch.tensor([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]]).repeat(200, 1)
    q = torch.tensor([[0.9, 0.05, 0.05]]).repeat(200, 1)
    out, accepted = _run(target, [[0]] * 200, q, [False] * 200, range(200))
    assert (out[:, 0] != 0).all() and (accepted == 0).all()


def test_seeded_requests_are_reproducible_and_batch_independent():
    gen = torch.Generator().manual_seed(0)
    target = torch.softmax(torch.randn(6, 10, generator=gen), -1)
    q = torch.softmax(torch.randn(4, 10, generator=gen), -1)
    drafts = [[1, 2], [3, 4]]
    first = _run(target, drafts, q, [False, False], [7, 8])
    again = _run(target, drafts, q, [False, False], [7, 8])
    assert torch.equal(first[0], again[0])
    alone, _ = _run(target[3:6], drafts[1:], q[2:], [False], [8])
    assert torch.equal(alone[0], first[0][1])


def test_input_validation():
    target = torch.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="rows"):
        _run(target, [[0, 1]], None, [False], [0])
    with pytest.raises(ValueError, match="draft_probs"):
        _run(target, [[0]], torch.ones(2, 3) / 3, [False], [0])
    with pytest.raises(ValueError, match="q\\(x\\) = 0"):
        _run(target, [[0]], torch.tensor([[0.0, 0.5, 0.5]]), [False], [0])


@pytest.mark.parametrize("dense", [True, False])
def test_single_step_distribution(dense):
    """N = 20,000 single-draft requests, alpha = 0.001, seed 11: emitted token ~ p."""
    gen = torch.Generator().manual_seed(11)
    vocab = 6
    p = torch.softmax(torch.randn(vocab, generator=gen) * 1.5, -1)
    q = torch.softmax(torch.randn(vocab, generator=gen) * 1.5, -1)
    draws = torch.multinomial(q, N_SAMPLES, replacement=True, generator=gen) if dense else torch.full((N_SAMPLES,), 2)
    target = torch.stack([p, p]).repeat(N_SAMPLES, 1)  # draft row + bonus row per request
    out, _ = _run(target, [[int(x)] for x in draws], q.repeat(N_SAMPLES, 1) if dense else None, [False] * N_SAMPLES, range(N_SAMPLES))
    counts = torch.bincount(out[:, 0], minlength=vocab).tolist()
    p_value = chi_square_p_value(dict(enumerate(counts)), dict(enumerate(p.tolist())), N_SAMPLES)
    assert p_value > ALPHA


# --- several steps in a row: a toy conditional target and draft model -----------------------

VOCAB = 5
PROMPT = [0, 1]
LENGTH = 3
_gen = torch.Generator().manual_seed(2026)
TARGET_TABLES = (torch.randn(VOCAB, VOCAB, generator=_gen) * 1.5, torch.randn(VOCAB, VOCAB, generator=_gen))
DRAFT_TABLES = (torch.randn(VOCAB, VOCAB, generator=_gen) * 1.5, torch.randn(VOCAB, VOCAB, generator=_gen))


def toy_logits(tables, history):
    """Logits after `history` depend on the last two tokens."""
    return tables[0][history[-1]] + tables[1][history[-2]]


def grammar_mask(history):
    """A toy grammar: token 4 may not follow token 3, and token 0 may not follow token 0."""
    allowed = torch.ones(VOCAB, dtype=torch.bool)
    if history[-1] == 3:
        allowed[4] = False
    if history[-1] == 0:
        allowed[0] = False
    return allowed


class ToySpeculator:
    """Generates LENGTH tokens for many requests in lockstep with ragged random draft lengths, one
    `rejection_sample` call per step, memoizing the processed distributions per history."""

    def __init__(self, params, dense):
        self.params, self.dense = params, dense
        self._probs = {}

    def probs(self, tables, output, masked=True):
        key = (id(tables), tuple(output), masked)
        if key not in self._probs:
            history = PROMPT + list(output)
            mask = pack_allowed(grammar_mask(history).unsqueeze(0)) if masked else None
            self._probs[key] = process_logits(toy_logits(tables, history).unsqueeze(0), self.params, PROMPT, output, bitmask=mask)[0]
        return self._probs[key]

    def target_rows(self, output, draft):
        # One batched call per request, exactly as the engine does: row j sees draft[:j].
        key = ("rows", tuple(output), tuple(draft))
        if key not in self._probs:
            histories = [PROMPT + list(output) + list(draft[:j]) for j in range(len(draft) + 1)]
            logits = torch.stack([toy_logits(TARGET_TABLES, h) for h in histories])
            mask = pack_allowed(torch.stack([grammar_mask(h) for h in histories]))
            self._probs[key] = process_logits(logits, self.params, PROMPT, output, draft, bitmask=mask)
        return self._probs[key]

    def run(self, n, seed):
        rng = random.Random(seed)
        draft_gen = torch.Generator().manual_seed(seed)
        outputs = [[] for _ in range(n)]
        step = 0
        while True:
            active = [i for i in range(n) if len(outputs[i]) < LENGTH]
            if not active:
                return outputs
            drafts, q_rows, target_rows = [], [], []
            for i in active:
                k, draft = rng.randint(0, 3), []
                for _ in range(k):
                    if self.dense:
                        q = self.probs(DRAFT_TABLES, outputs[i] + draft)
                        q_rows.append(q)
                        draft.append(int(torch.multinomial(q, 1, generator=draft_gen)))
                    else:  # deterministic, unmasked: may propose forbidden tokens
                        draft.append(int(self.probs(DRAFT_TABLES, outputs[i] + draft, masked=False).argmax()))
                drafts.append(draft)
                target_rows.append(self.target_rows(outputs[i], draft))
            draft_probs = torch.stack(q_rows) if self.dense and q_rows else None
            if self.dense and not q_rows:
                draft_probs = torch.empty(0, VOCAB)
            seeds = [seed * 1_000_003 + step * 100_003 + i for i in active]
            out, accepted = _run(torch.cat(target_rows), drafts, draft_probs, [self.params.greedy] * len(active), seeds)
            for row, i in enumerate(active):
                emitted = out[row, : int(accepted[row]) + 1].tolist()
                outputs[i] = (outputs[i] + emitted)[:LENGTH]
            step += 1

    def exact_sequence_probs(self):
        result = {}

        def walk(prefix, prob):
            if len(prefix) == LENGTH:
                result[tuple(prefix)] = prob
                return
            p = self.probs(TARGET_TABLES, prefix)
            for token in range(VOCAB):
                if p[token] > 0:
                    walk(prefix + [token], prob * float(p[token]))

        walk([], 1.0)
        return result


MULTI_STEP_PARAMS = [
    SamplingParams(temperature=0.7, top_k=4, repetition_penalty=1.2),
    SamplingParams(temperature=1.0, top_p=0.9, frequency_penalty=0.3),
    SamplingParams(temperature=1.5, min_p=0.05, presence_penalty=0.4, top_k=4, top_p=0.95),
]


@pytest.mark.parametrize("dense", [True, False], ids=["dense-draft", "one-hot-draft"])
@pytest.mark.parametrize("params", MULTI_STEP_PARAMS, ids=lambda p: f"T={p.temperature}")
def test_multi_step_sequences_follow_the_target(params, dense):
    """N = 20,000 sequences of 3 tokens, alpha = 0.001, seed 5; ragged draft lengths 0..3."""
    speculator = ToySpeculator(params, dense)
    outputs = speculator.run(N_SAMPLES, seed=5)
    counts = {}
    for seq in outputs:
        counts[tuple(seq)] = counts.get(tuple(seq), 0) + 1
    assert chi_square_p_value(counts, speculator.exact_sequence_probs(), N_SAMPLES) > ALPHA


@pytest.mark.parametrize("dense", [True, False])
def test_greedy_speculation_equals_greedy_decoding(dense):
    params = SamplingParams(temperature=0, repetition_penalty=1.3)
    speculator = ToySpeculator(params, dense)
    expected, output = [], []
    while len(output) < LENGTH:
        output.append(int(speculator.probs(TARGET_TABLES, output).argmax()))
    expected = output
    assert all(seq == expected for seq in speculator.run(200, seed=3))


def test_greedy_verify_equals_the_torch_reference():
    """The CPU greedy fast path (`greedy_verify`: raw logits, mask read per row, rows only up to
    the first rejection) emits exactly what `rejection_sample` emits on the processed rows, on
    300 seeded random batches: ties in the logits, masks allowing few or many tokens (the plain
    argmax forbidden or not), logits wider than the mask, bfloat16 logits, drafts that match the
    target's choices for a while."""
    from constrained_spec.bitmask import apply_bitmask_, pack_allowed
    from constrained_spec.rejection import greedy_verify

    rng = torch.Generator().manual_seed(7)
    for case in range(300):
        batch = int(torch.randint(1, 4, (1,), generator=rng))
        vocab = int(torch.randint(40, 200, (1,), generator=rng))
        covered = vocab - int(torch.randint(0, 2, (1,), generator=rng)) * 7  # the mask may cover fewer ids than the logits
        ks = torch.randint(0, 5, (batch,), generator=rng).tolist()
        rows = sum(ks) + batch
        logits = torch.randint(-3, 3, (rows, vocab), generator=rng).float()  # small integers: many ties
        if case % 5 == 0:
            logits = logits.bfloat16()
        density = [0.02, 0.3, 0.9][case % 3]
        allowed = torch.rand(rows, (covered + 31) // 32 * 32, generator=rng) < density
        allowed[:, covered:] = False
        allowed[torch.arange(rows), torch.randint(0, covered, (rows,), generator=rng)] = True  # every row allows a token
        bitmask = pack_allowed(allowed)
        processed = apply_bitmask_(logits.float().clone(), bitmask)
        choices = processed.argmax(dim=-1).tolist()
        drafts, start = [], 0
        for k in ks:  # follow the target for a random stretch, then guess
            follow = int(torch.randint(0, k + 1, (1,), generator=rng))
            drafts.append([choices[start + j] if j < follow else int(torch.randint(0, vocab, (1,), generator=rng)) for j in range(k)])
            start += k + 1
        ids = torch.tensor([t for d in drafts for t in d], dtype=torch.long)
        cu = torch.tensor([0, *itertools.accumulate(ks)], dtype=torch.long)
        randomness = draw_randomness([None] * batch, ks, vocab, greedy=[True] * batch)
        out, accepted = rejection_sample(processed, ids, cu, None, randomness, torch.ones(batch, dtype=torch.bool))
        expected = [out[b, : int(accepted[b]) + 1].tolist() for b in range(batch)]
        per_request = list(torch.split(logits, [k + 1 for k in ks]))
        emitted, got_accepted, ok = greedy_verify(per_request, bitmask, drafts)
        assert ok and emitted == expected and got_accepted == accepted.tolist(), f"case {case}"
    # a row that allows nothing is reported (the engine raises), like the torch path's check
    nothing = torch.zeros(1, 2, dtype=torch.int32)
    assert greedy_verify([torch.zeros(1, 64)], nothing, [[]])[2] is False


@pytest.mark.parametrize("forbidden_draft, vocab, region, fraction, top", [
    (False, 100, 100, 0.3, None), (True, 100, 100, 0.3, None), (False, 3000, 64, 0.3, None), (True, 9000, 9000, 0.3, False),
    (False, 9000, 9000, 0.97, True)], ids=["drafts-allowed", "second-draft-masked", "sparse-rows", "two-level-draw", "free-text-rows"])
def test_sampled_verify_emits_the_target_distribution(forbidden_draft, vocab, region, fraction, top):
    """The CPU sampled fast path (`sampled_verify`: raw logits, p and the draw over each row's
    allowed tokens only, its own random stream) emits sequences distributed exactly as
    speculative sampling must: with drafts x0, x1 and rows p0, p1, p2 (masked, tempered),
    P(a) = p0(a) for a != x0, P(x0 b) = p0(x0) p1(b) for b != x1, P(x0 x1 c) = p0(x0) p1(x1) p2(c).
    Masks over the whole row, over a few words only (the gathered path), and over 9,000 tokens
    (the block-wise inverse transform), with each row's largest logit masked (`top` False) or
    allowed (True: the free-text path, which weighs the whole row and zeroes the masked tokens).
    N = 20,000 requests (one seeded generator each), alpha = 0.001."""
    from constrained_spec.rejection import sampled_verify

    temperature = 0.7
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, vocab, generator=g) * (1.5 if region < 1000 else 3.0)  # [k + 1, V]
    allowed = torch.rand(3, (vocab + 31) // 32 * 32, generator=g) < fraction
    allowed[:, region:] = False
    if top is not None:
        allowed[torch.arange(3), logits.argmax(dim=-1)] = top
    p = torch.softmax(logits.masked_fill(~allowed[:, :vocab], float("-inf")).double() / temperature, dim=-1)  # [3, V]
    x0 = int(p[0].argmax())
    allowed[1, 17] = not forbidden_draft
    p = torch.softmax(logits.masked_fill(~allowed[:, :vocab], float("-inf")).double() / temperature, dim=-1)
    x1 = 17
    bitmask = pack_allowed(allowed)
    emitted, accepted, ok = sampled_verify([logits] * N_SAMPLES, bitmask.repeat(N_SAMPLES, 1), [[x0, x1]] * N_SAMPLES,
                                           [temperature] * N_SAMPLES, [torch.Generator().manual_seed(s) for s in range(N_SAMPLES)])
    assert ok and all(len(e) == a + 1 for e, a in zip(emitted, accepted))
    counts: dict = {}
    for e in emitted:
        counts[tuple(e)] = counts.get(tuple(e), 0) + 1
    expected = {(a,): float(p[0, a]) for a in range(vocab) if a != x0}
    expected |= {(x0, b): float(p[0, x0] * p[1, b]) for b in range(vocab) if b != x1}
    expected |= {(x0, x1, c): float(p[0, x0] * p[1, x1] * p[2, c]) for c in range(vocab)}
    assert chi_square_p_value(counts, expected, N_SAMPLES) > ALPHA


def test_sampled_verify_greedy_rows_and_empty_rows():
    """Temperature 0 rows take the greedy rule (as `greedy_verify`); a row that allows nothing
    is reported; a seed gives the same tokens again."""
    from constrained_spec.rejection import greedy_verify, sampled_verify

    g = torch.Generator().manual_seed(3)
    logits = [torch.randn(3, 70, generator=g), torch.randn(2, 70, generator=g)]
    allowed = torch.rand(5, 96, generator=g) < 0.5
    allowed[:, 70:] = False
    bitmask = pack_allowed(allowed)
    drafts = [[int(logits[0][0].argmax()), 4], [9]]
    greedy = sampled_verify(logits, bitmask, drafts, [0.0, 0.0], [None, None])
    assert greedy == greedy_verify(logits, bitmask, drafts)
    runs = [sampled_verify(logits, bitmask, drafts, [1.0, 0.5], [torch.Generator().manual_seed(11) for _ in range(2)]) for _ in range(2)]
    assert runs[0] == runs[1] and runs[0][2]
    nothing = torch.zeros(1, 3, dtype=torch.int32)
    assert sampled_verify([torch.zeros(1, 64)], nothing, [[]], [1.0], [torch.Generator()])[2] is False
