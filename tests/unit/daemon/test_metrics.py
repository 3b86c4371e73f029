"""The daemon's own metrics and the /metrics, /healthz endpoint."""

from __future__ import annotations

import asyncio
import gzip
import platform

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Gauge
from prometheus_client.parser import text_string_to_metric_families

from agent import __version__
from agent.daemon import metrics
from agent.daemon.metrics_http import HealthReport, MetricsServer, handle_request
from agent.topology import synthetic


def test_build_info():
    metrics.publish_build_info()
    labels = {"version": __version__, "python_version": platform.python_version()}
    import os

    labels["kernel"] = os.uname().release
    assert REGISTRY.get_sample_value("hwagent_build_info", labels) == 1.0


def test_topology_gauges_follow_the_topology():
    topo = synthetic(sockets=2, numa_per_socket=2, cores_per_numa=3, threads_per_core=2, memory_only_nodes=1)
    metrics.publish_topology(topo)
    v = REGISTRY.get_sample_value
    assert v("hwagent_topology_cpus", {"state": "online"}) == 24
    assert v("hwagent_topology_cpus", {"state": "offline"}) == 0
    assert v("hwagent_topology_cores") == 12
    assert v("hwagent_topology_packages") == 2
    assert v("hwagent_topology_numa_nodes") == 5
    assert v("hwagent_topology_numa_node_memory_bytes", {"numa_node": "4"}) == 8 << 30
    # a smaller machine afterwards (tests, re-read) leaves no stale node series
    metrics.publish_topology(synthetic(sockets=1, numa_per_socket=1, cores_per_numa=1, threads_per_core=1))
    assert v("hwagent_topology_numa_node_memory_bytes", {"numa_node": "4"}) is None
    assert v("hwagent_topology_numa_node_memory_bytes", {"numa_node": "0"}) == 8 << 30
    assert v("hwagent_topology_cpus", {"state": "online"}) == 1


def test_component_health_is_asked_at_scrape_time():
    state = {"cpu": True}
    registry = CollectorRegistry()
    registry.register(metrics.ComponentHealthCollector(lambda: list(state.items())))
    assert registry.get_sample_value("hwagent_component_healthy", {"component": "cpu"}) == 1.0
    state["cpu"] = False
    state["devices"] = True
    assert registry.get_sample_value("hwagent_component_healthy", {"component": "cpu"}) == 0.0
    assert registry.get_sample_value("hwagent_component_healthy", {"component": "devices"}) == 1.0


@pytest.fixture
def registry():
    r = CollectorRegistry()
    g = Gauge("demo_things", "Things.", ["kind"], registry=r)
    g.labels(kind="a").set(3)
    Gauge("demo_other", "Other.", registry=r).set(1)
    return r


OK = lambda: HealthReport(True)  # noqa: E731


def test_metrics_text_format(registry):
    resp = handle_request("GET", "/metrics", {}, OK, registry)
    assert resp.status == 200
    assert resp.content_type.startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(resp.body.decode())}
    assert families["demo_things"].samples[0].value == 3


def test_metrics_openmetrics_negotiation(registry):
    resp = handle_request("GET", "/metrics", {"accept": "application/openmetrics-text; version=1.0.0"}, OK, registry)
    assert resp.content_type.startswith("application/openmetrics-text")
    assert resp.body.endswith(b"# EOF\n")


def test_metrics_gzip_and_name_filter(registry):
    resp = handle_request("GET", "/metrics?name[]=demo_other", {"accept-encoding": "gzip, deflate"}, OK, registry)
    assert ("Content-Encoding", "gzip") in resp.headers
    body = gzip.decompress(resp.body).decode()
    assert "demo_other 1.0" in body and "demo_things" not in body


def test_healthz_and_errors(registry):
    assert handle_request("GET", "/healthz", {}, OK, registry).body == b"ok\n"
    bad = handle_request("GET", "/healthz", {}, lambda: HealthReport(False, "unhealthy: cpu"), registry)
    assert (bad.status, bad.body) == (503, b"unhealthy: cpu\n")
    assert handle_request("GET", "/nope", {}, OK, registry).status == 404
    post = handle_request("POST", "/metrics", {}, OK, registry)
    assert post.status == 405 and ("Allow", "GET, HEAD") in post.headers


async def _raw(address, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(payload)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


def test_server_on_an_ephemeral_port(registry):
    async def main():
        server = MetricsServer("127.0.0.1", 0, OK, registry)
        await server.start()
        try:
            host, port = server.address
            assert host == "127.0.0.1" and port > 0
            assert server.url == f"http://127.0.0.1:{port}"
            get = await _raw(server.address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await _raw(server.address, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            bad = await _raw(server.address, b"NONSENSE\r\n\r\n")
            huge = await _raw(server.address, b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
            # a client that connects and says nothing must not block the others
            idle_r, idle_w = await asyncio.open_connection(*server.address)
            again = await _raw(server.address, b"GET /healthz HTTP/1.0\r\n\r\n")
            idle_w.close()
        finally:
            await server.stop()
        return get, head, bad, huge, again

    get, head, bad, huge, again = asyncio.run(main())
    assert get.startswith(b"HTTP/1.1 200 OK\r\n") and b"demo_things" in get
    head_line, _, head_body = head.partition(b"\r\n\r\n")
    assert b"200 OK" in head_line and head_body == b""
    assert b"Content-Length: " in head_line  # the length a GET would have had
    assert bad.startswith(b"HTTP/1.1 400 ")
    assert huge.startswith(b"HTTP/1.1 431 ")
    assert again.startswith(b"HTTP/1.1 200 OK") and again.endswith(b"ok\n")


def test_server_stop_drops_idle_clients(registry):
    async def main():
        server = MetricsServer("127.0.0.1", 0, OK, registry)
        await server.start()
        reader, writer = await asyncio.open_connection(*server.address)
        await asyncio.sleep(0.05)  # let the server accept it
        await asyncio.wait_for(server.stop(), 5)
        data = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return data

    assert asyncio.run(main()) == b""  # closed without a response, and stop() did not hang


def test_port_in_use_raises(registry):
    async def main():
        a = MetricsServer("127.0.0.1", 0, OK, registry)
        await a.start()
        try:
            b = MetricsServer("127.0.0.1", a.address[1], OK, registry)
            with pytest.raises(OSError):
                await b.start()
        finally:
            await a.stop()

    asyncio.run(main())


def test_connections_are_bounded_idle_ones_displaced_busy_ones_refused(registry):
    """Idle connections beyond the bound cost no descriptors: the oldest idle one gives
    way to a newcomer; when every slot is a request being served, the newcomer gets 503."""

    async def main():
        server = MetricsServer("127.0.0.1", 0, OK, registry)
        server.max_connections = 4
        await server.start()
        try:
            idle = [await asyncio.open_connection(*server.address) for _ in range(4)]
            await asyncio.sleep(0.05)
            answer = await _raw(server.address, b"GET /healthz HTTP/1.0\r\n\r\n")
            closed = await asyncio.wait_for(idle[0][0].read(), 10)  # the oldest idle one, closed for room
            still_open = [r.at_eof() for r, _ in idle[1:]]
            displaced = server.displaced
            for _, w in idle:
                w.close()
            await asyncio.sleep(0.05)
            # every slot held by a request being served (stand-ins: tasks that are not idle)
            busy = [asyncio.create_task(asyncio.sleep(60)) for _ in range(4)]
            server._clients.update(busy)
            refused = await _raw(server.address, b"GET /healthz HTTP/1.0\r\n\r\n")
            for t in busy:
                server._clients.discard(t)
                t.cancel()
            return answer, closed, still_open, displaced, refused, server.refused
        finally:
            await server.stop()

    answer, closed, still_open, displaced, refused, refused_n = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200 OK") and b"ok\n" in answer
    assert closed == b"" and displaced == 1 and still_open == [False, False, False]
    assert refused.startswith(b"HTTP/1.1 503 ") and refused.endswith(b"too many connections\n")
    assert refused_n == 1
