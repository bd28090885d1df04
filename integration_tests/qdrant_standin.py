"""A Qdrant REST stand-in on 127.0.0.1 for tests of the server path (no Qdrant binary here).

Each request is parsed with qdrant-client's own models and answered from qdrant-client's local
mode, so a store talking to it sends exactly the HTTP requests it would send a real server. Every
request is recorded (``requests``) and failures can be injected (``fail_next``). Being real HTTP,
it serves other processes too (Ray workers, subprocesses).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qdrant_client import QdrantClient, models


class FakeQdrant:
    """Answers the REST calls the page store makes, from an in-memory local-mode client."""

    def __init__(self) -> None:
        self.local = QdrantClient(location=":memory:")
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_next: list[int] = []  # statuses to answer before serving normally

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        self.requests.append((method, path, body))
        if self.fail_next:
            return self.fail_next.pop(0), {"status": {"error": "injected"}}
        route = path.split("?")[0]
        if route == "/":
            return 200, {"title": "qdrant - vector search engine", "version": "1.20.0"}
        match = re.fullmatch(r"/collections/([^/]+)(/.*)?", route)
        if match is None:
            return 404, {"status": {"error": f"no route {route}"}}
        name, rest = match.group(1), match.group(2) or ""
        try:
            with self.lock:
                result = self.dispatch(method, name, rest, body)
        except (ValueError, AttributeError, TypeError) as exc:  # answered, so tests see why
            return 400, {"status": {"error": f"{type(exc).__name__}: {exc}"}}
        return 200, {"result": result, "status": "ok", "time": 0.0}

    def dispatch(self, method: str, name: str, rest: str, body: dict[str, Any]) -> Any:
        local = self.local
        if (method, rest) == ("GET", "/exists"):
            return {"exists": local.collection_exists(name)}
        if (method, rest) == ("PUT", ""):
            create = models.CreateCollection(**body)
            local.create_collection(
                name,
                vectors_config=create.vectors,
                sparse_vectors_config=create.sparse_vectors,
            )
            return True
        if (method, rest) == ("PUT", "/index"):
            index = models.CreateFieldIndex(**body)
            local.create_payload_index(name, index.field_name, field_schema=index.field_schema)
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("PUT", "/points"):
            local.upsert(name, points=models.PointsList(**body).points)
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("POST", "/points/delete"):
            local.delete(name, points_selector=models.FilterSelector(**body))
            return {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("POST", "/points"):
            request = models.PointRequest(**body)
            records = local.retrieve(name, ids=request.ids, with_payload=request.with_payload)
            return [r.model_dump(mode="json") for r in records]
        if (method, rest) == ("POST", "/points/scroll"):
            request = models.ScrollRequest(**body)
            records, offset = local.scroll(
                name,
                scroll_filter=request.filter,
                limit=request.limit or 10,
                offset=request.offset,
                with_payload=request.with_payload,
            )
            return {
                "points": [r.model_dump(mode="json") for r in records],
                "next_page_offset": offset,
            }
        if (method, rest) == ("POST", "/points/count"):
            request = models.CountRequest(**body)
            return {"count": local.count(name, count_filter=request.filter).count}
        if (method, rest) == ("POST", "/points/query"):
            request = models.QueryRequest(**body)
            response = local.query_points(
                name,
                query=request.query,
                using=request.using,
                prefetch=request.prefetch,
                query_filter=request.filter,
                search_params=request.params,
                limit=request.limit or 10,
                with_payload=request.with_payload,
            )
            return {"points": [p.model_dump(mode="json") for p in response.points]}
        raise ValueError(f"unexpected {method} {rest}")



@contextmanager
def serve_standin() -> Iterator[tuple[FakeQdrant, str]]:
    """A running stand-in and its base URL; stopped on exit."""
    backend = FakeQdrant()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            status, payload = backend.handle(self.command, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield backend, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        backend.local.close()
