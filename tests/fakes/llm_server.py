"""FakeLLMServer: a local stand-in for the Anthropic and OpenAI HTTP APIs, for tests only.

It listens on 127.0.0.1 (a free port chosen by the OS), answers in threads, and
speaks three wire protocols closely enough for the real SDKs to parse:

* ``POST /v1/messages``          Anthropic Messages API (text and tool_use blocks,
  ``stop_reason`` end_turn / max_tokens / refusal with ``stop_details``, usage);
* ``POST /v1/responses``         OpenAI Responses API (output message with
  ``output_text`` or ``refusal`` content, ``status`` incomplete for token limits, usage);
* ``POST /v1/chat/completions``  OpenAI Chat Completions (``finish_reason`` stop /
  length, ``message.refusal``, usage) — the route LiteLLM and gateways use.

Replies are scripted: :meth:`FakeLLMServer.push` queues replies or faults that
are served in order, and :meth:`FakeLLMServer.respond_with` sets a function of
the request used when the queue is empty. Every request is recorded (path, API,
headers without credentials, JSON body) in :attr:`FakeLLMServer.requests`.

Faults on demand (:class:`Fault`): any status code with an API-shaped error body
and headers (``retry-after``/``retry-after-ms`` for 429 and 529), a delay before
answering (for timeouts), a malformed body, or a dropped connection.

Nothing here ships with a provider; it lives in ``tests/fakes`` and is named a fake.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

#: Header names (lower case) never recorded, so a key never reaches a test log.
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "api-key", "proxy-authorization", "cookie"})

ROUTES = {
    "/v1/messages": "anthropic",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}


@dataclass(frozen=True)
class Reply:
    """A successful answer, rendered in the wire format of whichever API was called.

    ``stop`` is ``"end"`` (normal), ``"max_tokens"`` (cut off) or ``"refusal"``;
    ``refusal`` is the refusal text. ``delay`` seconds pass before the answer.
    """

    text: str = ""
    stop: str = "end"
    refusal: str = "I can't help with that."
    input_tokens: int | None = None
    output_tokens: int | None = None
    delay: float = 0.0
    model: str | None = None


@dataclass(frozen=True)
class Fault:
    """Something going wrong: an error status, a malformed body or a dropped connection.

    * ``status``: HTTP status with an API-shaped error body (``message``/``error_type``);
    * ``headers``: extra response headers, e.g. ``{"retry-after-ms": "10"}``;
    * ``malformed``: status 200 with ``body`` (default: not JSON at all);
    * ``drop``: close the connection without answering;
    * ``delay``: seconds to wait before doing any of it.
    """

    status: int = 500
    message: str = "fake server error"
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    malformed: bool = False
    body: str | None = None
    drop: bool = False
    delay: float = 0.0


Scripted = Reply | Fault | str
Responder = Callable[["RecordedRequest"], Scripted]


@dataclass
class RecordedRequest:
    """One request as the server saw it (credentials removed from the headers)."""

    api: str
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received: float

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the client asked the answer to follow, wherever the API puts it."""
        body = self.body if isinstance(self.body, dict) else {}
        if self.api == "anthropic":
            fmt = (body.get("output_config") or {}).get("format")
            if fmt:
                return fmt.get("schema")
            for tool in body.get("tools") or []:
                if "input_schema" in tool:
                    return tool["input_schema"]
            return None
        if self.api == "responses":
            fmt = (body.get("text") or {}).get("format") or {}
            return fmt.get("schema")
        fmt = body.get("response_format") or {}
        return (fmt.get("json_schema") or {}).get("schema")

    @property
    def max_tokens(self) -> int | None:
        body = self.body if isinstance(self.body, dict) else {}
        for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
            if key in body:
                return body[key]
        return None

    def text(self) -> str:
        """Every piece of prompt text in the request (system and messages), joined by newlines."""
        body = self.body if isinstance(self.body, dict) else {}
        parts: list[str] = []
        for key in ("system", "instructions"):
            parts.extend(_texts(body.get(key)))
        for key in ("messages", "input"):
            for message in body.get(key) or []:
                if isinstance(message, dict):
                    parts.extend(_texts(message.get("content")))
                else:
                    parts.extend(_texts(message))
        return "\n".join(parts)


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            out.extend(_texts(item))
        return out
    if isinstance(value, dict):
        for key in ("text", "content"):
            if key in value:
                return _texts(value[key])
    return []


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class FakeLLMServer:
    """A threaded HTTP server on 127.0.0.1 speaking the Anthropic and OpenAI APIs (a fake)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Scripted] = deque()
        self._responder: Responder | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.max_in_flight = 0

    # ----------------------------------------------------------------- control
    def start(self) -> FakeLLMServer:
        server = self

        class Handler(_Handler):
            fake = server

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening; requests still sleeping in a delay are cut short."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:PORT`` (the Anthropic SDK's ``base_url``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """``.../v1``: the OpenAI SDK's and LiteLLM's ``base_url``/``api_base``."""
        return self.url + "/v1"

    # --------------------------------------------------------------- scripting
    def push(self, *items: Scripted) -> FakeLLMServer:
        """Queue replies (a :class:`Reply`, a plain string = reply text) or :class:`Fault` s."""
        with self._lock:
            self._queue.extend(items)
        return self

    def respond_with(self, responder: Responder | None) -> FakeLLMServer:
        """Answer with ``responder(request)`` whenever the queue is empty."""
        self._responder = responder
        return self

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self._responder is not None:
            return self._responder(request)
        return Fault(status=500, message="FakeLLMServer: no scripted reply left for this request")

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the server is stopping meanwhile."""
        return self._stopping.wait(seconds)

    def next_id(self) -> int:
        return next(self._ids)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": f"FakeLLMServer: no GET route {self.path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        api = ROUTES.get(path)
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
        request = RecordedRequest(api or "unknown", "POST", path, headers, body, time.time())
        self.fake._record(request)
        if api is None:
            self._send_json(404, {"error": {"message": f"FakeLLMServer: no route {path}"}})
            return
        if not isinstance(body, dict):
            self._send_error(
                api, Fault(status=400, message="request body is not a JSON object", error_type="invalid_request_error")
            )
            return
        with self.fake._lock:
            self.fake.in_flight += 1
            self.fake.max_in_flight = max(self.fake.max_in_flight, self.fake.in_flight)
        try:
            self._serve(api, request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
        finally:
            with self.fake._lock:
                self.fake.in_flight -= 1

    def _serve(self, api: str, request: RecordedRequest) -> None:
        item = self.fake._next(request)
        if isinstance(item, str):
            item = Reply(text=item)
        delay = item.delay
        if delay and self.fake.wait(delay):
            self.close_connection = True
            return
        if isinstance(item, Fault):
            self._send_fault(api, item)
            return
        payload = render_reply(api, request, item, self.fake.next_id())
        self._send_json(200, payload)

    # ---------------------------------------------------------------- writing
    def _send_fault(self, api: str, fault: Fault) -> None:
        if fault.drop:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault.malformed:
            body = fault.body if fault.body is not None else '{"id": "broken", "content": [ this is not json'
            self._send_raw(200, body.encode(), fault.headers)
            return
        self._send_error(api, fault)

    def _send_error(self, api: str, fault: Fault) -> None:
        error_type = fault.error_type or _default_error_type(api, fault.status)
        if api == "anthropic":
            payload: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": fault.message}}
        else:
            payload = {"error": {"message": fault.message, "type": error_type, "param": None, "code": error_type}}
        self._send_json(fault.status, payload, fault.headers)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _default_error_type(api: str, status: int) -> str:
    if api == "anthropic":
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
    return {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
        status, "server_error"
    )


def render_reply(api: str, request: RecordedRequest, reply: Reply, number: int) -> dict[str, Any]:
    """The JSON body of a successful answer in the given API's format."""
    body = request.body
    model = reply.model or body.get("model") or "fake-model"
    input_tokens = reply.input_tokens if reply.input_tokens is not None else _estimate_tokens(request.text())
    output_tokens = reply.output_tokens if reply.output_tokens is not None else _estimate_tokens(reply.text)
    if api == "anthropic":
        return _anthropic_reply(body, reply, model, input_tokens, output_tokens, number)
    if api == "responses":
        return _responses_reply(body, reply, model, input_tokens, output_tokens, number)
    return _chat_reply(reply, model, input_tokens, output_tokens, number)


def _anthropic_reply(body: dict, reply: Reply, model: str, inp: int, out: int, number: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    stop_details = None
    if reply.stop == "refusal":
        stop_reason = "refusal"
        stop_details = {"type": "refusal", "category": None, "explanation": reply.refusal}
        if reply.text:
            content.append({"type": "text", "text": reply.text})
    else:
        stop_reason = "max_tokens" if reply.stop == "max_tokens" else "end_turn"
        choice = body.get("tool_choice") or {}
        if choice.get("type") == "tool" and reply.stop != "max_tokens":
            try:
                tool_input = json.loads(reply.text)
            except json.JSONDecodeError:
                tool_input = {"unparsable": reply.text}
            content.append(
                {"type": "tool_use", "id": f"toolu_fake_{number}", "name": choice.get("name"), "input": tool_input}
            )
            stop_reason = "tool_use"
        else:
            if (body.get("thinking") or {}).get("type") in ("adaptive", "enabled"):
                content.append({"type": "thinking", "thinking": "Considering the node.", "signature": "fake-signature"})
            content.append({"type": "text", "text": reply.text})
    return {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "stop_details": stop_details,
        "usage": {
            "input_tokens": inp,
            "output_tokens": out,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _responses_reply(body: dict, reply: Reply, model: str, inp: int, out: int, number: int) -> dict[str, Any]:
    if reply.stop == "refusal":
        content: list[dict[str, Any]] = [{"type": "refusal", "refusal": reply.refusal}]
    else:
        content = [{"type": "output_text", "text": reply.text, "annotations": []}]
    incomplete = reply.stop == "max_tokens"
    return {
        "id": f"resp_fake_{number}",
        "object": "response",
        "created_at": time.time(),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "model": model,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "output": [
            {
                "type": "message",
                "id": f"msg_fake_{number}",
                "status": "incomplete" if incomplete else "completed",
                "role": "assistant",
                "content": content,
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "text": body.get("text"),
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out,
        },
    }


def _chat_reply(reply: Reply, model: str, inp: int, out: int, number: int) -> dict[str, Any]:
    if reply.stop == "refusal":
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": reply.refusal}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": reply.text, "refusal": None}
        finish = "length" if reply.stop == "max_tokens" else "stop"
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out},
    }


@pytest.fixture(name="fake_llm_server")
def fake_llm_server_fixture() -> Iterator[FakeLLMServer]:
    """Fixture ``fake_llm_server``: a started :class:`FakeLLMServer`, stopped after the test.

    Import ``fake_llm_server_fixture`` into a test module to make the fixture available there.
    """
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()
