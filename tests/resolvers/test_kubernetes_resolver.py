"""KubernetesClusterResolver with an injected client, and with the real client against a fake API server."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import pytest

from slurm_resolver import KubernetesClusterResolver
from slurm_resolver.errors import MissingDependencyError

PODS = [  # name, labels, phase, pod IP
    ("worker-1", {"job-name": "tensorflow", "replica": "worker"}, "Running", "10.0.0.11"),
    ("worker-0", {"job-name": "tensorflow", "replica": "worker"}, "Running", "10.0.0.10"),
    ("worker-2", {"job-name": "tensorflow", "replica": "worker"}, "Pending", None),
    ("ps-0", {"job-name": "ps"}, "Running", "10.0.1.10"),
    ("extra-ps", {"role": "ps-extra"}, "Running", "10.0.1.20"),
    ("done", {"job-name": "ps"}, "Succeeded", "10.0.1.99"),
]


def matches(labels: dict[str, str], selector: str) -> bool:
    return all(labels.get(k) == v for k, _, v in (part.partition("=") for part in selector.split(",")))


class FakeClient:
    def __init__(self) -> None:
        self.selectors: list[str] = []

    def list_pod_for_all_namespaces(self, label_selector: str) -> SimpleNamespace:
        self.selectors.append(label_selector)
        return SimpleNamespace(items=[
            SimpleNamespace(metadata=SimpleNamespace(name=n, namespace="default"),
                            status=SimpleNamespace(phase=phase, pod_ip=ip))
            for n, labels, phase, ip in PODS if matches(labels, label_selector)])


MAPPING = {"worker": ["job-name=tensorflow"], "ps": ["job-name=ps", "role=ps-extra"]}
# the Succeeded pod "done" sorts first among the ps pods: left out, it leaves a gap (ps tasks 1 and 2 keep their
# indices); the Pending worker-2 is last, so the worker job stays dense
EXPECTED = {"worker": ["10.0.0.10:8470", "10.0.0.11:8470"], "ps": {1: "10.0.1.10:8470", 2: "10.0.1.20:8470"}}


def test_injected_client_running_pods_sorted_several_selectors() -> None:
    client = FakeClient()
    r = KubernetesClusterResolver(MAPPING, override_client=client)
    assert r.cluster_spec().as_dict() == EXPECTED
    assert client.selectors == ["job-name=tensorflow", "job-name=ps", "role=ps-extra"]
    assert r.master() == "" and r.task_type is None
    r.task_type, r.task_id = "worker", 1
    assert r.master() == "grpc://10.0.0.11:8470" and r.master("ps", 2, rpc_layer="http") == "http://10.0.1.20:8470"


def test_default_mapping_and_port() -> None:
    r = KubernetesClusterResolver(tf_server_port=2222, override_client=FakeClient())
    assert r.cluster_spec().as_dict() == {"worker": ["10.0.0.10:2222", "10.0.0.11:2222"]}


def test_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ImportError, match=r"pip install 'slurm_resolver\[kubernetes\]'") as info:
        KubernetesClusterResolver()
    assert isinstance(info.value, MissingDependencyError)


class FakeAPI(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        selector = parse_qs(url.query).get("labelSelector", [""])[0]
        if url.path != "/api/v1/pods":
            self.send_error(404)
            return
        items = [{"metadata": {"name": n, "namespace": "default", "labels": labels},
                  "status": {"phase": phase, **({"podIP": ip} if ip else {})}}
                 for n, labels, phase, ip in PODS if matches(labels, selector)]
        body = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_real_client_against_a_fake_api_server(api_server: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("kubernetes", reason="the [kubernetes] extra is installed by scripts/test")
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": api_server}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "users": [{"name": "fake", "user": {"token": "not-a-secret"}}],
    }))
    import kubernetes.config.kube_config as kube_config

    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(config))  # read once at import
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert KubernetesClusterResolver(MAPPING).cluster_spec().as_dict() == EXPECTED
