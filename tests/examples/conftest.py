import pytest


@pytest.fixture(scope="session")
def generator():
    from constrained_spec.api import default_generator

    return default_generator()  # one per process, shared by every test directory
