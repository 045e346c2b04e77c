#!/usr/bin/env python3
"""A small AAP v1 provider (synchronous mode), written from the
specification with the Python standard library only, for trying
`agentowl conformance provider` against another implementation.

    python3 provider.py --port 8480 --provisioner-token prov-secret [--seed-violations]

Decisions are made through a non-AAP operator endpoint:
    POST /operator/decide/{id}  {"decision": "approve"|"deny"}
with the header "Authorization: Bearer <provisioner token>"
(decide.py does it). State is kept in memory.

--seed-violations plants two bugs on purpose: the same idempotency key
with another body returns the original request instead of 409, and an
approval's expires_at is computed anew on every read.
"""

import argparse
import json
import re
import secrets
import threading
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.Condition()
INSTANCES = {}  # id -> {"id", "name", "token", "deleted"}
TOKENS = {}  # credential -> instance id
INSTANCE_KEYS = {}  # key -> (input, instance id, credential)
UPDATE_KEYS = {}  # (instance id, key) -> (input, response)
REQUESTS = {}  # id -> {"instance": id, "doc": {...}}
REQUEST_KEYS = {}  # (instance id, key) -> (input, request id)
DURATION = re.compile(r"^[1-9][0-9]*(s|m|h)$")
UNITS = {"s": 1, "m": 60, "h": 3600}
MAX_TIMEOUT = 24 * 3600
APPROVAL_VALIDITY = timedelta(minutes=5)
ARGS = None


def now():
    return datetime.now(timezone.utc)


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def seconds(duration):
    return int(duration[:-1]) * UNITS[duration[-1]]


class Fail(Exception):
    def __init__(self, status, kind, code, message):
        super().__init__(message)
        self.status, self.kind, self.code, self.message = status, kind, code, message


def expire(req):
    """Record expiry of a pending request whose deadline has passed."""
    doc = req["doc"]
    if doc["status"] == "pending" and now() >= parse_stamp(doc["deadline_at"]):
        doc["status"] = "expired"
        doc["decision"] = {"status": "expired", "decided_at": doc["deadline_at"]}
        LOCK.notify_all()


def view(req):
    expire(req)
    doc = json.loads(json.dumps(req["doc"]))
    if ARGS.seed_violations and doc["status"] == "approved":
        # Seeded violation: expires_at moves on every read.
        doc["decision"]["expires_at"] = stamp(now() + APPROVAL_VALIDITY)
    return doc


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("X-Request-ID", self.rid)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method):
        self.rid = str(uuid.uuid4())
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            url = urlparse(self.path)
            status, body = self.route(method, url.path, parse_qs(url.query), raw)
            self.send(status, body)
        except Fail as f:
            self.send(f.status, {"error": {"type": f.kind, "code": f.code, "message": f.message, "request_id": self.rid}})

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")

    # ---- helpers

    def bearer(self):
        h = self.headers.get("Authorization", "")
        if not h.startswith("Bearer ") or not h[7:]:
            raise Fail(401, "authentication", "unauthenticated", "A credential is required.")
        return h[7:]

    def provisioner(self):
        token = self.bearer()
        if token == ARGS.provisioner_token:
            return
        if token in TOKENS:
            raise Fail(403, "authorization", "forbidden", "Instance credentials cannot manage instances.")
        raise Fail(401, "authentication", "unauthenticated", "The credential is not valid.")

    def instance(self):
        token = self.bearer()
        if token == ARGS.provisioner_token:
            raise Fail(403, "authorization", "forbidden", "A provisioner token cannot request approval.")
        inst = TOKENS.get(token)
        if inst is None or INSTANCES[inst]["deleted"]:
            raise Fail(401, "authentication", "unauthenticated", "The credential is not valid.")
        return inst

    def key(self):
        k = self.headers.get("Idempotency-Key", "")
        if not k:
            raise Fail(400, "invalid_request", "missing_idempotency_key", "An Idempotency-Key header is required.")
        return k

    def body(self, raw, allowed, required=()):
        try:
            doc = json.loads(raw or b"null")
        except ValueError:
            raise Fail(400, "invalid_request", "invalid_json", "The body is not JSON.")
        if not isinstance(doc, dict):
            raise Fail(400, "invalid_request", "invalid_json", "The body must be a JSON object.")
        for k in doc:
            if k not in allowed:
                raise Fail(400, "invalid_request", "unknown_field", "Unknown field %s." % k)
        for k in required:
            if k not in doc:
                raise Fail(400, "invalid_request", "missing_field", "Missing field %s." % k)
        return doc

    # ---- routes

    def route(self, method, path, query, raw):
        parts = path.strip("/").split("/")
        with LOCK:
            if parts[:2] == ["v1", "instances"] and len(parts) == 2 and method == "POST":
                return self.create_instance(raw)
            if parts[:2] == ["v1", "instances"] and len(parts) == 3:
                return self.one_instance(method, parts[2], raw)
            if parts[:2] == ["v1", "requests"] and len(parts) == 2 and method == "POST":
                return self.create_request(raw)
            if parts[:2] == ["v1", "requests"] and len(parts) == 3 and method in ("GET", "DELETE"):
                return self.one_request(method, parts[2], query)
            if parts[:2] == ["operator", "decide"] and len(parts) == 3 and method == "POST":
                return self.decide(parts[2], raw)
        raise Fail(404, "not_found", "not_found", "No such route.")

    def create_instance(self, raw):
        self.provisioner()
        key = self.key()
        doc = self.body(raw, ("instance_name", "delivery"))
        if "delivery" in doc:
            raise Fail(400, "invalid_request", "unsupported_delivery_type", "Only synchronous mode is supported.")
        name = doc.get("instance_name")
        if name is not None and (not isinstance(name, str) or not name):
            raise Fail(400, "invalid_request", "invalid_field", "instance_name must be a non-empty string.")
        if key in INSTANCE_KEYS:
            prev, inst_id, cred = INSTANCE_KEYS[key]
            if prev != doc:
                raise Fail(409, "conflict", "idempotency_conflict", "The key was used for other input.")
            if INSTANCES[inst_id]["deleted"]:
                raise Fail(409, "conflict", "instance_deleted", "The instance was deleted.")
            return 200, {"instance": self.instance_doc(inst_id), "credential": {"token": cred}}
        inst_id = str(uuid.uuid4())
        cred = "py_inst_" + secrets.token_urlsafe(24)
        INSTANCES[inst_id] = {"id": inst_id, "name": name or "instance-" + inst_id[:8], "deleted": False}
        TOKENS[cred] = inst_id
        INSTANCE_KEYS[key] = (doc, inst_id, cred)
        return 201, {"instance": self.instance_doc(inst_id), "credential": {"token": cred}}

    def instance_doc(self, inst_id):
        i = INSTANCES[inst_id]
        return {"id": i["id"], "name": i["name"]}

    def one_instance(self, method, inst_id, raw):
        self.provisioner()
        inst = INSTANCES.get(inst_id)
        if inst is None:
            raise Fail(404, "not_found", "not_found", "No such instance.")
        if method == "DELETE":
            if not inst["deleted"]:
                inst["deleted"] = True
                for req in REQUESTS.values():
                    expire(req)
                    if req["instance"] == inst_id and req["doc"]["status"] == "pending":
                        req["doc"]["status"] = "cancelled"
                        req["doc"]["decision"] = {"status": "cancelled", "decided_at": stamp(now())}
                LOCK.notify_all()
            return 204, None
        if inst["deleted"]:
            raise Fail(404, "not_found", "not_found", "No such instance.")
        if method == "GET":
            return 200, self.instance_doc(inst_id)
        if method == "PATCH":
            key = self.key()
            doc = self.body(raw, ("instance_name", "delivery"))
            if not doc:
                raise Fail(400, "invalid_request", "invalid_request", "Nothing to update.")
            if doc.get("delivery") is not None:
                raise Fail(400, "invalid_request", "unsupported_delivery_type", "Only synchronous mode is supported.")
            if (inst_id, key) in UPDATE_KEYS:
                prev, resp = UPDATE_KEYS[(inst_id, key)]
                if prev != doc:
                    raise Fail(409, "conflict", "idempotency_conflict", "The key was used for other input.")
                return 200, resp
            if "instance_name" in doc:
                if not isinstance(doc["instance_name"], str) or not doc["instance_name"]:
                    raise Fail(400, "invalid_request", "invalid_field", "instance_name must be a non-empty string.")
                inst["name"] = doc["instance_name"]
            resp = self.instance_doc(inst_id)
            UPDATE_KEYS[(inst_id, key)] = (doc, resp)
            return 200, resp
        raise Fail(404, "not_found", "not_found", "No such route.")

    def create_request(self, raw):
        inst = self.instance()
        key = self.key()
        doc = self.body(raw, ("tool", "arguments", "timeout", "agent_reasoning", "context"), ("tool", "arguments", "timeout"))
        if not isinstance(doc["tool"], str) or not doc["tool"]:
            raise Fail(400, "invalid_request", "invalid_field", "tool must be a non-empty string.")
        if not isinstance(doc["arguments"], dict):
            raise Fail(400, "invalid_request", "invalid_field", "arguments must be an object.")
        if not isinstance(doc["timeout"], str) or not DURATION.match(doc["timeout"]):
            raise Fail(400, "invalid_request", "invalid_field", "timeout must be a duration such as 30m.")
        if "context" in doc and not isinstance(doc["context"], dict):
            raise Fail(400, "invalid_request", "invalid_field", "context must be an object.")
        if "agent_reasoning" in doc and not isinstance(doc["agent_reasoning"], str):
            raise Fail(400, "invalid_request", "invalid_field", "agent_reasoning must be a string.")
        if (inst, key) in REQUEST_KEYS:
            prev, req_id = REQUEST_KEYS[(inst, key)]
            if prev != doc and not ARGS.seed_violations:
                raise Fail(409, "conflict", "idempotency_conflict", "The key was used for another request.")
            # Seeded violation: another body gets the original request.
            return 200, view(REQUESTS[req_id])
        created = now()
        req_id = str(uuid.uuid4())
        out = dict(doc)
        out.update({"id": req_id, "status": "pending", "created_at": stamp(created),
                    "deadline_at": stamp(created + timedelta(seconds=min(seconds(doc["timeout"]), MAX_TIMEOUT)))})
        REQUESTS[req_id] = {"instance": inst, "doc": out}
        REQUEST_KEYS[(inst, key)] = (doc, req_id)
        return 201, view(REQUESTS[req_id])

    def one_request(self, method, req_id, query):
        inst = self.instance()
        req = REQUESTS.get(req_id)
        if req is None or req["instance"] != inst:
            raise Fail(404, "not_found", "not_found", "No such request for this credential.")
        if method == "GET":
            wait = query.get("wait", [None])[0]
            if wait is not None:
                if not DURATION.match(wait):
                    raise Fail(400, "invalid_request", "invalid_field", "wait must be a duration such as 30s.")
                until = now() + timedelta(seconds=min(seconds(wait), 30))
                while True:
                    expire(req)
                    left = (until - now()).total_seconds()
                    if req["doc"]["status"] != "pending" or left <= 0:
                        break
                    deadline = (parse_stamp(req["doc"]["deadline_at"]) - now()).total_seconds()
                    LOCK.wait(max(0.01, min(left, deadline + 0.01)))
            return 200, view(req)
        expire(req)
        status = req["doc"]["status"]
        if status in ("approved", "denied", "expired"):
            raise Fail(409, "conflict", "already_terminal", "The request is already %s." % status)
        if status == "pending":
            req["doc"]["status"] = "cancelled"
            req["doc"]["decision"] = {"status": "cancelled", "decided_at": stamp(now())}
            LOCK.notify_all()
        return 200, view(req)

    def decide(self, req_id, raw):
        self.provisioner()
        doc = self.body(raw, ("decision",), ("decision",))
        req = REQUESTS.get(req_id)
        if req is None:
            raise Fail(404, "not_found", "not_found", "No such request.")
        expire(req)
        if req["doc"]["status"] != "pending":
            raise Fail(409, "conflict", "already_terminal", "The request is already %s." % req["doc"]["status"])
        decided = now()
        if doc["decision"] == "approve":
            req["doc"]["status"] = "approved"
            req["doc"]["decision"] = {"status": "approved", "decided_at": stamp(decided),
                                      "expires_at": stamp(decided + APPROVAL_VALIDITY)}
        elif doc["decision"] == "deny":
            req["doc"]["status"] = "denied"
            req["doc"]["decision"] = {"status": "denied", "decided_at": stamp(decided)}
        else:
            raise Fail(400, "invalid_request", "invalid_field", "decision is approve or deny.")
        LOCK.notify_all()
        return 200, view(req)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8480)
    p.add_argument("--provisioner-token", required=True)
    p.add_argument("--seed-violations", action="store_true")
    ARGS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    print("listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
