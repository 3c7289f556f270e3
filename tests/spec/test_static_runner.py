"""The static-cache runner against the independent oracle, transformers' own forward, on tiny
randomly initialised Llama models (fast): every logits row equals the full-context forward within
float32 tolerance through ragged batches, subsets of requests, rollbacks, prefix reuse, prompts
longer than the largest bucket and every draft width 1..17 (each bucket, between buckets, above),
eager, at torch.compile's fixed shapes (traced by its "eager" backend here; inductor runs the same
shapes) and through the CUDA-graph plumbing (`cuda_graphs.GraphedForward`: real CUDA graphs on a
GPU; on CPU a stand-in that replays the forward on the capture-time buffers and fails if the KV
cache moved since). Unsupported configurations fall back to HFRunner.
"""

from __future__ import annotations

import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from constrained_spec.engine_setup import make_runner  # noqa: E402
from constrained_spec.runners import HFRunner  # noqa: E402
from constrained_spec.static_runner import DRAFT_BUCKETS, StaticRunner, unsupported_reason  # noqa: E402

ATOL, RTOL = 1e-4, 1e-4  # float32; observed differences are ~1e-7
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
MODES = ["eager", "compiled", "graphs"]


def replay_on_cpu(forward, ids, positions, window, pool):
    """A CUDA graph's contract on CPU: fixed input/output buffers, and a replay that is only valid
    while the KV cache stays where it was at capture (the runner must capture again after growing)."""
    net = forward.__self__
    where = (net.k_cache.data_ptr(), net.v_cache.data_ptr())
    out = forward(ids, positions, 0, window)

    def replay():
        assert (net.k_cache.data_ptr(), net.v_cache.data_ptr()) == where, "a graph replayed on a reallocated cache"
        out.copy_(forward(ids, positions, 0, window))

    return replay, out, pool


def static_runner(model, mode: str, **kwargs) -> StaticRunner:
    if mode == "graphs":
        on_cuda = next(model.parameters()).device.type == "cuda"
        return StaticRunner(model, cuda_graphs=True, graph_capture=None if on_cuda else replay_on_cpu, **kwargs)
    return StaticRunner(model, cuda_graphs=False, compile=mode == "compiled", compile_backend="eager", **kwargs)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: a second thread only waits on shared cores
    yield
    torch.set_num_threads(threads)


def tiny_llama(seed: int = 0, **overrides) -> torch.nn.Module:
    config = dict(
        vocab_size=101, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=512, rope_theta=500.0, rms_norm_eps=1e-5, initializer_range=0.2,
    )
    config.update(overrides)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**config)).eval()


def oracle(model, tokens: list[int], rows: int) -> torch.Tensor:
    """The last `rows` logits rows of one full forward over `tokens` (no cache)."""
    with torch.no_grad():
        device = next(model.parameters()).device
        return model(torch.tensor([tokens], device=device)).logits[0, -rows:].float()


def random_walk(model, runner, seed: int, steps: int = 30) -> int:
    """Drive `runner` through random ragged batches, rollbacks, releases and new requests whose
    prompts share prefixes; check every row against the oracle. Returns rows checked."""
    rng = random.Random(seed)
    shared = [rng.randrange(1, 101) for _ in range(12)]  # a common "system prompt"
    contexts: dict[str, list[int]] = {}  # tokens in the runner's context per request
    last: dict[str, int] = {}  # the next token to feed first (the engine's last committed token)
    checked, counter = 0, 0
    for _ in range(steps):
        if len(contexts) < 5 and rng.random() < 0.5:
            prompt = (shared[: rng.randrange(8, 13)] if rng.random() < 0.7 else []) + [rng.randrange(1, 101) for _ in range(rng.randrange(1, 20))]
            rid = f"r{counter}"
            counter += 1
            runner.start(rid, prompt[:-1])
            contexts[rid], last[rid] = prompt[:-1], prompt[-1]
        if not contexts:
            continue
        chosen = rng.sample(sorted(contexts), rng.randrange(1, len(contexts) + 1))  # a subset, any order
        batch = [(rid, [last[rid]] + [rng.randrange(0, 101) for _ in range(rng.randrange(0, 17))]) for rid in chosen]
        for (rid, new), logits in zip(batch, runner.score(batch)):
            contexts[rid] += new
            torch.testing.assert_close(logits, oracle(model, contexts[rid], len(new)), atol=ATOL, rtol=RTOL)
            checked += len(new)
            back = rng.randrange(0, len(new))  # reject some drafts; the last kept one is fed next
            runner.rollback(rid, back + 1)
            last[rid] = contexts[rid][len(contexts[rid]) - back - 1]
            del contexts[rid][len(contexts[rid]) - back - 1 :]
            assert runner.cached_length(rid) == len(contexts[rid])
        if rng.random() < 0.2:
            rid = rng.choice(sorted(contexts))
            runner.release(rid)
            del contexts[rid], last[rid]
    return checked


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_random_walk_matches_transformers_forward(device, mode):
    model = tiny_llama().to(device)
    runner = static_runner(model, mode, slots=1, capacity=32)  # small: the cache must grow
    assert (runner.compiled, runner.graphed) == (mode == "compiled", mode == "graphs")
    checked = random_walk(model, runner, seed=1)
    assert checked > 150
    assert runner.prefix_hits > 0  # shared prompt prefixes were copied, not recomputed
    assert runner.net.capacity > 32 and runner.net.slots > 1  # grown while requests were live
    if mode == "graphs":  # every shape held was captured on the cache as it is now
        assert runner._graphs.captures > len(runner._graphs.shapes) >= len(DRAFT_BUCKETS)
        assert all(window == runner.net.capacity or window >= 256 for _, _, window in runner._graphs.shapes)


def test_every_draft_width_after_rollback_and_prefix_reuse():
    """Widths 1..max bucket + 1 on one request whose prompt came from the prefix cache, each
    after a rollback, in both modes; untied lm_head and attention/MLP biases on."""
    model = tiny_llama(seed=3, tie_word_embeddings=False, attention_bias=True, mlp_bias=True)
    for mode in MODES:
        runner = static_runner(model, mode, min_prefix=4, slots=1, capacity=64)
        prompt = list(range(10, 30))
        runner.start("warm", prompt[:-1])
        runner.score([("warm", [prompt[-1]])])
        runner.start("a", prompt[:-1])  # all of it is in the cached prompt
        assert runner.prefix_hits == len(prompt) - 1 and runner.cached_length("a") == len(prompt) - 1
        context, last = prompt[:-1], prompt[-1]
        for width in range(1, DRAFT_BUCKETS[-1] + 2):
            new = [last] + [(7 * width + j) % 101 for j in range(width - 1)]
            context = context + new
            torch.testing.assert_close(runner.score([("a", new)])[0], oracle(model, context, width), atol=ATOL, rtol=RTOL)
            runner.rollback("a", width - 1)  # reject every draft; the fed token stays
            del context[len(context) - width + 1 :]
            last = (3 * width) % 101


def test_graphs_are_captured_once_per_shape_and_again_after_the_cache_moves():
    """GraphedForward: one capture per (rows, width, window); a new cache key drops them all."""
    from constrained_spec.cuda_graphs import GraphedForward

    calls = []

    def forward(ids, positions, first_slot, window):
        calls.append((tuple(ids.shape), window))
        return (ids + positions)[..., None].float() * window  # [B, T, 1]

    def capture(fn, ids, positions, window, pool):
        out = fn(ids, positions, 0, window)
        return (lambda: out.copy_(fn(ids, positions, 0, window))), out, pool

    graphs = GraphedForward(forward, capture=capture)
    ids, positions = torch.tensor([[1, 2]]), torch.tensor([[5, 6]])
    torch.testing.assert_close(graphs(ids, positions, 256, "cache-1"), torch.tensor([[[1536.0], [2048.0]]]))
    out = graphs(ids + 1, positions, 256, "cache-1")  # replayed on the same buffers with new inputs
    torch.testing.assert_close(out, torch.tensor([[[1792.0], [2304.0]]]))
    graphs(ids, positions, 512, "cache-1")
    assert graphs.captures == 2 and graphs.shapes == [(1, 2, 256), (1, 2, 512)]
    graphs(ids, positions, 256, "cache-2")  # the cache was reallocated
    assert graphs.captures == 3 and graphs.shapes == [(1, 2, 256)]


def test_strided_attention_output_is_handled(monkeypatch):
    """CUDA's attention kernels return their output strided; the forward must not assume the
    contiguous layout the CPU gives (a `.view` there crashed every CUDA run of this runner)."""
    from constrained_spec import static_llama

    attention = static_llama.F.scaled_dot_product_attention

    def strided(*args, **kwargs):
        out = attention(*args, **kwargs)  # [B, Hkv, G*T, D]
        return out.transpose(1, 2).contiguous().transpose(1, 2)  # same values, [B, G*T, Hkv, D] in memory

    monkeypatch.setattr(static_llama.F, "scaled_dot_product_attention", strided)
    model = tiny_llama(seed=4)
    runner = StaticRunner(model, cuda_graphs=False)
    runner.start("a", [5, 6, 7])
    torch.testing.assert_close(runner.score([("a", [8, 9, 10])])[0], oracle(model, [5, 6, 7, 8, 9, 10], 3), atol=ATOL, rtol=RTOL)


def test_cuda_graphs_need_a_cuda_model():
    with pytest.raises(ValueError, match="cuda_graphs=True needs the model on a CUDA device"):
        StaticRunner(tiny_llama(), cuda_graphs=True)


def test_unsupported_configs_fall_back_to_transformers():
    assert unsupported_reason(tiny_llama()) is None
    for overrides, words in (
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope type 'linear'"),
        ({"hidden_act": "gelu"}, "activation 'gelu'"),
    ):
        model = tiny_llama(**overrides)
        reason = unsupported_reason(model)
        assert reason is not None and words in reason
        assert isinstance(make_runner(model, "auto"), HFRunner)
        with pytest.raises(ValueError, match="runner 'static' cannot run this model"):
            make_runner(model, "static")
        with pytest.raises(ValueError, match="cannot run this model"):
            StaticRunner(model)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    assert "not a Llama" in unsupported_reason(gpt2)
    assert isinstance(make_runner(tiny_llama(), "auto"), StaticRunner)
    assert isinstance(make_runner(tiny_llama(), "hf"), HFRunner)
    with pytest.raises(ValueError, match="runner must be one of"):
        make_runner(tiny_llama(), "fast")


def test_bad_calls_raise_clear_errors():
    runner = StaticRunner(tiny_llama())
    runner.start("a", [1, 2, 3])
    with pytest.raises(ValueError, match="already started"):
        runner.start("a", [1])
    with pytest.raises(ValueError, match="at least one new token"):
        runner.score([("a", [])])
    runner.score([("a", [4])])
    with pytest.raises(ValueError, match="cannot roll back 5 of 4"):
        runner.rollback("a", 5)
    with pytest.raises(ValueError, match="buckets"):
        StaticRunner(tiny_llama(), buckets=(4, 2))


def test_self_check_fails_loudly_when_the_forward_differs_from_transformers(monkeypatch):
    """The constructor checks our forward against transformers' once per model: a forward that
    drifted (here: RoPE switched off) raises instead of sampling from the wrong distribution."""
    from constrained_spec import static_llama
    from constrained_spec.runner_check import RunnerSelfCheckError

    StaticRunner(tiny_llama(seed=7))  # the real forward passes
    monkeypatch.setattr(static_llama, "_rotate", lambda x, cos, sin: x)
    with pytest.raises(RunnerSelfCheckError, match="StaticRunner self-check failed"):
        StaticRunner(tiny_llama(seed=8))
