"""The Generator on the default model: values, streaming, batches, the speculative off switch,
incomplete outputs and bad input. Outputs are kept to a few tokens (CPU time)."""

import re

import pytest
from pydantic import BaseModel

import constrained_spec
from constrained_spec import api
from constrained_spec.grammar import GrammarError
from constrained_spec.sampling import SamplingParams

pytestmark = pytest.mark.model


class Flag(BaseModel):
    ok: bool


QUESTION = "Is water wet?"


def test_pydantic_schema_gives_a_validated_instance(generator):
    result = generator.generate(QUESTION, schema=Flag, temperature=0, max_tokens=12)
    assert isinstance(result.value, Flag)
    assert Flag.model_validate_json(result.text) == result.value
    assert result.finish_reason == "stop" and not result.incomplete
    assert result.token_ids and generator.tokenizer.eos_token_id not in result.token_ids
    assert result.stats["generated_tokens"] >= len(result.token_ids)
    assert result.stats["prompt_tokens"] > 0


def test_greedy_speculative_equals_plain(generator):
    """At T = 0 speculation must not change a single token."""
    kwargs = dict(regex=r"[0-9]{1,3}( [0-9]{1,3}){3}", temperature=0, max_tokens=16)
    prompt = "Count from 1 to 4, separated by spaces."
    fast = generator.generate(prompt, **kwargs)
    plain = generator.generate(prompt, speculative=False, **kwargs)
    assert fast.token_ids == plain.token_ids
    assert plain.stats["drafted"] == 0
    assert re.fullmatch(kwargs["regex"], fast.text)


def test_stream_deltas_add_up_to_the_result(generator):
    # Without speculation every step emits one token, so a JSON object arrives in several deltas.
    stream = generator.stream(QUESTION, schema=Flag, temperature=0, max_tokens=12, speculative=False)
    assert stream.result is None
    deltas = list(stream)
    assert len(deltas) >= 3
    assert "".join(deltas) == stream.result.text
    assert isinstance(stream.result.value, Flag)


def test_closing_a_stream_early_aborts_it(generator):
    with generator.stream("Count from 1 to 50.", regex=r"[0-9 ]{1,200}", temperature=0, max_tokens=40) as stream:
        first = next(stream)
    assert first and stream.result is None
    assert generator.generate(QUESTION, choices=["yes", "no"], temperature=0).value in ("yes", "no")
    # the abort lands at the step after close(), before that call could finish
    assert generator.scheduler.in_flight == 0 and not generator.engine.has_unfinished()


def test_batch_with_messages_and_choices(generator):
    prompts = [
        [{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": QUESTION}],
        "Is fire cold?",
    ]
    results = generator.generate_batch(prompts, choices=["yes", "no"], params=SamplingParams(temperature=0.7, seed=3))
    assert len(results) == 2
    assert all(r.value in ("yes", "no") and r.text == r.value for r in results)


def test_incomplete_output_is_reported(generator):
    result = generator.generate(QUESTION, schema=Flag, temperature=0, max_tokens=2)
    assert result.incomplete and result.finish_reason == "length"
    assert result.value is None
    assert len(result.token_ids) == 2


def test_module_level_generate_uses_the_shared_generator(generator, monkeypatch):
    monkeypatch.setattr(api, "_default", generator)
    assert api.default_generator() is generator
    result = constrained_spec.generate(QUESTION, regex="(yes|no)", temperature=0)
    assert isinstance(result, constrained_spec.Result) and result.value in ("yes", "no")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(schema={"type": "object", "anyOf": [{"properties": {"a": {}}}, {"required": ["b"]}], "unevaluatedProperties": False}), GrammarError, "unevaluatedProperties"),
        (dict(schema={"type": "strin"}), ValueError, "invalid JSON schema at type"),
        (dict(grammar="no_such_grammar_name"), ValueError, "unknown bundled grammar 'no_such_grammar_name'; available: arithmetic"),
        (dict(regex="(unclosed"), GrammarError, "cannot compile regex '(unclosed'"),
        (dict(regex="a", choices=["a"]), ValueError, "give exactly one constraint (regex, json_schema, json_object, choices, grammar, ir), got regex, choices"),
        (dict(choices=[]), ValueError, "choices must be a non-empty list of non-empty strings"),
        (dict(temperature=-1), ValueError, "SamplingParams.temperature=-1"),
        (dict(temprature=0.5), ValueError, "unknown sampling parameter"),
    ],
)
def test_bad_input_raises_clear_errors(generator, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        generator.generate(QUESTION, **kwargs)


def test_empty_prompt_and_bad_options(generator):
    with pytest.raises(ValueError, match="the prompt is empty"):
        generator.generate("  ", regex="a")
    with pytest.raises(ValueError, match="prompts must be a non-empty list"):
        generator.generate_batch([])
    with pytest.raises(ValueError, match="unknown grammar backend"):
        api.Generator(generator.loaded, backend="outlines")
    with pytest.raises(ValueError, match="unknown draft 'bogus'"):
        api.Generator(generator.loaded, draft="bogus", verbose=False)
