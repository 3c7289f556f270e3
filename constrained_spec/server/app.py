"""OpenAI-compatible HTTP server: `GET /v1/models`, `POST /v1/chat/completions` (streaming or
not, `response_format`, `tools` / `tool_choice`, both together), `POST /v1/responses` (the subset
agents use, see `responses.py`), errors in OpenAI's format.

    constrained-spec serve --port 8000          # then: OpenAI(base_url="http://127.0.0.1:8000/v1")

Every request becomes one engine request per choice, submitted to the Generator's scheduler
(the one thread that steps its engine, shared with the Python API), so concurrent clients are
decoded in one batch. A client that disconnects has its requests aborted. Speculation statistics
come back in the `constrained_spec` field of the response (and of the last stream chunk) and,
for non-streamed responses, in the `x-constrained-spec-stats` header.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..chat import schema_instruction
from ..grammar.compiler import compile_json_schema
from ..grammar.protocol import GrammarError
from ..inputs import PromptTooLong
from ..sampling import SamplingParams
from .output import ChoiceOutput, logprobs_body
from .protocol import ApiError, ChatRequest, chunk_body, completion_body, error_body, new_id, parse_request, usage_body
from .responses import output_items, parse_responses_request, response_body, stream_events, to_chat_request, usage_of
from .worker import EngineFailure, EngineWorker
from .tools import (
    AUTO_TEXT, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ContentFormat, ToolPlan, calls_schema, constraint_grammar, plan_tools,
    render_messages, tool_error_text,
)

__all__ = ["ServerConfig", "create_app", "serve", "BackgroundServer"]

log = logging.getLogger("constrained_spec.server")


@dataclass(frozen=True)
class ServerConfig:
    """Bounds on what one request may ask for. Larger requests get a 400 / 413, and a request that
    would exceed `max_in_flight` engine requests gets a 429. Without `max_tokens`, a reply may
    use the rest of the model's context (OpenAI's default), capped by `default_max_tokens` and
    `max_tokens_limit` when they are set."""

    max_request_bytes: int = 1 << 20
    max_prompt_tokens: int = 4096
    max_tokens_limit: int | None = None  # None: the model's context is the only limit
    default_max_tokens: int | None = None  # None: the context left after the prompt
    max_n: int = 8
    max_in_flight: int = 64
    model_aliases: tuple[str, ...] = field(default=("default",))


@dataclass
class _Prepared:
    request: ChatRequest
    prompt_ids: list[int]
    params: list[SamplingParams]  # one per choice
    grammar: Any
    plan: ToolPlan


class ChatService:
    """Request validation -> engine requests -> OpenAI responses, for one loaded Generator."""

    def __init__(self, generator: Any, config: ServerConfig) -> None:
        self.generator = generator
        self.config = config
        self.model_name = str(generator.model_name)
        self.worker = EngineWorker(generator.scheduler)
        self._eos = int(generator.tokenizer.eos_token_id)
        self._slots = threading.Lock()

    # -- validation ------------------------------------------------------------------------

    def _check_model(self, name: str) -> None:
        if name != self.model_name and name not in self.config.model_aliases:
            raise ApiError(404, f"the model '{name}' does not exist; this server serves '{self.model_name}'",
                           param="model", code="model_not_found")

    def _content_format(self, req: ChatRequest) -> ContentFormat:
        fmt = req.response_format
        if fmt is None or fmt.type == "text":
            return ContentFormat()
        if fmt.type == "json_object":
            return ContentFormat("json_object")
        schema = fmt.json_schema.schema_ if fmt.json_schema is not None else None
        if schema is None:
            raise ApiError(400, "response_format.json_schema needs a 'schema'", param="response_format.json_schema.schema")
        return ContentFormat("json_schema", schema)

    def _compile(self, plan: ToolPlan, content: ContentFormat) -> Any:
        """The reply's grammar (None: unconstrained text): the calls array (tools.calls_schema)
        through the JSON-schema backend; in "auto" mode framed by the markers, joined with the
        content's grammar; a response format alone as a schema / JSON-object constraint."""
        from ..grammar import compile as compile_grammar
        from ..grammar.union import UnionGrammar

        blame = "response_format"
        generator = self.generator
        try:
            if plan.mode != "none":
                blame = "tools"
                closed = getattr(generator, "closed_objects", True)
                schema = calls_schema(plan)
                if schema is None:  # references that cannot move into one document: one document per tool
                    ir = constraint_grammar(plan, content, closed_objects=closed)
                    return compile_grammar(ir=ir, vocab=generator.vocabulary, backend=generator.backend)
                frame = ("", "") if plan.mode == "required" else (TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
                calls = compile_json_schema(schema, generator.vocabulary, backend=generator.backend, closed_objects=closed, frame=frame)
                if plan.mode == "required":
                    return calls
                blame = "response_format"
                return UnionGrammar([self._content_grammar(content), calls])
            return None if content.kind == "text" else self._content_grammar(content)
        except (GrammarError, ValueError) as exc:
            message = str(exc) if blame == "response_format" else tool_error_text(str(exc), plan)
            raise ApiError(400, f"invalid or unsupported {'schema' if blame == 'response_format' else 'tool schema'}: {message}",
                           param=blame) from None

    def _content_grammar(self, content: ContentFormat) -> Any:
        """What content may be in "auto" mode: text not starting with the call marker's first
        character, or JSON following the response format."""
        if content.kind == "json_object":
            return self.generator.compile_constraint(json_object=True)
        if content.kind == "json_schema":
            return self.generator.compile_constraint(schema=content.schema)
        return self.generator.compile_constraint(regex=AUTO_TEXT)

    @staticmethod
    def _hint(plan: ToolPlan, content: ContentFormat) -> str | None:
        """The sentence about the JSON to write, when the reply may be content in a JSON format
        (under "required" / a named tool the reply is calls; the format applies to later turns)."""
        if plan.mode == "required" or content.kind == "text":
            return None
        if content.kind == "json_object":
            return "Answer with a JSON object."
        return schema_instruction(content.schema)

    @property
    def context_length(self) -> int | None:
        known = getattr(self.generator, "context_length", None)
        if isinstance(known, int) and known > 0:
            return known
        config = getattr(getattr(self.generator.loaded, "model", None), "config", None)
        value = getattr(config, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def _max_tokens(self, req: ChatRequest, prompt_tokens: int) -> int:
        """The request's max_tokens, or by default the context left after the prompt (capped by
        the server's limits when they are set)."""
        param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
        context = self.context_length
        remaining = None if context is None else context - prompt_tokens
        if remaining is not None and remaining < 1:
            raise ApiError(400, f"the prompt has {prompt_tokens} tokens, which fills the model's context of {context}",
                           param="messages", code="context_length_exceeded")
        wanted = req.requested_max_tokens
        limit = self.config.max_tokens_limit
        if wanted is None:
            candidates = [v for v in (remaining, limit, self.config.default_max_tokens) if v is not None]
            return min(candidates) if candidates else 4096
        if limit is not None and wanted > limit:
            raise ApiError(400, f"{param}={wanted} is above this server's limit of {limit}", param=param)
        if remaining is not None and wanted > remaining:
            raise ApiError(400, f"{param}={wanted} plus the prompt's {prompt_tokens} tokens exceed the model's context "
                           f"of {context} tokens", param=param, code="context_length_exceeded")
        return wanted

    async def prepare(self, req: ChatRequest) -> _Prepared:
        self._check_model(req.model)
        if req.top_logprobs is not None and not req.logprobs:
            raise ApiError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
        if req.n > self.config.max_n:
            raise ApiError(400, f"n={req.n} is above this server's limit of {self.config.max_n}", param="n")
        wanted, limit = req.requested_max_tokens, self.config.max_tokens_limit
        if wanted is not None and limit is not None and wanted > limit:
            param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
            raise ApiError(400, f"{param}={wanted} is above this server's limit of {limit}", param=param)
        content = self._content_format(req)
        plan = plan_tools(req.tools, req.tool_choice, req.parallel_tool_calls, content)
        try:
            prompt_ids = self.generator.build_prompt(render_messages(req.messages, plan), hint=self._hint(plan, content),
                                                     max_tokens=req.requested_max_tokens or 0)
        except PromptTooLong as exc:  # measured against the model's context (tokens + max_tokens)
            raise ApiError(400, str(exc), param="messages", code="context_length_exceeded") from None
        except ValueError as exc:
            raise ApiError(400, str(exc), param="messages") from None
        if len(prompt_ids) > self.config.max_prompt_tokens:
            raise ApiError(400, f"the prompt has {len(prompt_ids)} tokens, above this server's limit of "
                           f"{self.config.max_prompt_tokens}", param="messages", code="context_length_exceeded")
        max_tokens = self._max_tokens(req, len(prompt_ids))
        try:
            temperature = 1.0 if req.temperature is None else req.temperature
            base = SamplingParams(
                temperature=temperature, top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0,
                presence_penalty=req.presence_penalty or 0.0, frequency_penalty=req.frequency_penalty or 0.0,
                logit_bias=req.logit_bias or {}, max_tokens=max_tokens, seed=req.seed,
                stop=req.stops if plan.mode == "none" else (),  # never let a stop string cut a tool call
            )
            params = [base if req.seed is None else base.replace(seed=req.seed + i) for i in range(req.n)]
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        # compiling can take a while: keep the event loop serving other requests
        grammar = await asyncio.to_thread(self._compile, plan, content)
        return _Prepared(req, prompt_ids, params, grammar, plan)

    # -- generation ------------------------------------------------------------------------

    def _start(self, prep: _Prepared) -> tuple[list[ChoiceOutput], dict[str, ChoiceOutput], asyncio.Queue]:
        decode = self.generator.engine.decode  # engine_setup.text_decoder
        choices = [ChoiceOutput(i, decode, self._eos, prep.request.stops, prep.plan) for i in range(prep.request.n)]
        queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        with self._slots:
            if self.worker.in_flight + len(choices) > self.config.max_in_flight:
                raise ApiError(429, "the server is at its limit of requests in flight; retry shortly",
                               type="rate_limit_error", code="server_busy")
            logprobs = (prep.request.top_logprobs or 0) if prep.request.logprobs else None
            by_id = {self.worker.submit(prep.prompt_ids, params, prep.grammar, loop, queue, logprobs): c
                     for params, c in zip(prep.params, choices)}
        return choices, by_id, queue

    async def _next(self, by_id: dict[str, ChoiceOutput], queue: asyncio.Queue) -> ChoiceOutput:
        """Apply the next engine output; returns the choice it updated."""
        request_id, item = await queue.get()
        if isinstance(item, EngineFailure):
            raise ApiError(500, str(item), type="server_error")
        choice = by_id[request_id]
        choice.update(item)
        if choice.stop_hit and not item.finished:
            self.worker.abort(request_id)  # a stop string ended it: free the slot now
        return choice

    def _abort_unfinished(self, by_id: dict[str, ChoiceOutput]) -> None:
        for request_id, choice in by_id.items():
            if not choice.finished:
                self.worker.abort(request_id)

    def _extension(self, choices: list[ChoiceOutput]) -> dict[str, Any]:
        return {"speculation": [c.stats for c in choices]}

    def _logprobs(self, choice: ChoiceOutput, prep: _Prepared, delta: bool = False) -> dict[str, Any] | None:
        """The choice's `logprobs` object (streaming: the tokens since the last chunk)."""
        if not prep.request.logprobs:
            return None
        return logprobs_body(choice.logprobs_delta() if delta else choice.logprobs, self._token_bytes)

    def _token_bytes(self, token_id: int) -> bytes:
        vocab = self.generator.vocabulary
        raw = vocab.token_bytes[token_id] if token_id < len(vocab.token_bytes) else None
        return raw if raw is not None else self.generator.tokenizer.decode([token_id]).encode("utf-8")

    async def run(self, prep: _Prepared, request: Request) -> list[ChoiceOutput]:
        """Generate every choice to its end (aborted if the client disconnects)."""
        choices, by_id, queue = self._start(prep)
        watcher = asyncio.create_task(_abort_on_disconnect(request, lambda: self._abort_unfinished(by_id)))
        try:
            while not all(c.finished for c in choices):
                await self._next(by_id, queue)
        finally:
            watcher.cancel()
            self._abort_unfinished(by_id)
        return choices

    async def updates(self, prep: _Prepared) -> AsyncIterator[ChoiceOutput]:
        """Each choice after each of its engine outputs, until all finished (for streaming; the
        requests are aborted when the consumer stops early)."""
        by_id: dict[str, ChoiceOutput] = {}
        try:
            choices, by_id, queue = self._start(prep)
            while not all(c.finished for c in choices):
                yield await self._next(by_id, queue)
        finally:
            self._abort_unfinished(by_id)

    async def complete(self, prep: _Prepared, request: Request) -> JSONResponse:
        choices = await self.run(prep, request)
        bodies = []
        for c in choices:
            content, calls, reason = c.final()
            message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
            if calls:
                message["tool_calls"] = calls
            bodies.append({"index": c.index, "message": message, "finish_reason": reason, "logprobs": self._logprobs(c, prep)})
        usage = usage_body(len(prep.prompt_ids), sum(len(c.token_ids) for c in choices))
        extension = self._extension(choices)
        body = completion_body(new_id("chatcmpl"), self.model_name, bodies, usage, extension)
        header = json.dumps(extension["speculation"][0], separators=(",", ":"), default=str)
        return JSONResponse(body, headers={"x-constrained-spec-stats": header})

    async def stream(self, prep: _Prepared) -> AsyncIterator[str]:
        """SSE events: a role chunk per choice, content deltas, whole tool calls, a finish chunk
        per choice, an optional usage chunk, then `[DONE]`. Errors become an `error` event."""
        completion_id, created, model = new_id("chatcmpl"), int(time.time()), self.model_name
        event = lambda choices, **kw: _sse(chunk_body(completion_id, model, created, choices, **kw))  # noqa: E731
        by_id: dict[str, ChoiceOutput] = {}
        try:
            choices, by_id, queue = self._start(prep)
            for c in choices:
                yield event([{"index": c.index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}])
            while not all(c.finished for c in choices):
                choice = await self._next(by_id, queue)
                delta = choice.content_delta()
                if delta:
                    yield event([{"index": choice.index, "delta": {"content": delta}, "finish_reason": None,
                                  "logprobs": self._logprobs(choice, prep, delta=True)}])
                first = choice.calls_sent
                calls = choice.calls_delta()  # each call once it is whole; at the end, a cut one too
                if calls:
                    deltas = [dict(call, index=first + i) for i, call in enumerate(calls)]
                    yield event([{"index": choice.index, "delta": {"tool_calls": deltas}, "finish_reason": None, "logprobs": None}])
                if choice.finished:
                    _, _, reason = choice.final()
                    last = len([c for c in choices if c.finished]) == len(choices)
                    yield event([{"index": choice.index, "delta": {}, "finish_reason": reason,
                                  "logprobs": self._logprobs(choice, prep, delta=True)}],
                                extension=self._extension(choices) if last else None)
            if prep.request.stream_options is not None and prep.request.stream_options.include_usage:
                yield event([], usage=usage_body(len(prep.prompt_ids), sum(len(c.token_ids) for c in choices)))
            yield "data: [DONE]\n\n"
        except ApiError as exc:
            yield _sse(error_body(exc.message, exc.type, exc.param, exc.code))
            yield "data: [DONE]\n\n"
        except Exception:  # never leak a traceback; the log has it
            log.exception("stream failed")
            yield _sse(error_body("internal server error", "server_error"))
            yield "data: [DONE]\n\n"
        finally:  # also runs when the client disconnects (the generator is cancelled)
            self._abort_unfinished(by_id)


def _sse(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


async def _abort_on_disconnect(request: Request, abort: Any) -> None:
    while True:
        await asyncio.sleep(0.25)
        if await request.is_disconnected():
            abort()
            return


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is larger than this server's limit of {limit} bytes")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise ApiError(413, f"the request body is larger than this server's limit of {limit} bytes")
    return bytes(body)


def _error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.type, exc.param, exc.code), status_code=exc.status)


def create_app(generator: Any, config: ServerConfig | None = None) -> FastAPI:
    """The FastAPI app serving `generator` (an `api.Generator`). Its engine is stepped by the
    generator's scheduler; at app shutdown this app's requests still in flight are aborted."""
    from contextlib import asynccontextmanager

    service = ChatService(generator, config or ServerConfig())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        service.worker.close()

    app = FastAPI(title="constrained_spec", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else None
        return JSONResponse(error_body(str(exc.detail), "invalid_request_error", None, code), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return JSONResponse(error_body("internal server error", "server_error"), status_code=500)

    def model_card() -> dict[str, Any]:
        return {"id": service.model_name, "object": "model", "created": 0, "owned_by": "constrained_spec"}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id}")
    async def get_model(model_id: str) -> dict[str, Any]:
        service._check_model(model_id)
        return model_card()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "in_flight": service.worker.in_flight, "peak_batch": service.worker.peak_batch}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        req = parse_request(await _read_body(request, service.config.max_request_bytes))
        prep = await service.prepare(req)
        if req.stream:
            return StreamingResponse(service.stream(prep), media_type="text/event-stream",
                                     headers={"cache-control": "no-cache"})
        return await service.complete(prep, request)

    @app.post("/v1/responses")
    async def responses(request: Request) -> Any:
        req = parse_responses_request(await _read_body(request, service.config.max_request_bytes))
        prep = await service.prepare(to_chat_request(req))
        if req.stream:
            events = stream_events(service.updates(prep), req, service.model_name, len(prep.prompt_ids))
            return StreamingResponse(events, media_type="text/event-stream", headers={"cache-control": "no-cache"})
        (choice,) = await service.run(prep, request)
        content, calls, reason = choice.final()
        usage = usage_of(len(prep.prompt_ids), len(choice.token_ids))
        status = "incomplete" if reason == "length" else "completed"
        return response_body(new_id("resp"), time.time(), service.model_name, req, output_items(content, calls, reason),
                             status, usage, {"speculation": [choice.stats]})

    return app


def serve(host: str = "127.0.0.1", port: int = 8000, model: str | None = None, *, draft: str = "auto",
          config: ServerConfig | None = None, log_level: str = "info", runner: str = "auto",
          device: Any = None, dtype: Any = None) -> None:
    """Load the model (on `device` in `dtype`, see `devices.py`) and serve it until interrupted
    (the CLI's `constrained-spec serve`)."""
    import uvicorn

    from ..api import Generator

    app = create_app(Generator(model, draft=draft, runner=runner, device=device, dtype=dtype), config)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


class BackgroundServer:
    """Run an app with uvicorn in a background thread on 127.0.0.1 (port 0 = a free port):

        with BackgroundServer(create_app(gen)) as server:
            client = OpenAI(base_url=server.base_url, api_key="-")
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="constrained-spec-http", daemon=True)
        self.host, self.port = host, port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def __enter__(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start (is the port free?)")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
