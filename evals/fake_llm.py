"""A local OpenAI-compatible chat server that plays scripted replies: the Groq API's stand-in.

Point `GROQ_BASE_URL` (or ChatGroq's base_url) at `FakeLLM.url`; every POST to
`/openai/v1/chat/completions` takes the next scripted `Reply` (the last one repeats) and records the
request, so tests and evals can see what the model was shown.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @staticmethod
    def json(payload: dict) -> "Reply":
        return Reply(json.dumps(payload))

    @staticmethod
    def rate_limited(retry_after_s: float = 1) -> "Reply":
        body = json.dumps({"error": {"message": "Rate limit reached: tokens per minute (TPM)", "type": "tokens",
                                     "code": "rate_limit_exceeded"}})
        return Reply(body, 429, {"retry-after": str(retry_after_s)})


def completion(content: str) -> dict:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeLLM:
    """`with FakeLLM([Reply(...), ...]) as llm:` serves on a free loopback port."""

    def __init__(self, replies: list[Reply]):
        if not replies:
            raise ValueError("FakeLLM needs at least one scripted reply")
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.request_times: list[float] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def _next(self, request: dict) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.request_times.append(time.monotonic())
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                reply = fake._next(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.content if reply.status != 200 else json.dumps(completion(reply.content))
                data = payload.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> "FakeLLM":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
