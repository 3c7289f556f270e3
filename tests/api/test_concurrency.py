"""One owner steps the engine: a stream that is read slowly blocks no other caller of the same
Generator or of its server, and 100 mixed requests from 8 threads all finish with valid outputs.

A tiny random model (`testing.tiny_hf_model`) keeps this fast. Times are compared with a single
call measured in the same run (a generous factor, since other requests share each step), never
with a fixed number of seconds: a caller that waits for another caller's reader would wait
forever, far past any such bound.
"""

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

FACTOR = 20
WORD = r"[a-z]{3,6}"
COLORS = ("red", "green", "blue")
COLOR_SCHEMA = {"type": "object", "properties": {"c": {"enum": list(COLORS)}}, "required": ["c"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tiny():
    from constrained_spec.api import Generator
    from constrained_spec.testing import tiny_hf_model

    return Generator(tiny_hf_model(), verbose=False)


@pytest.fixture(scope="module")
def server(tiny):
    from constrained_spec.server.app import BackgroundServer, create_app

    with BackgroundServer(create_app(tiny)) as running:
        yield running


def _call(tiny, seed=0):
    result = tiny.generate("hi", regex=WORD, max_tokens=8, seed=seed)
    assert re.fullmatch(WORD, result.text) and result.finish_reason == "stop"


def _post(server, seed=0, stream=False):
    body = {
        "model": "default", "messages": [{"role": "user", "content": "pick a color"}], "max_tokens": 32, "seed": seed,
        "stream": stream, "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": COLOR_SCHEMA}},
    }
    url = f"{server.base_url}/chat/completions"
    if stream:
        content = ""
        with httpx.stream("POST", url, json=body, timeout=None) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    for choice in json.loads(line[6:])["choices"]:
                        content += choice["delta"].get("content") or ""
    else:
        response = httpx.post(url, json=body, timeout=None)
        assert response.status_code == 200, response.text
        content = response.json()["choices"][0]["message"]["content"]
    assert json.loads(content)["c"] in COLORS


def _timed(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def _finishes_within(fn, seconds: float) -> bool:
    worker = threading.Thread(target=fn, daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive()


def test_a_slow_stream_reader_blocks_no_other_caller(tiny, server):
    _call(tiny)
    _post(server)  # warm: grammars compiled, connection pool up
    single = max(_timed(_call, tiny, seed) for seed in range(3)) + max(_timed(_post, server, seed) for seed in range(3))
    stream = tiny.stream("go", regex=r"[a-z]{300}", max_tokens=301, seed=1)
    assert next(stream)  # the request runs; its reader now sleeps

    def others():
        _call(tiny, seed=7)
        _post(server, seed=7)
        _post(server, seed=8, stream=True)

    try:
        assert _finishes_within(others, FACTOR * single), "a caller waited for another caller's stream reader"
    finally:
        stream.close()


def _mixed(tiny, server, i):
    kind = i % 7
    if kind == 0:
        _call(tiny, seed=i)
    elif kind == 1:
        result = tiny.generate("yes or no?", choices=["yes", "no"], max_tokens=4, seed=i, speculative=False)
        assert result.value in ("yes", "no")
    elif kind == 2:
        result = tiny.generate("color?", schema=COLOR_SCHEMA, max_tokens=32, seed=i)
        assert result.value["c"] in COLORS
    elif kind == 3:
        with tiny.stream("word", regex=WORD, max_tokens=8, seed=i) as stream:
            text = "".join(stream)
        assert re.fullmatch(WORD, text) and stream.result.text == text
    elif kind == 4:
        with tiny.stream("long", regex=r"[a-z]{50}", max_tokens=51, seed=i) as stream:
            assert next(stream)  # stop early: close() aborts it
    elif kind == 5:
        _post(server, seed=i)
    else:
        _post(server, seed=i, stream=True)


def test_many_threads_share_one_generator_without_deadlock(tiny, server):
    _call(tiny)
    _post(server)
    single = sum(_timed(_mixed, tiny, server, i) for i in range(7)) / 7  # one request of each kind, in turn
    pool = ThreadPoolExecutor(max_workers=8)
    futures = [pool.submit(_mixed, tiny, server, i) for i in range(100)]
    done, pending = wait(futures, timeout=3 * 100 * single)  # run one after another, they take 100 * single
    pool.shutdown(wait=not pending)
    assert not pending, f"{len(pending)} of 100 requests did not finish (deadlock?)"
    for future in done:
        future.result()  # re-raises a failed check of an output

    def drained():  # the last streams' aborts land at the next step
        while tiny.scheduler.in_flight:
            time.sleep(0.01)

    assert _finishes_within(drained, FACTOR * single)
    assert tiny.scheduler.peak_batch > 1  # requests from different threads shared steps


def test_per_request_draft_limits_share_one_engine(tiny):
    """speculative=False / an int is a per-request limit on the one engine: no second engine."""
    engine = tiny.engine
    plain = tiny.generate("hi", regex=WORD, max_tokens=8, seed=3, temperature=0, speculative=False)
    capped = tiny.generate("hi", regex=WORD, max_tokens=8, seed=3, temperature=0, speculative=1)
    full = tiny.generate("hi", regex=WORD, max_tokens=8, seed=3, temperature=0)
    assert tiny.engine is engine and plain.stats["drafted"] == 0
    assert capped.stats["drafted"] <= capped.stats["steps"]  # at most one draft per step
    assert plain.token_ids == capped.token_ids == full.token_ids  # greedy: speculation never changes the output
