"""The Scheduler: the one owner that steps an engine. Outputs reach each request's callback in
order, a failing step reaches every request in flight (and later requests still run), aborts
land, and the stepping thread exists only while requests are in flight."""

from __future__ import annotations

import queue
import threading

import pytest

from constrained_spec.runners import CallableRunner
from constrained_spec.sampling import SamplingParams
from constrained_spec.scheduler import Scheduler
from constrained_spec.speculative import Engine
from constrained_spec.testing import ToyLM
from spec_toys import EOS, V, RandomOneHotProposer, small_grammar


class Breakable(RandomOneHotProposer):
    """Raises while `broken`, else drafts like its parent."""

    broken = True

    def propose(self, context, k):
        if self.broken:
            raise RuntimeError("proposer broke")
        return super().propose(context, k)


def scheduler(proposer=None) -> Scheduler:
    return Scheduler(Engine(CallableRunner(ToyLM(V, seed=3)), eos_token_id=EOS, proposer=proposer or RandomOneHotProposer()))


def run(sched: Scheduler, count: int, **params) -> dict[str, list]:
    """Submits `count` requests and collects each one's outputs. The first output waits until
    all are submitted (the stepping thread delivers it), so a loaded machine cannot finish a
    request before the last one joins the batch."""
    replies: queue.SimpleQueue = queue.SimpleQueue()
    submitted = threading.Event()

    def reply(rid, item):
        submitted.wait(60)
        replies.put((rid, item))

    ids = [sched.submit([1, 2], SamplingParams(max_tokens=20, seed=i, **params), small_grammar(), reply) for i in range(count)]
    submitted.set()
    got: dict[str, list] = {rid: [] for rid in ids}
    open_ids = set(ids)
    while open_ids:
        rid, item = replies.get(timeout=60)
        got[rid].append(item)
        if isinstance(item, BaseException) or item.finished:
            open_ids.discard(rid)
    return got


def test_outputs_arrive_in_order_and_match_the_engine_alone():
    sched = scheduler()
    got = run(sched, 4)
    alone = Engine(CallableRunner(ToyLM(V, seed=3)), eos_token_id=EOS, proposer=RandomOneHotProposer()).generate(
        [[1, 2]] * 4, [SamplingParams(max_tokens=20, seed=i) for i in range(4)], small_grammar())
    for items, reference in zip(got.values(), alone):
        tokens = [t for item in items for t in item.new_token_ids]
        assert items[-1].finished and tokens == items[-1].token_ids == reference.token_ids  # seeded: batch-independent
    assert sched.in_flight == 0 and sched.peak_batch == 4


def test_a_failing_step_reaches_every_request_and_later_ones_run():
    proposer = Breakable()
    sched = scheduler(proposer)
    got = run(sched, 3)
    assert all(isinstance(items[-1], RuntimeError) and "proposer broke" in str(items[-1]) for items in got.values())
    assert sched.in_flight == 0
    proposer.broken = False
    assert all(items[-1].finished for items in run(sched, 2).values())


def test_abort_lands_and_the_thread_stops_when_idle():
    sched = scheduler()
    replies: queue.SimpleQueue = queue.SimpleQueue()
    long = SamplingParams(max_tokens=10_000, seed=0, logit_bias={EOS: -100})  # EOS never drawn: runs until aborted
    rid = sched.submit([1, 2], long, None, lambda _rid, item: replies.put(item))
    assert not replies.get(timeout=60).finished
    sched.abort(rid)
    while not (item := replies.get(timeout=60)).finished:
        pass
    assert item.finish_reason == "abort"
    sched._thread and sched._thread.join(timeout=60)
    assert sched._thread is None and sched.in_flight == 0  # idle: no thread holds the engine
    with pytest.raises(ValueError, match="prompt_ids must not be empty"):
        sched.submit([], SamplingParams(), None, lambda *_: None)  # the engine's own check, raised to the caller
