"""The one reader of the environment (a frozen snapshot) and its one writer (export)."""

from __future__ import annotations

import pytest

from slurm_resolver.environment import Snapshot, export, snapshot
from slurm_resolver.errors import ConfigurationError


def test_snapshot_keeps_only_launcher_variables_and_is_frozen() -> None:
    env = {"SLURM_PROCID": "3", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "0", "OMPI_COMM_WORLD_RANK": "1"}
    snap = snapshot(env)
    assert dict(snap) == {"SLURM_PROCID": "3", "CUDA_VISIBLE_DEVICES": "0", "OMPI_COMM_WORLD_RANK": "1"}
    env["SLURM_PROCID"] = "4"
    assert snap["SLURM_PROCID"] == "3"  # a copy, not a view
    with pytest.raises(TypeError):
        snap.data["SLURM_PROCID"] = "5"  # type: ignore[index]
    assert snapshot(snap) is snap and hash(snap) == hash(Snapshot(dict(snap)))


def test_export_refuses_to_overwrite_a_different_value() -> None:
    target = {"MASTER_ADDR": "node1", "RANK": "0"}
    assert export({"MASTER_ADDR": "node1", "WORLD_SIZE": "4"}, environ=target) == {"WORLD_SIZE": "4"}
    with pytest.raises(ConfigurationError, match=r"RANK='0' \(wanted '1'\)"):
        export({"RANK": "1"}, environ=target)
    assert export({"RANK": "1"}, overwrite=True, environ=target) == {"RANK": "1"} and target["RANK"] == "1"


def test_export_defaults_never_replaces_a_users_value() -> None:
    from slurm_resolver.environment import export_defaults

    target = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    assert export_defaults({"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}, environ=target) == \
        {"OMP_NUM_THREADS": "1"}
    assert target == {"TF_CPP_MIN_LOG_LEVEL": "0", "OMP_NUM_THREADS": "1"}


def test_grpcs_proxy_is_turned_off_once_and_a_users_own_value_wins() -> None:
    from slurm_resolver.environment import keep_grpc_off_proxies

    env = {"https_proxy": "http://proxy:3128", "PATH": "/bin"}
    assert keep_grpc_off_proxies(env) == {"grpc_proxy": ""} and env["grpc_proxy"] == ""
    assert keep_grpc_off_proxies(env) == {}  # already off
    mine = {"https_proxy": "http://proxy:3128", "no_grpc_proxy": "node1"}
    assert keep_grpc_off_proxies(mine) == {} and "grpc_proxy" not in mine


def test_a_proxy_that_frameworks_grpc_would_use_is_said_once(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from slurm_resolver import environment

    monkeypatch.setattr(environment, "_warned", [])
    proxy = {"https_proxy": "http://proxy:3128"}
    with caplog.at_level("WARNING", logger="slurm_resolver"):
        assert environment.warn_of_grpc_proxy("to_tensorflow()", proxy)
        assert environment.warn_of_grpc_proxy("to_tensorflow()", proxy)
        assert not environment.warn_of_grpc_proxy("to_tensorflow()", {**proxy, "grpc_proxy": ""})
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "keep_grpc_off_proxies()" in said[0] and "to_tensorflow()" in said[0]
    assert "grpc_proxy" not in proxy  # said, not changed
