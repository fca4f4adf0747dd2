"""``python -m pail_bench.status_page_load``: a bounded burst against the status page server.

Starts ``pail.status_page.StatusPageServer`` on 127.0.0.1 (the server ``pail
demo --open-status`` runs), then ``--clients`` threads each fetch the page
``--rounds`` times, all released together, and a quarter of the first round
hangs up mid-answer. It prints the latency percentiles, the failures, the
kernel's listen-queue overflows during the run (``TcpExtListenOverflows``,
Linux) and whether the server wrote anything to stderr. Loopback only; it
stops by itself (every request has a timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import json
import socket
import statistics
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pail.status_page import LOOPBACK, StatusPageServer

TIMEOUT = 30.0


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped because a listen queue was full (Linux)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table.get("ListenOverflows", 0))
    return None


def fetch(port: int) -> float:
    started = time.perf_counter()
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=TIMEOUT)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"status {response.status}")
    finally:
        connection.close()
    return time.perf_counter() - started


def hang_up(port: int) -> None:
    with socket.create_connection((LOOPBACK, port), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: page\r\n\r\n")
        with contextlib.suppress(OSError):
            sock.recv(1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def run(clients: int, rounds: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    captured = io.StringIO()
    overflows_before = listen_overflows()
    real_stderr, sys.stderr = sys.stderr, captured  # the server's tracebacks, if any
    try:
        with StatusPageServer() as server:
            port = int(server.url.rsplit(":", 1)[1].strip("/"))
            barrier = threading.Barrier(clients)

            def client(index: int) -> None:
                for round_number in range(rounds):
                    with contextlib.suppress(threading.BrokenBarrierError):
                        barrier.wait(TIMEOUT)
                    try:
                        if round_number == 0 and index % 4 == 0:
                            hang_up(port)
                            continue
                        took = fetch(port)
                        with lock:
                            latencies.append(took)
                    except Exception as exc:  # noqa: BLE001 - counted in the report
                        with lock:
                            failures.append(repr(exc))

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT * rounds + 10)
            elapsed = time.perf_counter() - started
    finally:
        sys.stderr = real_stderr
    overflows_after = listen_overflows()
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    return {
        "clients": clients,
        "rounds": rounds,
        "requests_answered": len(latencies),
        "failures": len(failures),
        "first_failures": failures[:3],
        "p50_ms": round(pct(0.50) * 1000, 1),
        "p95_ms": round(pct(0.95) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1) if ordered else None,
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else None,
        "elapsed_s": round(elapsed, 2),
        "listen_overflows": (
            overflows_after - overflows_before
            if overflows_before is not None and overflows_after is not None
            else None
        ),
        "stderr_tracebacks": captured.getvalue().count("Traceback"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not 1 <= args.clients <= 1000 or not 1 <= args.rounds <= 50:
        parser.error("keep it bounded: 1-1000 clients, 1-50 rounds")
    print(json.dumps(run(args.clients, args.rounds), indent=2))


if __name__ == "__main__":
    main()
