import pytest


@pytest.fixture(scope="session")
def generator():
    """One Generator on the default model for the whole session (loading takes seconds)."""
    from constrained_spec.api import default_generator

    return default_generator()  # one per process, shared by every test directory
