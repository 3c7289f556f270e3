"""Prompt building: messages validation and chat-template rendering."""

import pytest

from constrained_spec.chat import normalize_messages, render_prompt, schema_instruction


class PlainTokenizer:
    """A tokenizer without a chat template: one id per character."""

    chat_template = None

    def encode(self, text, add_special_tokens=True):
        return [ord(c) for c in text]


def test_string_prompt_becomes_one_user_message():
    assert normalize_messages("hello") == [{"role": "user", "content": "hello"}]


def test_system_prompt_goes_first_and_replaces_an_existing_one():
    msgs = [{"role": "system", "content": "old"}, {"role": "user", "content": "hi"}]
    out = normalize_messages(msgs, system_prompt="new")
    assert out == [{"role": "system", "content": "new"}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("prompt", ["", "   \n", [], [{"role": "system", "content": "x"}, {"role": "user", "content": " "}]])
def test_empty_prompt_is_rejected(prompt):
    with pytest.raises(ValueError, match="the prompt is empty"):
        normalize_messages(prompt)


@pytest.mark.parametrize(
    "messages, message",
    [
        ([{"content": "hi"}], "must be a mapping with 'role' and 'content'"),
        ([{"role": "robot", "content": "hi"}], "has role 'robot'"),
        ([{"role": "user", "content": 3}], "content must be a string"),
        (42, "prompt must be a string or a list of messages"),
    ],
)
def test_malformed_messages_are_rejected(messages, message):
    with pytest.raises(ValueError, match=message):
        normalize_messages(messages)


def test_without_template_the_contents_are_joined():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert render_prompt(PlainTokenizer(), msgs) == [ord(c) for c in "S\n\nU"]


def test_schema_instruction_names_object_keys():
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {}, "job": {}}}
    assert schema_instruction(schema) == "Reply with a JSON object with the keys name, age and job."
    assert schema_instruction({"type": "object", "properties": {"x": {}}}) == "Reply with a JSON object with the key x."


def test_schema_instruction_shows_other_schemas_without_titles():
    text = schema_instruction({"title": "Tags", "type": "array", "items": {"title": "Tag", "type": "string"}})
    assert text.endswith('{"type":"array","items":{"type":"string"}}')
