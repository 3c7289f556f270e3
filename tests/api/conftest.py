import pytest


@pytest.fixture(scope="session")
def generator():
    """One Generator on the default model for the whole session (loading takes seconds)."""
    from constrained_spec.api import Generator

    return Generator(verbose=False)
