"""Smoke tests: every example runs on the default model and returns valid values."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_extract_person(generator):
    module = load("extract_person")
    people = module.main(generator)
    assert len(people) == len(module.TEXTS)
    assert all(isinstance(p, module.Person) for p in people)


def test_regex_dates_phones(generator):
    module = load("regex_dates_phones")
    out = module.main(generator)
    assert re.fullmatch(module.DATE, out["date"]) and re.fullmatch(module.PHONE, out["phone"])


def test_lark_arithmetic(generator):
    from lark import Lark

    from constrained_spec.grammars import load_bundled_grammar

    out = load("lark_arithmetic").main(generator)
    Lark(load_bundled_grammar("arithmetic"), parser="lalr").parse(out["expression"])  # raises if invalid
    assert re.fullmatch(r"SELECT [a-z_]+(, [a-z_]+)* FROM (users|orders);", out["sql"])


def test_tool_call(generator):
    module = load("tool_call")
    calls = module.main(generator)
    assert len(calls) == 2
    assert all(isinstance(c, module.Call) and isinstance(c.call, BaseModel) for c in calls)


def test_streaming(generator, capsys):
    module = load("streaming")
    recipe = module.main(generator)
    assert isinstance(recipe, module.Recipe)
    assert recipe.model_dump_json() in capsys.readouterr().out


@pytest.fixture(scope="module")
def server_url(generator):
    from constrained_spec.server.app import BackgroundServer, create_app

    with BackgroundServer(create_app(generator)) as server:
        yield server.base_url


def test_agent_client_makes_a_tool_call(server_url):
    module = load("agent_client")
    out = module.main(server_url)
    assert out["calls"] and out["calls"][0]["name"] == "get_weather" and isinstance(out["calls"][0]["arguments"]["city"], str)
    assert isinstance(out["answer"], module.Forecast)


@pytest.mark.parametrize("responses", [False, True])
def test_agents_sdk_agent(server_url, responses):
    module = load("agents_sdk_agent")
    assert isinstance(module.main(server_url, responses), module.Weather)
