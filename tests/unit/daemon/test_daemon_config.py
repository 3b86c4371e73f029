from __future__ import annotations

import pytest

from agent.daemonconfig import DaemonConfig, parse_host_port


@pytest.mark.parametrize(
    "address, expected",
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("localhost:0", ("localhost", 0)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("[::1]:9464", ("::1", 9464)),
        ("[fe80::1%eth0]:80", ("fe80::1%eth0", 80)),
    ],
)
def test_parse_host_port(address, expected):
    assert parse_host_port(address) == expected


@pytest.mark.parametrize(
    "address, reason",
    [
        ("9464", "must be HOST:PORT"),
        (":9464", "must be HOST:PORT"),  # every interface by accident: refused
        ("host:", "port must be 0-65535"),
        ("host:-1", "port must be 0-65535"),
        ("host:70000", "port must be 0-65535"),
        ("host:http", "port must be 0-65535"),
        ("::1:9464", "IPv6 address in brackets"),
        ("[::1:9464", "unbalanced brackets"),
        ("[nothost]:1", "not an IPv6 address"),
    ],
)
def test_parse_host_port_rejects(address, reason):
    with pytest.raises(ValueError, match=reason):
        parse_host_port(address)


def test_defaults_are_valid():
    DaemonConfig().validate()
