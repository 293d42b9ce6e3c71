"""The deployment examples in `deploy/`, checked with real tooling so they cannot drift from the code:

- every Kubernetes manifest against the official schemas (kubernetes-validate, strict: unknown fields fail);
- the compose file validated against the Compose Specification's JSON schema (the copy check-jsonschema vendors)
  and resolved as `docker compose config` would: anchors merged, short syntax expanded, paths made absolute, and
  every reference (secrets, configs, networks, volumes, depends_on, the build context) checked;
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
import importlib.resources
import importlib.util
import json
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
import jsonschema
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
# compose-go parses these fields as Go durations (time.ParseDuration: "1m30s", "500ms"); the schema only says
# "string" (compose-spec/compose-go types: stop_grace_period, healthcheck interval/timeout/start_period/...).
GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
HEALTHCHECK_DURATIONS = ("interval", "timeout", "start_period", "start_interval")

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


def compose_schema() -> Doc:
    """The Compose Specification's schema (compose-spec/compose-spec `schema/compose-spec.json`), as vendored and
    kept current by check-jsonschema (its `--builtin-schema vendor.compose-spec`)."""
    resource = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(resource.read_text(encoding="utf-8"))
    assert schema.get("title") == "Compose Specification"
    return dict(schema)


class ComposeError(AssertionError):
    """The compose file breaks the specification or refers to something it does not define."""


def load_compose(file: Path = DEPLOY / "compose.yaml") -> Doc:
    """The compose file validated and resolved as `docker compose config` resolves it: YAML anchors and merge
    keys applied, every problem the schema finds (unknown or misspelt keys, wrong types) and every broken
    reference raised together, short syntax expanded (secrets, depends_on), file paths absolute."""
    document = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ComposeError(f"{file}: not a mapping")
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(top level)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if not problems:
        problems = _reference_problems(document, file.parent)
    if problems:
        raise ComposeError(f"{file}:\n" + "\n".join(problems))
    return _resolved(document, file.parent)


def _reference_problems(document: Doc, base: Path) -> list[str]:
    """What `docker compose config` refuses after the schema (compose-go's loader and its validation of
    references): undefined secrets, configs, networks and named volumes, unknown depends_on services,
    a missing build context or Dockerfile; and compose-go's duration parsing."""
    problems: list[str] = []
    services: Doc = document.get("services") or {}
    for name, service in services.items():
        where = f"services/{name}"
        for kind in ("secrets", "configs"):
            for entry in service.get(kind) or []:
                source = entry if isinstance(entry, str) else entry.get("source")
                if source not in (document.get(kind) or {}):
                    problems.append(f"{where}/{kind}: {source!r} is not defined in the top-level {kind}")
        networks = service.get("networks") or []
        for network in networks if isinstance(networks, list) else list(networks):
            if network != "default" and network not in (document.get("networks") or {}):
                problems.append(f"{where}/networks: {network!r} is not defined in the top-level networks")
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source")
            named = isinstance(source, str) and ":" in (volume if isinstance(volume, str) else ":")
            local = not source or source.startswith((".", "/", "~", "$"))  # a bind mount, not a named volume
            if named and not local and source not in (document.get("volumes") or {}):
                problems.append(f"{where}/volumes: {source!r} is not defined in the top-level volumes")
        depends = service.get("depends_on") or []
        for dependency in depends if isinstance(depends, list) else list(depends):
            if dependency not in services:
                problems.append(f"{where}/depends_on: no service {dependency!r}")
            elif (
                isinstance(depends, dict)
                and depends[dependency].get("condition") == "service_healthy"
                and "healthcheck" not in services[dependency]
            ):
                problems.append(f"{where}/depends_on: {dependency!r} must be healthy but has no healthcheck")
        build = service.get("build")
        if build is not None:
            context = base / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile_path = context / (
                build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
            )
            if not context.is_dir():
                problems.append(f"{where}/build: context {str(context)!r} is not a directory")
            elif not dockerfile_path.is_file():
                problems.append(f"{where}/build: {str(dockerfile_path)!r} does not exist")
        durations = {"stop_grace_period": service.get("stop_grace_period")}
        durations |= {f"healthcheck/{k}": (service.get("healthcheck") or {}).get(k) for k in HEALTHCHECK_DURATIONS}
        for field_name, value in durations.items():
            if value is not None and not GO_DURATION.fullmatch(str(value)):
                problems.append(f"{where}/{field_name}: {value!r} is not a duration (like '30s' or '1m30s')")
    return problems


def _resolved(document: Doc, base: Path) -> Doc:
    """Short syntax expanded and paths made absolute, the shape `docker compose config` prints."""
    resolved: Doc = json.loads(json.dumps(document))  # merge keys already applied by the YAML loader; a deep copy
    for service in resolved["services"].values():
        for kind in ("secrets", "configs"):
            if kind in service:
                service[kind] = [{"source": e} if isinstance(e, str) else e for e in service[kind]]
        if isinstance(service.get("depends_on"), list):
            service["depends_on"] = {d: {"condition": "service_started"} for d in service["depends_on"]}
        if isinstance(service.get("environment"), list):
            service["environment"] = dict(item.split("=", 1) for item in service["environment"])
        build = service.get("build")
        if build is not None:
            build = {"context": build} if isinstance(build, str) else build
            build["context"] = os.path.normpath(base / build.get("context", "."))
            service["build"] = build
    for kind in ("secrets", "configs"):
        for entry in (resolved.get(kind) or {}).values():
            if "file" in entry:
                entry["file"] = os.path.normpath(base / entry["file"])
    return resolved


@pytest.fixture(scope="module")
def compose() -> Doc:
    """The compose file, validated and resolved (anchors merged, short syntax expanded, paths absolute)."""
    return load_compose()


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
    resolved = load_compose()
    assert sorted(resolved["services"]) == ["gateway-1", "gateway-2", "redis", "worker"]
    assert resolved["services"]["gateway-2"]["command"] == resolved["services"]["gateway-1"]["command"]  # merged
    assert resolved["services"]["gateway-1"]["build"]["context"] == str(REPO)
    assert resolved["secrets"]["grpc_token"]["file"] == str(DEPLOY / "secrets" / "token")

    text = (DEPLOY / "compose.yaml").read_text()
    # The build context is relative to the file: point it back at the repository.
    text = text.replace("context: ../../..", f"context: {REPO}")

    def broken(old: str, new: str) -> str:
        assert old in text
        path = tmp_path / "compose.yaml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(ComposeError) as caught:
            load_compose(path)
        return str(caught.value)

    # A misspelt key: the schema's unevaluatedProperties, as compose-go's loader refuses it.
    assert "stop_grace_periode" in broken("stop_grace_period: 30s", "stop_grace_periode: 30s")
    # A wrong type, an undefined secret, an unknown dependency, a dependency without a healthcheck, a bad duration.
    assert "services/gateway-1/stop_grace_period: 30 is not of type 'string'" in broken(
        "stop_grace_period: 30s", "stop_grace_period: 30"
    )
    assert "'grpc_tokn' is not defined in the top-level secrets" in broken("- grpc_token\n", "- grpc_tokn\n")
    assert "services/worker/depends_on: no service 'gateway-3'" in broken("      gateway-2:\n", "      gateway-3:\n")
    redis_healthcheck = (
        '    healthcheck:\n      test: ["CMD", "redis-cli", "ping"]\n'
        "      interval: 5s\n      timeout: 3s\n      retries: 5\n"
    )
    assert "'redis' must be healthy but has no healthcheck" in broken(redis_healthcheck, "")
    assert "healthcheck/interval: '5 seconds' is not a duration" in broken("interval: 5s", "interval: 5 seconds")
    assert "is not a directory" in broken(f"context: {REPO}", f"context: {tmp_path / 'nowhere'}")


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
