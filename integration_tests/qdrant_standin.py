"""A Qdrant REST stand-in on 127.0.0.1 for tests of the server path (no Qdrant binary here).

Each request is parsed with qdrant-client's own models and answered from qdrant-client's local
mode, so a store talking to it sends exactly the HTTP requests it would send a real server. Every
request is recorded (``requests``) and failures can be injected (``fail_next``). Being real HTTP,
it serves other processes too (Ray workers, subprocesses).

Cluster features local mode lacks are kept here: the collection's creation settings, its custom
shard keys (``shard_keys``; a write to a custom-sharded collection without a known key is refused,
as a server refuses it) and optimizer updates (``optimizer_updates``).
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
        self.created: dict[str, dict[str, Any]] = {}  # collection -> its creation body
        self.shard_keys: dict[str, list[Any]] = {}  # collection -> custom shard keys
        self.optimizer_updates: list[dict[str, Any]] = []

    def _shard_key(self, name: str, key: Any, *, write: bool) -> None:
        """Refuse what a server refuses: an unknown shard key, or a write without one."""
        if name not in self.shard_keys:
            if key is not None:
                raise ValueError(f"collection {name} has no custom sharding (shard key {key!r})")
            return
        keys = key if isinstance(key, list) else [key]
        if key is None and write:
            raise ValueError(f"a write to custom-sharded {name} needs a shard key")
        if key is not None and any(k not in self.shard_keys[name] for k in keys):
            raise ValueError(f"unknown shard key {key!r} in {name}")

    def _apply(self, name: str, operation: Any) -> None:
        """One operation of a ``/points/batch`` request, on local mode."""
        local, inner = self.local, operation
        if isinstance(inner, models.UpsertOperation):
            self._shard_key(name, inner.upsert.shard_key, write=True)
            local.upsert(name, points=inner.upsert.points)
        elif isinstance(inner, models.DeleteOperation):
            self._shard_key(name, getattr(inner.delete, "shard_key", None), write=False)
            local.delete(name, points_selector=models.FilterSelector(filter=inner.delete.filter))
        elif isinstance(inner, models.DeletePayloadOperation):
            self._shard_key(name, inner.delete_payload.shard_key, write=False)
            local.delete_payload(
                name,
                keys=inner.delete_payload.keys,
                points=models.FilterSelector(filter=inner.delete_payload.filter),
            )
        else:
            raise ValueError(f"unexpected batch operation {type(inner).__name__}")

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        route = path.split("?")[0]
        if route == "/":
            # qdrant-client probes the version from a thread of its own, at any moment: answered
            # but neither recorded nor failed, so request counts and injected failures cannot race it
            return 200, {"title": "qdrant - vector search engine", "version": "1.20.0"}
        self.requests.append((method, path, body))
        if self.fail_next:
            return self.fail_next.pop(0), {"status": {"error": "injected"}}
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
        done = {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("GET", "/exists"):
            return {"exists": local.collection_exists(name)}
        if (method, rest) == ("PUT", ""):
            create = models.CreateCollection(**body)
            local.create_collection(
                name,
                vectors_config=create.vectors,
                sparse_vectors_config=create.sparse_vectors,
            )
            self.created[name] = body
            if create.sharding_method == models.ShardingMethod.CUSTOM:
                self.shard_keys[name] = []
            return True
        if (method, rest) == ("GET", ""):
            info = local.get_collection(name).model_dump(mode="json")
            info["config"]["params"]["sharding_method"] = self.created[name].get("sharding_method")
            return info
        if (method, rest) == ("PATCH", ""):
            update = models.UpdateCollection(**body)
            if update.optimizers_config is not None:
                self.optimizer_updates.append(update.optimizers_config.model_dump(exclude_none=True))
            return True
        if (method, rest) == ("PUT", "/shards"):
            create_key = models.CreateShardingKey(**body)
            if name not in self.shard_keys:
                raise ValueError(f"collection {name} has no custom sharding")
            if create_key.shard_key in self.shard_keys[name]:
                raise ValueError(f"shard key {create_key.shard_key!r} exists")
            self.shard_keys[name].append(create_key.shard_key)
            return True
        if (method, rest) == ("GET", "/shards"):
            return {"shard_keys": [{"key": k} for k in self.shard_keys.get(name, [])]}
        if (method, rest) == ("PUT", "/index"):
            index = models.CreateFieldIndex(**body)
            local.create_payload_index(name, index.field_name, field_schema=index.field_schema)
            return done
        if (method, rest) == ("PUT", "/points"):
            points = models.PointsList(**body)
            self._shard_key(name, points.shard_key, write=True)
            local.upsert(name, points=points.points)
            return done
        if (method, rest) == ("POST", "/points/batch"):
            batch = models.UpdateOperations(**body)
            for operation in batch.operations:
                self._apply(name, operation)
            return [done for _ in batch.operations]
        if (method, rest) == ("POST", "/points/delete"):
            selector = models.FilterSelector(**body)
            self._shard_key(name, selector.shard_key, write=False)
            local.delete(name, points_selector=models.FilterSelector(filter=selector.filter))
            return done
        if (method, rest) == ("POST", "/points/payload"):
            update = models.SetPayload(**body)
            self._shard_key(name, update.shard_key, write=False)
            selector = models.FilterSelector(filter=update.filter)
            local.set_payload(name, payload=update.payload, points=selector)
            return done
        if (method, rest) == ("POST", "/points"):
            request = models.PointRequest(**body)
            self._shard_key(name, request.shard_key, write=False)
            records = local.retrieve(name, ids=request.ids, with_payload=request.with_payload)
            return [r.model_dump(mode="json") for r in records]
        if (method, rest) == ("POST", "/points/scroll"):
            request = models.ScrollRequest(**body)
            self._shard_key(name, request.shard_key, write=False)
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
            self._shard_key(name, request.shard_key, write=False)
            return {"count": local.count(name, count_filter=request.filter).count}
        if (method, rest) == ("POST", "/points/query"):
            return self._query(name, models.QueryRequest(**body))
        if (method, rest) == ("POST", "/points/query/batch"):
            batch = models.QueryRequestBatch(**body)
            return [self._query(name, request) for request in batch.searches]
        raise ValueError(f"unexpected {method} {rest}")

    def _query(self, name: str, request: models.QueryRequest) -> dict[str, Any]:
        self._shard_key(name, request.shard_key, write=False)
        response = self.local.query_points(
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

    def count(self, method: str, route: str) -> int:
        """How many requests of ``method`` to a path ending in ``route`` were received."""
        return sum(
            1 for m, path, _ in self.requests if m == method and path.split("?")[0].endswith(route)
        )


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

        do_GET = do_PUT = do_POST = do_PATCH = _serve

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
