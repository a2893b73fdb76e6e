"""The HTTP side of a policy server: one POST per request, checked, answered with JSON; a bad request never stops it.

Built on the standard library's ``ThreadingHTTPServer`` (a thread per
connection): a policy server's clients are a handful of simulators, each
waiting on its own answer, and the work per request is a queue hand-off, so
no dependency pays for itself here. What it guarantees:

- it binds 127.0.0.1 unless given another address (``"localhost"`` means
  127.0.0.1; ``"0.0.0.0"`` opens it to the network, on purpose only);
- with an ``auth_token``, a request without ``Authorization: Bearer <token>``
  gets 401, compared in constant time;
- a body is read only up to ``max_request_bytes`` (413 beyond, 411 without a
  ``Content-Length``), with a socket timeout against clients that stall;
- every request is checked by :func:`~corral.integrations.serving.protocol.decode_request`
  before the handler sees it; a :class:`~corral.integrations.serving.protocol.ProtocolError`
  is answered with its status and reason, any other error with 500 (and a
  log line), and the server keeps serving.
"""

from __future__ import annotations

import functools
import hmac
import logging
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from corral.integrations.serving.protocol import (
    DEFAULT_MAX_REQUEST_BYTES,
    ProtocolError,
    Request,
    decode_request,
    encode,
    too_large,
)

logger = logging.getLogger("corral")

Handler = Callable[[Request], dict[str, Any]]
"""what answers a checked request: the response's fields (numpy values allowed), or a ProtocolError"""

READ_TIMEOUT_S = 30.0
"""how long a connection may stall while sending its request before it is closed"""


class PolicyHTTPServer:
    """A running HTTP server that hands each checked request to ``handler`` and sends back its answer as JSON.

    Args:
        address: the interface to bind: ``"localhost"`` (127.0.0.1, the default) or an address.
        port: the port; 0 picks a free one (:attr:`port` says which).
        handler: answers each request (called in the connection's thread).
        auth_token: when given, the token every request must carry (``Authorization: Bearer <token>``).
        max_request_bytes: the largest request body read.

    Raises:
        OSError: the address cannot be bound (the port is taken, say).
    """

    def __init__(
        self,
        handler: Handler,
        address: str = "localhost",
        port: int = 0,
        auth_token: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        host = "127.0.0.1" if address == "localhost" else address
        self._stopped = threading.Event()
        settings = {
            "answer": staticmethod(handler),
            "token": auth_token,
            "max_request_bytes": max_request_bytes,
            "stopped": self._stopped,
        }
        request_handler = type("RequestHandler", (_RequestHandler,), settings)
        self._server = _Server((host, port), request_handler)
        self._server.daemon_threads = True  # a connection left open does not keep the process alive
        # shutdown() waits up to one poll interval: 0.1 s rather than the standard library's 0.5
        serve = functools.partial(self._server.serve_forever, poll_interval=0.1)
        self._thread = threading.Thread(target=serve, name="corral-policy-server", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """The bound address as a client's URL (``http://127.0.0.1:9900``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def stop(self) -> None:
        """Stop serving and release the port; a kept-alive connection's next request gets 503 and the connection closes."""
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Server(ThreadingHTTPServer):
    """The standard library's server, quiet about clients that go away (it would print each one's traceback)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log a connection's failure: a client that hung up at DEBUG, anything else with its traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            logger.debug("policy server: client %s went away (%s)", client_address, error)
        else:
            logger.exception("policy server: the connection from %s failed", client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    """One connection's requests: POST only, each checked before :attr:`answer` sees it."""

    answer: Handler
    stopped: threading.Event
    token: str | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    timeout = READ_TIMEOUT_S  # socket timeout while reading (StreamRequestHandler's)
    protocol_version = "HTTP/1.1"  # keep-alive: a client's requests reuse one connection
    disable_nagle_algorithm = True  # the headers and the body go out as two writes: Nagle would hold the body ~40 ms

    def do_POST(self) -> None:
        """Check the request (token, size, body) and answer it."""
        try:
            if self.stopped.is_set():  # a connection kept alive past stop(): its client reconnects to whoever listens now
                self.close_connection = True
                raise ProtocolError(HTTPStatus.SERVICE_UNAVAILABLE, "the server has stopped")
            body = self._read_body()
            self._check_token()
            response = self.answer(decode_request(body, self.max_request_bytes))
            self._send(HTTPStatus.OK, response)
        except ProtocolError as refused:
            self._send(refused.status, {"error": str(refused)})
        except Exception:  # the server goes on serving whatever one request did
            logger.exception("the policy server failed to answer a %s request", self.command)
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": "the server failed to answer; its log says why"})

    def do_GET(self) -> None:
        """Refuse: every command is a POST with a JSON body."""
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "send each command as a POST with a JSON body"})

    def _check_token(self) -> None:
        if self.token is None:
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            raise ProtocolError(401, "the request has no valid 'Authorization: Bearer <token>' header")

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > self.max_request_bytes:
            self.close_connection = True  # its body is left unread: the connection cannot carry another request
            if length is None or not length.isdigit():
                raise ProtocolError(411, "the request needs a Content-Length header (chunked bodies are not read)")
            raise too_large(int(length), self.max_request_bytes)
        return self.rfile.read(int(length))

    def _send(self, status: int, fields: dict[str, Any]) -> None:
        try:
            body = encode(fields)
        except ValueError:  # a handler's answer held NaN: a server error, said as such
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, encode({"error": "the answer was not finite"})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are logged at DEBUG, not printed to stderr."""
        logger.debug("policy server: " + format, *args)
