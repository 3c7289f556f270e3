"""One live server on 127.0.0.1 (a free port) per test session, over the real default model."""

import pytest


@pytest.fixture(scope="session")
def live_server():
    from constrained_spec.api import Generator
    from constrained_spec.server.app import BackgroundServer, ServerConfig, create_app

    generator = Generator(verbose=False)
    config = ServerConfig(max_tokens_limit=512, max_n=4, max_request_bytes=200_000)
    with BackgroundServer(create_app(generator, config)) as server:
        yield server


@pytest.fixture
def client(live_server):
    from openai import OpenAI

    return OpenAI(base_url=live_server.base_url, api_key="unused", max_retries=0, timeout=300)


@pytest.fixture
def model_id(client):
    return client.models.list().data[0].id
