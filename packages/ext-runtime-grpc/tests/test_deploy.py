"""The deployment examples in `deploy/`, checked with real tooling so they cannot drift from the code:

- every Kubernetes manifest against the official schemas (kubernetes-validate, strict: unknown fields fail);
- the compose file parsed and resolved by `docker-compose config` (no Docker daemon needed);
- the Dockerfile parsed by BuildKit's parser (the `dockerfile` package);
- the gateway's command line in each example accepted by our real CLI parser, the probes, ports, mounted secret
  paths and grace periods consistent with it;
- and each example run as configured, on 127.0.0.1: two gateway processes with the example's arguments (paths
  mapped to files make-secrets.sh made, Redis to a test server), /readyz answering 200, the example worker with
  the example's environment, and a client's RPC to its echo agent over TLS with the token.

What these do not do: build the image or start containers (no Docker daemon here) or apply the manifests to a
cluster. The README says so.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import dockerfile
import kubernetes_validate
import pytest
import yaml
from ext_runtime_grpc_support import read_line

from ext.core import AgentId
from ext.runtime.grpc import GrpcAgentRuntime
from ext.runtime.grpc._cli import _parser
from ext.runtime.grpc.testing import GatewayProcess, start_gateway_process
from ext.testing.redis import RedisServer, free_port

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
REPO = DEPLOY.parents[2]
# The oldest Kubernetes the manifests support (the preStop `sleep` action is on by default from 1.30) and the
# newest whose schemas kubernetes-validate bundles.
K8S_VERSIONS = ("1.30.0", "1.37.0")
COMPOSE_INSTALL = "docker-compose is not installed: apt-get install -y docker-compose (tools/test.sh installs it)"

Doc = dict[str, Any]


# --- reading the examples --------------------------------------------------------------------------------------


def k8s_documents() -> list[tuple[str, Doc]]:
    found = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                found.append((path.name, doc))
    return found


def k8s_object(kind: str, name: str) -> Doc:
    for _, doc in k8s_documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in deploy/k8s")


def container(deployment: Doc) -> Doc:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def run_compose(*args: str, file: Path = DEPLOY / "compose.yaml") -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail(COMPOSE_INSTALL)
    # No daemon is contacted by `config`; DOCKER_HOST pointing nowhere proves it.
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    return subprocess.run(
        [binary, "-f", str(file), *args], capture_output=True, text=True, timeout=120, cwd=file.parent, env=env
    )


@pytest.fixture(scope="module")
def compose() -> Doc:
    """The compose file as docker-compose itself resolves it (anchors merged, paths absolute)."""
    ran = run_compose("config")
    assert ran.returncode == 0, ran.stderr
    resolved = yaml.safe_load(ran.stdout)
    assert isinstance(resolved, dict)
    return resolved


def split_options(args: list[str]) -> list[str]:
    """`--flag=value` as two tokens, like argparse sees them."""
    out: list[str] = []
    for arg in args:
        if arg.startswith("--") and "=" in arg:
            out.extend(arg.split("=", 1))
        else:
            out.append(arg)
    return out


def gateway_options(args: list[str]) -> Any:
    """Our real parser on an example's arguments (argparse exits on an unknown option: the test fails)."""
    try:
        return _parser("ext-grpc-gateway").parse_args(args)
    except SystemExit as exc:  # argparse's way of refusing
        raise AssertionError(f"ext-grpc-gateway refuses {args}") from exc


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)s", text)
    assert match, f"expected a duration like '30s', got {text!r}"
    return float(match.group(1))


# --- schema and parser validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_manifests_are_valid(version: str) -> None:
    documents = k8s_documents()
    for _, doc in documents:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError naming the field
    kinds = sorted(f"{doc['kind']}/{doc['metadata']['name']}" for _, doc in documents)
    assert kinds == [
        "Deployment/ext-echo-worker",
        "Deployment/ext-gateway",
        "Deployment/ext-redis",
        "PodDisruptionBudget/ext-gateway",
        "Secret/ext-grpc-tls",
        "Secret/ext-grpc-token",
        "Service/ext-gateway",
        "Service/ext-redis",
    ]


def test_the_validation_can_fail() -> None:
    """Strict mode refuses a misspelt field, and the preStop `sleep` action needs a newer Kubernetes than 1.28."""
    gateway = k8s_object("Deployment", "ext-gateway")
    kubernetes_validate.validate(gateway, K8S_VERSIONS[0], strict=True)
    probe = container(gateway)["readinessProbe"]["httpGet"]
    probe["pth"] = probe.pop("path")
    with pytest.raises(kubernetes_validate.ValidationError, match="'pth' was unexpected"):
        kubernetes_validate.validate(gateway, K8S_VERSIONS[-1], strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match="'sleep' was unexpected"):
        kubernetes_validate.validate(k8s_object("Deployment", "ext-gateway"), "1.28.0", strict=True)


def test_compose_file_is_valid_and_a_broken_one_is_not(tmp_path: Path) -> None:
    ran = run_compose("config", "-q")
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    broken = tmp_path / "compose.yaml"
    text = (DEPLOY / "compose.yaml").read_text()
    broken.write_text(text.replace("stop_grace_period: 30s", "stop_grace_periode: 30s", 1))
    # The build context is relative to the file: point it back at the repository.
    broken.write_text(broken.read_text().replace("context: ../../..", f"context: {REPO}"))
    ran = run_compose("config", "-q", file=broken)
    assert ran.returncode != 0 and "stop_grace_periode" in ran.stderr


def test_dockerfile_parses_and_matches_the_manifests() -> None:
    commands = dockerfile.parse_file(str(DEPLOY / "Dockerfile"))
    by_cmd: dict[str, list[Any]] = {}
    for command in commands:
        by_cmd.setdefault(command.cmd, []).append(command)
    # What it copies from the build context (the repository root) exists, and the .dockerignore lets it through.
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for copy in by_cmd["COPY"]:
        if any(flag.startswith("--from=") for flag in copy.flags):
            continue
        *sources, _ = copy.value
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert any(line == f"!{source}" or source.startswith(line[1:] + "/") for line in ignore if line[:1] == "!")
    # Non-root, with the uid the manifests run as and give the secrets to.
    (user,) = by_cmd["USER"]
    uid = int(user.value[0].split(":")[0])
    assert uid != 0
    for name in ("ext-gateway", "ext-echo-worker"):
        pod = k8s_object("Deployment", name)["spec"]["template"]["spec"]["securityContext"]
        assert pod["runAsUser"] == uid and pod["fsGroup"] == uid and pod["runAsNonRoot"] is True
    # The entrypoint is the gateway; its default arguments are accepted by the gateway's parser.
    (entrypoint,) = by_cmd["ENTRYPOINT"]
    assert entrypoint.json and list(entrypoint.value) == ["ext-grpc-gateway"]
    (cmd,) = by_cmd["CMD"]
    options = gateway_options(list(cmd.value))
    assert (options.host, options.port, options.health_port) == ("0.0.0.0", 50051, 8080)
    assert {c.value[0] for c in by_cmd["EXPOSE"]} | {c.value[1] for c in by_cmd["EXPOSE"]} == {"50051", "8080"}
    # The worker's command runs the script where the image puts it.
    worker_copy = [c for c in by_cmd["COPY"] if c.value[0].endswith("echo_worker.py")]
    assert len(worker_copy) == 1 and (REPO / worker_copy[0].value[0]) == DEPLOY / "echo_worker.py"
    assert container(k8s_object("Deployment", "ext-echo-worker"))["command"] == ["python", worker_copy[0].value[1]]


# --- the examples agree with the gateway's command line --------------------------------------------------------


def test_kubernetes_gateway_probes_ports_and_grace_match_its_arguments() -> None:
    deployment = k8s_object("Deployment", "ext-gateway")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    gateway = container(deployment)
    options = gateway_options(split_options(gateway["args"]))
    ports = {p["name"]: p["containerPort"] for p in gateway["ports"]}
    assert ports == {"grpc": options.port, "health": options.health_port}
    assert gateway["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert gateway["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert gateway["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert options.host == "0.0.0.0"  # reachable from kubelet and the Service
    # The pod gets the preStop pause, the whole drain and the streams' close before it is killed.
    pre_stop = gateway["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + options.shutdown_grace + 5
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True
    assert gateway["securityContext"]["allowPrivilegeEscalation"] is False
    service = k8s_object("Service", "ext-gateway")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(options.port, "grpc")]
    redis_service = k8s_object("Service", "ext-redis")
    assert (
        options.redis_url
        == f"redis://{redis_service['metadata']['name']}:{redis_service['spec']['ports'][0]['port']}/0"
    )
    budget = k8s_object("PodDisruptionBudget", "ext-gateway")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert 0 < budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_compose_gateways_healthchecks_ports_and_grace_match_their_arguments(compose: Doc) -> None:
    services = compose["services"]
    gateways = sorted(name for name in services if name.startswith("gateway-"))
    assert gateways == ["gateway-1", "gateway-2"]
    for name in gateways:
        service = services[name]
        options = gateway_options(split_options(service["command"]))
        check = " ".join(service["healthcheck"]["test"])
        assert f"http://127.0.0.1:{options.health_port}/readyz" in check
        assert seconds(service["stop_grace_period"]) >= options.shutdown_grace + 5
        published = {p.rsplit(":", 1)[1].split("/")[0] for p in service["ports"]}
        assert published == {str(options.port), str(options.health_port)}
        assert options.redis_url == "redis://redis:6379/0" and "redis" in service["depends_on"]
        assert service["read_only"] is True
    worker = services["worker"]
    addresses = worker["environment"]["EXT_GATEWAYS"].split(",")
    port = gateway_options(split_options(services["gateway-1"]["command"])).port
    assert addresses == [f"{name}:{port}" for name in gateways]
    assert all(worker["depends_on"][name]["condition"] == "service_healthy" for name in gateways)


# --- the examples run as configured ----------------------------------------------------------------------------


@dataclass
class Example:
    """One example reduced to what runs here: gateway arguments per replica, the worker's environment, and
    where each file the containers read comes from (container path -> make-secrets.sh's file name)."""

    gateway_args: list[list[str]]
    worker_env: dict[str, str]
    gateway_files: dict[str, str] = field(default_factory=dict)
    worker_files: dict[str, str] = field(default_factory=dict)
    # host:port in the worker's EXT_GATEWAYS -> which local replicas stand for it
    gateway_hosts: dict[str, list[int]] = field(default_factory=dict)


def compose_files(compose: Doc, service: Doc) -> dict[str, str]:
    files = {}
    for entry in service.get("secrets", []):
        source = entry["source"]
        local = Path(compose["secrets"][source]["file"])
        assert local.parent == DEPLOY / "secrets", f"secret {source}: make-secrets.sh writes to deploy/secrets"
        files[f"/run/secrets/{entry.get('target', source)}"] = local.name
    return files


def k8s_files(deployment: Doc) -> dict[str, str]:
    secrets = {doc["metadata"]["name"]: doc for _, doc in k8s_documents() if doc["kind"] == "Secret"}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    files = {}
    for mount in container(deployment).get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "secret" not in volume:
            continue
        secret = secrets[volume["secret"]["secretName"]]  # KeyError: a mounted secret the examples do not define
        items = volume["secret"].get("items") or [{"key": k, "path": k} for k in secret["stringData"]]
        for item in items:
            assert item["key"] in secret["stringData"]
            files[f"{mount['mountPath']}/{item['path']}"] = item["key"]  # the key is make-secrets.sh's file name
    return files


def compose_example(compose: Doc) -> Example:
    services = compose["services"]
    names = sorted(name for name in services if name.startswith("gateway-"))
    worker = services["worker"]
    return Example(
        gateway_args=[split_options(services[name]["command"]) for name in names],
        worker_env={k: str(v) for k, v in worker["environment"].items()},
        gateway_files=compose_files(compose, services[names[0]]),
        worker_files=compose_files(compose, worker),
        gateway_hosts={f"{name}:50051": [i] for i, name in enumerate(names)},
    )


def k8s_example() -> Example:
    gateway = k8s_object("Deployment", "ext-gateway")
    worker = k8s_object("Deployment", "ext-echo-worker")
    args = split_options(container(gateway)["args"])
    service = k8s_object("Service", "ext-gateway")
    return Example(
        gateway_args=[args] * gateway["spec"]["replicas"],
        worker_env={e["name"]: e["value"] for e in container(worker)["env"]},
        gateway_files=k8s_files(gateway),
        worker_files=k8s_files(worker),
        # The Service spreads connections over the replicas.
        gateway_hosts={f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}": [0, 1]},
    )


def local_gateway_args(args: list[str], files: dict[str, str], secrets: Path, redis_url: str, prefix: str) -> list[str]:
    """The example's arguments for a process on 127.0.0.1: addresses, Redis and file paths mapped; the rest as is."""
    out = list(args)
    for index, arg in enumerate(out[:-1]):
        value = out[index + 1]
        if arg == "--host":
            out[index + 1] = "127.0.0.1"
        elif arg == "--port":
            out[index + 1] = "0"
        elif arg == "--health-port":
            out[index + 1] = str(free_port())
        elif arg == "--redis-url":
            out[index + 1] = redis_url
        elif arg == "--log-level":
            out[index + 1] = "WARNING"  # stderr is a pipe nobody drains while the test runs
        elif arg in ("--token-file", "--tls-cert", "--tls-key"):
            assert value in files, f"{arg} {value}: no secret is mounted there"
            out[index + 1] = str(secrets / files[value])
    return [*out, "--redis-prefix", prefix]


def load_echo_worker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("echo_worker", DEPLOY / "echo_worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """make-secrets.sh run for real (openssl) into a temp folder."""
    out = tmp_path_factory.mktemp("secrets") / "secrets"
    ran = subprocess.run(["sh", str(DEPLOY / "make-secrets.sh"), str(out)], capture_output=True, text=True, timeout=120)
    if ran.returncode != 0 and shutil.which("openssl") is None:
        pytest.fail("openssl is not installed: apt-get install -y openssl (tools/test.sh installs it)")
    assert ran.returncode == 0, ran.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key", "token"]
    assert len((out / "token").read_text().strip()) == 64
    return out


def start_echo_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    """deploy/echo_worker.py as its own process (it prints "ready" once its agent type is registered)."""
    return subprocess.Popen(
        [sys.executable, str(DEPLOY / "echo_worker.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def http_status(port: int, path: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
    line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return int(line.split()[1])


@pytest.fixture
def processes() -> Iterator[list[GatewayProcess | subprocess.Popen[str]]]:
    started: list[GatewayProcess | subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            if isinstance(process, GatewayProcess):
                process.kill()
            elif process.poll() is None:
                process.kill()
                process.wait(timeout=10)


@pytest.mark.parametrize("flavour", ["compose", "kubernetes"])
async def test_the_example_runs_as_configured(
    flavour: str,
    compose: Doc,
    secrets: Path,
    redis_server: RedisServer,
    processes: list[GatewayProcess | subprocess.Popen[str]],
) -> None:
    example = compose_example(compose) if flavour == "compose" else k8s_example()
    prefix = f"deploy-{flavour}-{uuid.uuid4().hex[:6]}"
    gateways: list[GatewayProcess] = []
    for args in example.gateway_args:
        local = local_gateway_args(args, example.gateway_files, secrets, redis_server.url, prefix)
        gateway = start_gateway_process(*local)
        processes.append(gateway)
        gateways.append(gateway)
        health_port = int(local[local.index("--health-port") + 1])
        assert await http_status(health_port, "/readyz") == 200
        assert await http_status(health_port, "/healthz") == 200

    env = {k: v for k, v in os.environ.items() if not k.startswith("EXT_")}
    for name, value in example.worker_env.items():
        if name == "EXT_GATEWAYS":
            value = ",".join(gateways[i].address for host in value.split(",") for i in example.gateway_hosts[host])
        elif name.endswith("_FILE"):
            assert value in example.worker_files, f"{name}={value}: no secret is mounted there"
            value = str(secrets / example.worker_files[value])
        env[name] = value
    worker = start_echo_worker(env)
    processes.append(worker)
    line = await asyncio.to_thread(read_line, worker, 30)
    if line != "ready":
        worker.kill()
        pytest.fail(f"the example worker did not start: {line!r} {worker.communicate(timeout=10)[1][-2000:]}")

    # A client on the last replica reaches the echo agent, which may sit behind another replica: TLS with the
    # CA, the token from the file.
    echo_worker = load_echo_worker()
    client = GrpcAgentRuntime(
        gateways[-1].address,
        token_env=None,
        token_file=secrets / "token",
        root_certificates=(secrets / "ca.crt").read_bytes(),
        connect_timeout=5,
    )
    client.register_message_type(echo_worker.Echo, echo_worker.ECHO_TYPE)
    async with client:
        for key in ("a", "b", "c"):
            reply = await asyncio.wait_for(
                client.send_and_await_response(echo_worker.Echo(text=f"hi {key}"), AgentId("echo", key)), 10
            )
            assert reply == echo_worker.Echo(text=f"hi {key}")

    worker.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(worker.wait, 20) == 0
    for gateway in gateways:
        assert await asyncio.to_thread(gateway.terminate, 30) == 0
