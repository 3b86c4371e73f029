"""A small fake Kubernetes API server on 127.0.0.1 for the DRA driver's API-server mode.

It serves only the REST paths hwagent's client calls, under ``/apis/resource.k8s.io/v1``:
GET a namespaced ResourceClaim, GET a Node (``/api/v1``, for its uid), and LIST (with ``fieldSelector`` on ``spec.nodeName`` and
``spec.driver``), CREATE, UPDATE and DELETE ResourceSlices. Objects get a ``uid`` and a
``resourceVersion`` (one counter, as etcd's revision); an UPDATE whose resourceVersion is not the
stored one is a 409 Conflict, a CREATE of an existing name a 409 AlreadyExists, as the real server
answers. ``conflicts`` makes the next N updates fail with 409 after another writer's change, and
``stop()`` takes the server down (connections refused). Every request is recorded in ``calls``.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

V1 = "/apis/resource.k8s.io/v1"


class FakeKube:
    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        #: node name -> uid (``GET /api/v1/nodes/<name>``)
        self.nodes: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.conflicts = 0
        self._rv = 100
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else {}

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                fake.calls.append((method, url.path))
                with fake._lock:
                    code, body = fake.serve(method, url.path, parse_qs(url.query),
                                            self._body() if method in ("POST", "PUT") else {})
                self._answer(code, body)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "hwagent", "user": {"token": "t0ken"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "hwagent"}}],
        }))
        return path

    # --- the store ----------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def add_claim(self, doc: dict[str, Any]) -> None:
        meta = doc["metadata"]
        self.claims[(meta.get("namespace", "default"), meta["name"])] = doc

    def add_slice(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Stored as another writer would have: with a uid and a resourceVersion."""
        doc = json.loads(json.dumps(doc))
        doc["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=self._next_rv())
        self.slices[doc["metadata"]["name"]] = doc
        return doc

    @staticmethod
    def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
        return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                      "reason": reason, "message": message}

    def serve(self, method: str, path: str, query: dict[str, list[str]],
              body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path.startswith("/api/v1/nodes/"):
            node = path.rsplit("/", 1)[1]
            if node not in self.nodes:
                return self._status(404, "NotFound", f'nodes "{node}" not found')
            return 200, {"kind": "Node", "apiVersion": "v1", "metadata": {"name": node, "uid": self.nodes[node]}}
        parts = path[len(V1):].strip("/").split("/") if path.startswith(V1) else []
        if method == "GET" and len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "resourceclaims":
            claim = self.claims.get((parts[1], parts[3]))
            if claim is None:
                return self._status(404, "NotFound", f'resourceclaims.resource.k8s.io "{parts[3]}" not found')
            return 200, claim
        if parts[:1] != ["resourceslices"]:
            return self._status(404, "NotFound", f"no such path {path}")
        return self._slices(method, parts[1] if len(parts) > 1 else "", query, body)

    def _slices(self, method: str, name: str, query: dict[str, list[str]],
                body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if method == "GET" and not name:
            want = {}
            for sel in ",".join(query.get("fieldSelector", [])).split(","):
                if sel:
                    k, _, v = sel.partition("=")
                    want[k] = v
            items = [s for s in self.slices.values()
                     if all({"spec.nodeName": s["spec"].get("nodeName"),
                             "spec.driver": s["spec"].get("driver")}.get(k) == v for k, v in want.items())]
            return 200, {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                         "metadata": {"resourceVersion": str(self._rv)}, "items": items}
        if method == "POST" and not name:
            new = body["metadata"]["name"]
            if new in self.slices:
                return self._status(409, "AlreadyExists", f'resourceslices.resource.k8s.io "{new}" already exists')
            return 201, self.add_slice(body)
        if method == "PUT" and name:
            have = self.slices.get(name)
            if have is None:
                return self._status(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
            if self.conflicts > 0:
                self.conflicts -= 1
                have["metadata"]["resourceVersion"] = self._next_rv()  # another writer got there first
            if body["metadata"].get("resourceVersion") != have["metadata"]["resourceVersion"]:
                return self._status(409, "Conflict", f'Operation cannot be fulfilled on resourceslices.resource.k8s.io '
                                                     f'"{name}": the object has been modified')
            body["metadata"].update(uid=have["metadata"]["uid"], resourceVersion=self._next_rv())
            self.slices[name] = body
            return 200, body
        if method == "DELETE" and name:
            if self.slices.pop(name, None) is None:
                return self._status(404, "NotFound", f'resourceslices.resource.k8s.io "{name}" not found')
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return self._status(405, "MethodNotAllowed", f"{method} resourceslices/{name}")
