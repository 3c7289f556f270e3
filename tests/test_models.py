import subprocess
import sys

import pytest
import torch

from constrained_spec.models import load_model


def test_import_is_cheap():
    code = "import sys, constrained_spec; heavy = {'transformers', 'triton', 'fastapi', 'uvicorn'} & set(sys.modules); print(sorted(heavy))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "nope", verbose=False)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path, verbose=False)  # a folder, but not a model folder


@pytest.mark.model
def test_default_model_loads_offline_and_produces_a_token():
    loaded = load_model(verbose=False)
    tokenizer = loaded.tokenizer
    assert loaded.vocab_size == 49152 and loaded.logits_width >= loaded.vocab_size
    assert tokenizer.eos_token_id == 2
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Say hello."}], add_generation_prompt=True, return_dict=True)["input_ids"]
    with torch.no_grad():
        logits = loaded.model(torch.tensor([ids])).logits[0, -1]
    token = int(logits[: loaded.vocab_size].argmax())
    assert 0 <= token < loaded.vocab_size
    assert tokenizer.decode([token]).strip() != ""
