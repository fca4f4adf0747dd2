"""A test double of an S3 server without conditional deletes: a proxy on 127.0.0.1.

It forwards every request to a real local S3 server, except a DELETE that
carries ``If-Match``:

* ``refuse`` answers it 501 NotImplemented itself, as a server that does not
  implement the header may;
* ``ignore`` strips the header and forwards an unconditional DELETE, as a
  server that silently ignores unknown conditions does (Cloudflare R2
  documents no conditional DELETE);
* with no mode, it forwards them; ``lose_then_conflict`` then forwards the
  first one but loses its response (the connection closes: botocore
  resends), answers the resend 409 ConditionalRequestConflict, and forwards
  the rest: a DELETE that was applied, then looked like it never was.

It is a policy of the relay core (``tests.support.relay``): one request per
connection, relayed byte for byte, on 127.0.0.1 to its one upstream port.
"""

from __future__ import annotations

from enum import StrEnum
from urllib.parse import urlsplit

from pail.local import LOOPBACK
from tests.support.relay import Exchange, Relay, s3_error

_NOT_IMPLEMENTED = s3_error(
    501,
    "Not Implemented",
    "NotImplemented",
    "A header you provided implies functionality that is not implemented",
    "<Header>If-Match</Header>",
)
_CONFLICT = s3_error(
    409,
    "Conflict",
    "ConditionalRequestConflict",
    "A conflicting conditional operation is in progress.",
)


class DeleteMode(StrEnum):
    REFUSE = "refuse"
    IGNORE = "ignore"


class RefusingProxy(Relay):
    """``with RefusingProxy(upstream_url, mode) as proxy:`` then use ``proxy.endpoint_url``."""

    name = "refusing-proxy"

    def __init__(
        self,
        upstream_url: str,
        mode: DeleteMode | None = DeleteMode.REFUSE,
        *,
        lose_then_conflict: bool = False,
    ) -> None:
        parts = urlsplit(upstream_url)
        assert parts.hostname == LOOPBACK and parts.port is not None
        super().__init__(parts.port)
        self.mode = mode
        self.lose_then_conflict = lose_then_conflict
        self.conditional_deletes = 0

    def handle(self, exchange: Exchange) -> None:
        request = exchange.request
        if request.method != "DELETE" or request.header("If-Match") is None:
            exchange.reply(exchange.forward())
            return
        with self._lock:
            self.conditional_deletes += 1
            seen = self.conditional_deletes
        if self.mode is DeleteMode.REFUSE:
            exchange.reply(_NOT_IMPLEMENTED)
            return
        if self.lose_then_conflict and seen == 2:
            exchange.reply(_CONFLICT)
            return
        if self.mode is DeleteMode.IGNORE:
            request = request.without_header("If-Match")
        response = exchange.forward(request)
        if self.lose_then_conflict and seen == 1:
            return  # applied upstream; the client never hears of it
        exchange.reply(response)
