"""A proxy on 127.0.0.1 that stands for AWS: S3 through each role's IAM policy, and Lambda's Invoke.

Each function runs with an access key naming its role, so the proxy knows
who asks from the SigV4 ``Credential`` scope, which also names the service.

* **S3**: each request becomes the IAM actions S3 would check, with their
  resource ARN and condition keys (``s3:prefix`` for a listing). A request
  every action of which the role's policy allows is forwarded to the local S3
  server; any other gets S3's 403 ``AccessDenied``. As on S3, a read of a
  missing key answers 403 instead of 404 unless the role may also list it.
  A conditional delete (``If-Match``) needs ``s3:GetObject`` too.
* **Lambda**: ``Invoke`` needs ``lambda:InvokeFunction`` on the function's
  ARN; an allowed one is handed to ``on_invoke`` (the reaper's self-heal).
* **ECS**: a double of ``DescribeServices`` and ``UpdateService`` (JSON 1.1,
  as boto3 speaks it) over the services a test adds (``add_ecs_service``),
  each call needing ``ecs:<Operation>`` on the service's ARN. Every allowed
  ``UpdateService`` is kept in ``ecs_updates``.

Every request is recorded (role, service, action, resource, allowed), which
is what the least-privilege table is made of.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .cfn import ACCOUNT, PARTITION, REGION
from .iam import Policy

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]+/[^/]+/([^/]+)/aws4_request")
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}
_INVOKE = re.compile(r"^/2015-03-31/functions/([^/]+)/invocations$")
_ECS_TARGET = "AmazonEC2ContainerServiceV20141113."
_ECS_JSON = "application/x-amz-json-1.1"

Invoker = Callable[[str, bytes, str], None]
"""``on_invoke(function_name, payload, invocation_type)``."""


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that does not print a client hanging up (a function stopped)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class Request:
    """One check of one action: who, what, on which resource, and IAM's answer."""

    role: str
    service: str
    action: str
    resource: str
    allowed: bool
    status: int = 0
    prefix: str | None = None
    """For a listing: the ``s3:prefix`` it asked for."""


@dataclass(frozen=True)
class Call:
    """One HTTP request to S3 as the server saw it (a request may make several IAM checks)."""

    role: str
    method: str
    path: str
    """The key (``bucket/key``), or ``bucket?prefix`` for a listing."""
    status: int
    seconds: float = 0.0
    """How long the local server took to answer (0 for a denied request)."""
    at: float = field(default_factory=time.monotonic, compare=False)
    """``time.monotonic()`` when the answer came back."""

    @property
    def operation(self) -> str:
        """S3's name for the request: GetObject, HeadObject, PutObject, DeleteObject, ListObjectsV2."""
        if "?" in self.path:
            return "ListObjectsV2"
        return {
            "GET": "GetObject",
            "HEAD": "HeadObject",
            "PUT": "PutObject",
            "DELETE": "DeleteObject",
        }.get(self.method, self.method)


@dataclass(frozen=True)
class _Check:
    action: str
    resource: str
    context: Mapping[str, str]

    @property
    def prefix(self) -> str | None:
        return self.context.get("s3:prefix")


@dataclass
class EcsService:
    """A service of the ECS double: its cluster, its name and its desired count."""

    cluster: str
    name: str
    desired: int = 0

    @property
    def arn(self) -> str:
        return service_arn(self.cluster, self.name)


def service_arn(cluster: str, name: str) -> str:
    """An ECS service's ARN (the long form, with the cluster's name), from names or ARNs."""
    if name.startswith("arn:"):
        return name
    cluster = cluster.rpartition("cluster/")[2] if cluster.startswith("arn:") else cluster
    return f"arn:{PARTITION}:ecs:{REGION}:{ACCOUNT}:service/{cluster}/{name}"


def _bucket_arn(bucket: str) -> str:
    return f"arn:{PARTITION}:s3:::{bucket}"


def s3_checks(
    method: str, path: str, query: Mapping[str, list[str]], headers: Any, body: bytes
) -> list[_Check]:
    """The IAM checks S3 makes for one request (path-style addressing)."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if not bucket:
        return [_Check("s3:ListAllMyBuckets", "*", {})]
    if not key:
        if method in {"GET", "HEAD"} and (not query or "list-type" in query or method == "HEAD"):
            prefix = query.get("prefix", [""])[0]
            return [_Check("s3:ListBucket", _bucket_arn(bucket), {"s3:prefix": prefix})]
        if method == "GET" and "location" in query:
            return [_Check("s3:GetBucketLocation", _bucket_arn(bucket), {})]
        if method == "POST" and "delete" in query:
            keys = [
                element.text or ""
                for element in ET.fromstring(body).iter()
                if element.tag.endswith("Key")
            ]
            return [_Check("s3:DeleteObject", f"{_bucket_arn(bucket)}/{k}", {}) for k in keys]
        return [_Check(f"s3:Unmodelled{method.title()}Bucket", _bucket_arn(bucket), {})]
    arn = f"{_bucket_arn(bucket)}/{key}"
    if method in {"GET", "HEAD"}:
        return [_Check("s3:GetObject", arn, {})]
    if method in {"PUT", "POST"}:
        checks = [_Check("s3:PutObject", arn, {})]
        source = headers.get("x-amz-copy-source")
        if source:
            checks.append(
                _Check("s3:GetObject", f"arn:{PARTITION}:s3:::{unquote(source).lstrip('/')}", {})
            )
        return checks
    if method == "DELETE":
        checks = [_Check("s3:DeleteObject", arn, {})]
        if headers.get("If-Match"):
            checks.append(_Check("s3:GetObject", arn, {}))
        return checks
    return [_Check(f"s3:Unmodelled{method.title()}Object", arn, {})]


class AwsProxy:
    """The proxy server; ``endpoint_url`` is what the functions' SDKs are pointed at."""

    def __init__(
        self,
        s3_endpoint: str,
        policies: Mapping[str, Policy],
        *,
        on_invoke: Invoker | None = None,
    ) -> None:
        self._backend = urlsplit(s3_endpoint)
        self.policies = dict(policies)
        self.on_invoke = on_invoke
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self.calls: list[Call] = []
        self.ecs_services: dict[str, EcsService] = {}
        self.ecs_updates: list[tuple[str, int]] = []
        self._server = QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> AwsProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def add_ecs_service(self, cluster: str, name: str, *, desired: int = 0) -> EcsService:
        """A service the ECS double knows from now on."""
        service = EcsService(cluster, name, desired)
        with self._lock:
            self.ecs_services[service.arn] = service
        return service

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def call(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def s3_calls(self, role: str | None = None) -> list[Call]:
        """Every S3 request so far (of ``role``), one per HTTP request."""
        with self._lock:
            return [c for c in self.calls if role is None or c.role == role]

    def denied(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if not r.allowed]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.calls.clear()

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_HEAD(self) -> None:
                self._handle()

            def do_PUT(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:
                self._handle()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _handle(self) -> None:
                body = self._body()
                authorization = self.headers.get("Authorization", "")
                split = urlsplit(self.path)
                query = parse_qs(split.query, keep_blank_values=True)
                found = _CREDENTIAL.search(authorization) or _CREDENTIAL.search(
                    "Credential=" + query.get("X-Amz-Credential", [""])[0]
                )
                if found is None:
                    self._reply(403, b"unsigned request", "text/plain")
                    return
                role, service = found.group(1), found.group(2)
                policy = proxy.policies.get(role)
                if service == "lambda":
                    self._lambda(role, policy, split.path, body)
                    return
                if service == "ecs":
                    self._ecs(role, policy, body)
                    return
                if service != "s3":
                    proxy.record(Request(role, service, f"{service}:?", self.path, False, 403))
                    self._reply(403, b"service not modelled", "text/plain")
                    return
                checks = s3_checks(self.command, split.path, query, self.headers, body)
                bucket_path = unquote(split.path).lstrip("/")
                if "list-type" in query:
                    bucket_path += "?" + query.get("prefix", [""])[0]
                allowed = [
                    policy is not None and policy.allows(c.action, c.resource, c.context)
                    for c in checks
                ]
                if not all(allowed):
                    for check, ok in zip(checks, allowed, strict=True):
                        proxy.record(
                            Request(role, "s3", check.action, check.resource, ok, 403, check.prefix)
                        )
                    proxy.call(Call(role, self.command, bucket_path, 403))
                    self._s3_denied(checks[allowed.index(False)])
                    return
                started = time.monotonic()
                status, headers, payload = self._forward(body)
                took = time.monotonic() - started
                proxy.call(Call(role, self.command, bucket_path, status, took))
                if (
                    status == 404
                    and self.command in {"GET", "HEAD"}
                    and checks[0].action == "s3:GetObject"
                ):
                    # S3 hides whether a key exists from whoever may not list it.
                    bucket_arn, _, key = checks[0].resource.partition("/")
                    listing = _Check("s3:ListBucket", bucket_arn, {"s3:prefix": key})
                    assert policy is not None
                    if not policy.allows(listing.action, listing.resource, listing.context):
                        proxy.record(
                            Request(role, "s3", checks[0].action, checks[0].resource, True, 403)
                        )
                        proxy.record(
                            Request(role, "s3", listing.action, bucket_arn, False, 403, key)
                        )
                        self._s3_denied(listing)
                        return
                    # The listing right was used: without it this read would have failed.
                    proxy.record(Request(role, "s3", listing.action, bucket_arn, True, 404, key))
                for check in checks:
                    proxy.record(
                        Request(
                            role, "s3", check.action, check.resource, True, status, check.prefix
                        )
                    )
                self._send(status, headers, payload)

            def _lambda(self, role: str, policy: Policy | None, path: str, body: bytes) -> None:
                match = _INVOKE.match(path)
                if match is None:
                    proxy.record(Request(role, "lambda", "lambda:?", path, False, 404))
                    self._reply(404, b'{"Message": "not modelled"}', "application/json")
                    return
                name = unquote(match.group(1)).rsplit(":function:", 1)[-1].split(":")[0]
                arn = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}"
                ok = policy is not None and policy.allows("lambda:InvokeFunction", arn)
                proxy.record(
                    Request(role, "lambda", "lambda:InvokeFunction", arn, ok, 202 if ok else 403)
                )
                if not ok:
                    message = json.dumps({"Message": f"{role} is not authorized to invoke {arn}"})
                    self._reply(
                        403,
                        message.encode(),
                        "application/json",
                        {"x-amzn-ErrorType": "AccessDeniedException"},
                    )
                    return
                kind = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
                if proxy.on_invoke is not None:
                    proxy.on_invoke(name, body, kind)
                self._reply(202, b"", "application/json")

            def _ecs(self, role: str, policy: Policy | None, body: bytes) -> None:
                operation = self.headers.get("X-Amz-Target", "").removeprefix(_ECS_TARGET)
                request = json.loads(body or b"{}")
                cluster = str(request.get("cluster", "default"))
                if operation == "DescribeServices":
                    arns = [service_arn(cluster, str(name)) for name in request.get("services", [])]
                elif operation == "UpdateService":
                    arns = [service_arn(cluster, str(request.get("service", "")))]
                else:
                    proxy.record(Request(role, "ecs", f"ecs:{operation}", cluster, False, 400))
                    self._ecs_error("UnknownOperationException", f"{operation} is not modelled")
                    return
                action = f"ecs:{operation}"
                allowed = [policy is not None and policy.allows(action, arn) for arn in arns]
                for arn, ok in zip(arns, allowed, strict=True):
                    proxy.record(Request(role, "ecs", action, arn, ok, 200 if ok else 400))
                if not all(allowed):
                    denied = arns[allowed.index(False)]
                    self._ecs_error("AccessDeniedException", f"{role} may not {action} on {denied}")
                    return
                with proxy._lock:
                    found = [proxy.ecs_services.get(arn) for arn in arns]
                    if operation == "UpdateService" and found[0] is not None:
                        found[0].desired = int(request["desiredCount"])
                        proxy.ecs_updates.append((arns[0], found[0].desired))
                    described = [_described(s) for s in found if s is not None]
                missing = [arn for arn, s in zip(arns, found, strict=True) if s is None]
                if operation == "UpdateService":
                    if missing:
                        self._ecs_error("ServiceNotFoundException", "Service not found.")
                        return
                    reply: dict[str, Any] = {"service": described[0]}
                else:
                    reply = {
                        "services": described,
                        "failures": [{"arn": arn, "reason": "MISSING"} for arn in missing],
                    }
                self._reply(200, json.dumps(reply).encode(), _ECS_JSON)

            def _ecs_error(self, kind: str, message: str) -> None:
                payload = json.dumps({"__type": kind, "message": message}).encode()
                self._reply(400, payload, _ECS_JSON)

            def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
                backend = proxy._backend
                connection = http.client.HTTPConnection(
                    backend.hostname or "127.0.0.1", backend.port, timeout=30
                )
                try:
                    headers = {
                        k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP
                    }
                    headers["Content-Length"] = str(len(body))
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                    kept = [
                        (k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP
                    ]
                    if self.command == "HEAD":
                        length = response.getheader("Content-Length", "0")
                        kept.append(("Content-Length", length))
                    return response.status, kept, payload
                finally:
                    connection.close()

            def _s3_denied(self, check: _Check) -> None:
                message = f"{check.action} on {check.resource} is not allowed"
                xml = (
                    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                    f"<Message>{message}</Message></Error>"
                ).encode()
                self._reply(403, b"" if self.command == "HEAD" else xml, "application/xml")

            def _reply(
                self,
                status: int,
                payload: bytes,
                content_type: str,
                extra: Mapping[str, str] | None = None,
            ) -> None:
                headers = [("Content-Type", content_type), *(extra or {}).items()]
                if self.command != "HEAD":
                    headers.append(("Content-Length", str(len(payload))))
                else:
                    headers.append(("Content-Length", "0"))
                self._send(status, headers, payload)

            def _send(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
                # send_response_only: the backend's Date (the server clock pail reads) goes through alone.
                self.send_response_only(status)
                has_length = any(k.lower() == "content-length" for k, _ in headers)
                for key, value in headers:
                    self.send_header(key, value)
                if not has_length:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD" and payload:
                    self.wfile.write(payload)

        return Handler


def _described(service: EcsService) -> dict[str, Any]:
    """A service as ``DescribeServices`` returns it (the fields a caller reads)."""
    return {
        "serviceArn": service.arn,
        "serviceName": service.name,
        "clusterArn": f"arn:{PARTITION}:ecs:{REGION}:{ACCOUNT}:cluster/{service.cluster}",
        "status": "ACTIVE",
        "desiredCount": service.desired,
        "runningCount": 0,
        "pendingCount": 0,
        "launchType": "FARGATE",
    }
