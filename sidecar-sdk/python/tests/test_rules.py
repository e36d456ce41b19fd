"""The Python SDK against the protocol's rules in ``sidecar-sdk/conformance/rules.json``.

The Rust, Go and TypeScript SDKs check the same file (see
``sidecar-sdk/conformance/README.md``); a test of ``kplug-proto`` keeps it equal
to the Rust code, the rules' source. One test per rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kplug
from kplug import protocol
from kplug.server import PluginServer

RULES_FILE = Path(__file__).resolve().parents[2] / "conformance" / "rules.json"
RULES: dict[str, Any] = json.loads(RULES_FILE.read_text(encoding="utf-8"))["rules"]

Rule = dict[str, Any]


class Echo(kplug.Plugin):
    def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok()


def info(name: str = "rules") -> kplug.PluginInfo:
    return kplug.PluginInfo(
        name=name,
        version="1.0.0",
        offers=[kplug.Offer(kplug.GroupKind("example.com", "Greeting"), "Echo")],
    )


EXTENSION = {
    "apiVersion": "example.com/v1",
    "kind": "GreetingExtension",
    "metadata": {"name": "e", "namespace": "default"},
}


def plugin_name(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    assert rule["max_length"] == protocol.MAX_NAME_LENGTH
    for name in rule["valid"]:
        protocol.validate_name(name)
        PluginServer(Echo(), info(name), socket_dir="/tmp/unused")  # validates, binds nothing
    for case in rule["invalid"]:
        with pytest.raises(kplug.InvalidNameError, match="it must be a DNS label"):
            PluginServer(Echo(), info(case["name"]), socket_dir="/tmp/unused")


def reserved_status_keys(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(rule["reserved"]) == protocol.RESERVED_STATUS_KEYS
    assert kplug.RESERVED_STATUS_KEYS is protocol.RESERVED_STATUS_KEYS
    request = kplug.Request.from_json("Echo", {"metadata": {"name": "x"}}, [EXTENSION])
    for key in rule["reserved"]:
        reserved = f'"{key}" is reserved for the operator'
        with pytest.raises(ValueError, match=reserved):
            kplug.Response.ok(status={key: 1})
        with pytest.raises(ValueError, match=reserved):
            kplug.Response.ok().extension_status(request.extensions[0], {key: 1})
    for key in rule["allowed"]:
        response = kplug.Response.ok(status={key: 1}).extension_status(
            request.extensions[0], {key: 1}
        )
        assert response.status == {key: 1}


def reserved_condition_types(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(rule["reserved"]) == protocol.RESERVED_CONDITION_TYPES
    assert kplug.RESERVED_CONDITION_TYPES is protocol.RESERVED_CONDITION_TYPES
    for type_ in rule["reserved"]:
        with pytest.raises(ValueError, match=f'condition type "{type_}" is reserved'):
            kplug.Response.ok().condition(type_, True, "Done")
    for type_ in rule["allowed"]:
        assert kplug.Response.ok().condition(type_, True, "Done").conditions[0].type == type_


def message_limit(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    # The server passes this to grpc as its receive and send limits.
    assert rule["max_plugin_message_bytes"] == protocol.MAX_MESSAGE_BYTES


def environment(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    dir_var = rule["socket_dir"]["variable"]
    interval = rule["heartbeat_interval"]
    assert (
        dir_var,
        rule["socket_dir"]["default"],
    ) == (protocol.SOCKET_DIR_ENV, protocol.DEFAULT_SOCKET_DIR)
    assert interval["variable"] == protocol.HEARTBEAT_INTERVAL_ENV
    assert interval["default_seconds"] == protocol.DEFAULT_HEARTBEAT_INTERVAL_SECONDS

    def server() -> PluginServer:
        return PluginServer(Echo(), info())

    monkeypatch.delenv(dir_var, raising=False)
    monkeypatch.delenv(interval["variable"], raising=False)
    assert server().socket_dir == Path(rule["socket_dir"]["default"])
    assert server().heartbeat.interval == interval["default_seconds"]
    monkeypatch.setenv(dir_var, "")
    assert server().socket_dir == Path(rule["socket_dir"]["default"])
    monkeypatch.setenv(dir_var, "/tmp/k")
    assert server().socket_path == Path("/tmp/k/plugins/rules/plugin.sock")

    for case in interval["valid"]:
        monkeypatch.setenv(interval["variable"], case["text"])
        assert server().heartbeat.interval == pytest.approx(case["seconds"]), case
    for text in interval["invalid"]:
        monkeypatch.setenv(interval["variable"], text)
        with pytest.raises(kplug.StartupError, match=f"invalid {interval['variable']}="):
            server()


def heartbeat_backoff(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    assert rule["initial_seconds"] == protocol.BACKOFF_INITIAL_SECONDS
    assert rule["factor"] == protocol.BACKOFF_FACTOR
    assert rule["jitter"] == protocol.BACKOFF_JITTER
    assert rule["default_cap_seconds"] == protocol.DEFAULT_HEARTBEAT_INTERVAL_SECONDS
    assert rule["call_deadline_seconds"] == protocol.HEARTBEAT_TIMEOUT_SECONDS
    for sample in rule["samples"]:
        delay = protocol.backoff_delay(sample["attempt"], sample["cap_seconds"], sample["unit"])
        assert delay == pytest.approx(sample["delay_seconds"], abs=rule["tolerance_seconds"]), (
            sample
        )


def socket_dir_rule(rule: Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [s["origin"] for s in rule["samples"]] == ["default", "environment", "program"]
    for sample in rule["samples"]:
        directory, origin = sample["socket_dir"], sample["origin"]
        assert protocol.registry_waiting_message(directory, origin) == sample["waiting"]
        assert protocol.socket_dir_missing_message(directory, origin) == sample["missing"]
    # Where the server says its socket dir came from.
    monkeypatch.delenv(protocol.SOCKET_DIR_ENV, raising=False)
    assert PluginServer(Echo(), info()).socket_dir_origin == "default"
    monkeypatch.setenv(protocol.SOCKET_DIR_ENV, "")
    assert PluginServer(Echo(), info()).socket_dir_origin == "default"
    monkeypatch.setenv(protocol.SOCKET_DIR_ENV, "/tmp/k")
    assert PluginServer(Echo(), info()).socket_dir_origin == "environment"
    assert PluginServer(Echo(), info(), socket_dir="/tmp/j").socket_dir_origin == "program"


CHECKS: dict[str, Callable[[Rule, pytest.MonkeyPatch], None]] = {
    "plugin_name": plugin_name,
    "reserved_status_keys": reserved_status_keys,
    "reserved_condition_types": reserved_condition_types,
    "message_limit": message_limit,
    "environment": environment,
    "heartbeat_backoff": heartbeat_backoff,
    "socket_dir": socket_dir_rule,
}


def test_every_rule_is_checked() -> None:
    assert sorted(RULES) == sorted(CHECKS), "rules.json and this test list different rules"


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    CHECKS[name](RULES[name], monkeypatch)
