"""The grammar benchmark's --smoke mode runs, so the benchmark cannot rot."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest


def _bench_grammar():
    """benchmarks/bench_grammar.py as a module (benchmarks/ is not a package)."""
    path = Path(__file__).parent.parent.parent / "benchmarks" / "bench_grammar.py"
    spec = importlib.util.spec_from_file_location("bench_grammar", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.model
def test_bench_grammar_smoke(capsys):
    module = _bench_grammar()
    rows = module.main(["--smoke", "--again"])
    assert rows and rows[0]["backend"] == "ours (default)" and rows[0]["compiled"] == 1
    assert rows[0]["p50_ms"] > 0 and rows[0]["p99_ms"] >= rows[0]["p50_ms"]
    masks, p50, p99 = rows[0]["again"]  # each valid instance walked again: as many masks as the first walks
    assert masks == sum(n for n, _, _ in rows[0]["by_path"].values()) > 0 and 0 < p50 <= p99
    out = capsys.readouterr().out
    assert "mask p50" in out and "each valid instance walked again" in out


def test_file_order_keeps_values_and_takes_the_files_key_order(tmp_path):
    module = _bench_grammar()
    folder = tmp_path / "src" / "test" / "demo"
    folder.mkdir(parents=True)
    (folder / "a.yaml").write_text("b: 1\na: [x, {d: 2, c: 3}]\n")
    (folder / "b.json").write_text('{"b": 1, "a": "other value"}')
    (folder / "c.toml").write_text('b = 1\na = "t"\n')
    instances = [
        {"text": '{"a":["x",{"c":3,"d":2}],"b":1}', "valid": True, "origin": "src/test/demo/a.yaml"},
        {"text": '{"a":"x","b":1}', "valid": True, "origin": "src/test/demo/b.json"},  # another value: kept
        {"text": '{"a":"t","b":1}', "valid": True, "origin": "src/test/demo/c.toml"},
        {"text": '{"a":"t"}', "valid": False, "origin": "src/test/demo/c.toml"},  # invalid ones: kept
    ]
    corpus = [("demo.json", {"instances": instances})]
    assert module.in_file_order(corpus, tmp_path) == 2
    assert [i["text"] for i in instances] == ['{"b":1,"a":["x",{"d":2,"c":3}]}', '{"a":"x","b":1}', '{"b":1,"a":"t"}', '{"a":"t"}']


def test_maskbench_data_becomes_corpus_entries(tmp_path):
    module = _bench_grammar()
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    (tmp_path / "x_1.json").write_text('{"schema": {"type": "object"}, "tests": [{"data": {"b": 1, "a": "é"}, "valid": true}, {"data": 3, "valid": false}]}')
    (tmp_path / "x_2.json").write_text(json.dumps({"schema": schema, "tests": []}))  # no tests: left out
    (tmp_path / "x_3.json").write_text(json.dumps({"schema": schema, "tests": [{"data": {"a": "s"}, "valid": True}]}))
    (tmp_path / "x_4.json").write_text("not json")
    (tmp_path / "x_5.json").write_text(json.dumps({"schema": schema, "tests": [{"data": 1}, {"valid": True}, {"data": 1, "valid": "yes"}]}))  # judge nothing
    corpus = module.load_maskbench(tmp_path)
    assert [name for name, _ in corpus] == ["x_1.json", "x_3.json"]
    assert corpus[0][1]["schema"] == {"type": "object"}
    assert corpus[0][1]["instances"] == [{"valid": True, "text": '{"b":1,"a":"é"}'}, {"valid": False, "text": "3"}]
    assert [name for name, _ in module.load_maskbench(tmp_path, stride=2)] == ["x_1.json"]
    assert [name for name, _ in module.load_maskbench(tmp_path, limit=1)] == ["x_1.json"]


@pytest.mark.model
def test_names_pick_corpus_files_and_refuse_unknown_ones(tmp_path, capsys):
    module = _bench_grammar()
    for name, data in (("a.json", {"type": "integer"}), ("b.json", {"type": "string"})):
        (tmp_path / name).write_text(json.dumps({"schema": data, "tests": [{"data": 1, "valid": name == "a.json"}]}))
    rows = module.main(["--maskbench", str(tmp_path), "--names", "b.json", "--engines", "ours-default"])
    assert rows[0]["schemas"] == 1 and rows[0]["invalid_total"] == 1 and rows[0]["invalid_accepted"] == 0
    with pytest.raises(SystemExit):
        module.main(["--maskbench", str(tmp_path), "--names", "b.json,c.json", "--engines", "ours-default"])
    assert "not in the corpus: c.json" in capsys.readouterr().err
