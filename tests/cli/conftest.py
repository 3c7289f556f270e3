import pytest


@pytest.fixture(scope="session")
def shared_generator():
    """One Generator on the default model, handed to the CLI in-process instead of reloading."""
    from constrained_spec.api import default_generator

    return default_generator()  # one per process, shared by every test directory


@pytest.fixture
def cli_with_model(shared_generator, monkeypatch):
    """`main(argv)` running in-process on the shared generator."""
    from constrained_spec import api
    from constrained_spec.cli import main

    def make(*args, **kwargs):
        shared_generator.verbose = kwargs.get("verbose", True)  # as the CLI asked (--quiet)
        return shared_generator

    verbose = shared_generator.verbose
    monkeypatch.setattr(api, "Generator", make)
    yield main
    shared_generator.verbose = verbose
