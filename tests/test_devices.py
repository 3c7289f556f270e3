"""Device and dtype options: resolved before any model loads, clear errors for bad values."""

import sys

import pytest
import torch

from constrained_spec.cli import EXIT_BAD_INPUT, EXIT_ERROR, main
from constrained_spec.devices import DeviceError, resolve_device, resolve_dtype, speculation_dtype_check

HAS_CUDA = torch.cuda.is_available()


def test_auto_picks_cuda_when_present_else_cpu():
    assert resolve_device("auto") == resolve_device(None) == (torch.device("cuda", 0) if HAS_CUDA else torch.device("cpu"))
    assert resolve_device("cpu") == resolve_device(torch.device("cpu")) == resolve_device(" CPU ") == torch.device("cpu")


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cpu:1", "cuda:-1", "", 3])
def test_malformed_devices_name_the_field(bad):
    with pytest.raises(DeviceError, match=r"^device: expected one of auto, cpu, cuda or cuda:N"):
        resolve_device(bad)


@pytest.mark.skipif(HAS_CUDA, reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(DeviceError, match=r"'cuda:0' asked for, but torch .* sees no CUDA device"):
        resolve_device("cuda:0")


@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_index_beyond_the_device_count_is_a_clear_error():
    assert resolve_device("cuda") == torch.device("cuda", 0)
    with pytest.raises(DeviceError, match="CUDA device\\(s\\) are present"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


def test_dtypes_and_aliases():
    assert resolve_dtype(None) is resolve_dtype("auto") is resolve_dtype("float32") is torch.float32
    assert resolve_dtype("bf16") is resolve_dtype(torch.bfloat16) is torch.bfloat16
    assert resolve_dtype("FP16") is torch.float16
    with pytest.raises(DeviceError, match=r"^dtype: expected one of auto, float32, bfloat16, float16, got 'int8'"):
        resolve_dtype("int8")
    with pytest.raises(DeviceError, match="dtype"):
        resolve_dtype(torch.int64)


def test_speculation_dtype_check_knows_measured_and_unmeasured_combinations():
    assert speculation_dtype_check(torch.device("cpu"), torch.float32) is None
    assert speculation_dtype_check("tpu", torch.float32).startswith("unmeasured")
    # measured on an H200: float32's k-row drift (4.8e-5) is above batching's (2.7e-5) but below the
    # float32 rounding floor (1e-4), so offered; float16's (0.055) is above both, so refused
    assert speculation_dtype_check(torch.device("cuda", 0), torch.float32) is None
    assert speculation_dtype_check(torch.device("cuda"), torch.bfloat16) is None
    assert speculation_dtype_check(torch.device("cuda"), torch.float16).startswith("refused: scoring k + 1 rows moves float16")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["json", "--prompt", "x", "--device", "gpu"], "error: device: expected one of auto, cpu, cuda or cuda:N, got 'gpu'"),
        (["regex", "a+", "--prompt", "x", "--dtype", "int4"], "error: dtype: expected one of auto, float32, bfloat16, float16"),
        (["serve", "--device", "npu"], "error: device: expected one of"),
    ],
)
def test_cli_rejects_bad_devices_before_loading(argv, message, capsys, monkeypatch):
    import constrained_spec.models

    monkeypatch.setattr(constrained_spec.models, "load_model", lambda *a, **k: pytest.fail("loaded a model"))
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and message in err and len(err.strip().splitlines()) == 1, err


def test_serve_without_the_server_extra_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # as if fastapi were not installed
    monkeypatch.delitem(sys.modules, "constrained_spec.server.app", raising=False)
    code = main(["serve", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and "serve needs the server extra (fastapi is missing): pip install 'constrained_spec[server]'" in err, err


def test_load_model_checks_device_before_loading(tmp_path):
    from constrained_spec.models import load_model

    with pytest.raises(DeviceError, match="device"):
        load_model(tmp_path / "no-such-folder", device="tpu")  # the device error comes before the missing folder


def test_build_engine_refuses_or_warns_by_the_drift_table(monkeypatch):
    from constrained_spec import devices
    from constrained_spec.engine_setup import check_speculation_dtype

    model = torch.nn.Linear(2, 2).to(torch.bfloat16)
    monkeypatch.setitem(devices.SPECULATION_DRIFT, ("cpu", "bfloat16"), (0.4, 0.1))
    with pytest.raises(DeviceError, match=r"^dtype: speculation refused: scoring k \+ 1 rows moves bfloat16 logits on cpu by up to 0.4"):
        check_speculation_dtype(model)
    monkeypatch.delitem(devices.SPECULATION_DRIFT, ("cpu", "bfloat16"))
    with pytest.warns(RuntimeWarning, match="not measured"):
        check_speculation_dtype(model)
    check_speculation_dtype(torch.nn.Linear(2, 2))  # float32 on cpu: measured and offered, silent
