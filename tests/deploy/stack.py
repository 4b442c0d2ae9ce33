"""The compose stack run with podman from docker-compose.yml itself, as docker-compose would run it.

Neither docker nor a compose runner that waits on healthchecks is available with Debian's
podman 4.3 (no systemd to run the healthchecks either), so this reads the compose files (YAML
anchors and merge keys, `${VAR:-default}` / `${VAR:?error}` interpolation, later files merged
over earlier ones) and starts each service as a podman container on one network, under its
service name, in the order of its `depends_on`, waiting on each condition the file names
(`service_healthy`: the service's own healthcheck, given to podman as the file writes it and
run by podman itself with `podman healthcheck run`, since podman 4.3 has no systemd here to run it
on its interval;
`service_completed_successfully`: the one-shot's exit status). Images with `build:` are built by
scripts/image.sh (a base from Debian's packages where docker.io cannot be reached). Published
ports go to a free port on 127.0.0.1, never a fixed one (`make stack` publishes them as written).
Each container gets the `ulimits` its service declares, and only those.

`make stack` / `make stack-down` run it from the command line (`python -m tests.deploy.stack`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# a container's limits outside the stack (the image's own test): as docker-compose.yml's x-limits
LIMITS = ["--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096"]
_VAR = re.compile(
    r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_]\w*))"
)


class StackError(RuntimeError):
    """A service did not start, answer or finish as its compose definition says it should."""


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution, applied to every string of a loaded file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        op, arg, have = m.group("op"), m.group("arg") or "", env.get(name)
        unset = have is None or (op is not None and op.startswith(":") and have == "")
        if op and op.endswith("-") and unset:
            return arg
        if op and op.endswith("?") and unset:
            raise StackError(f"{name}: {arg or 'required'}")
        return have or ""

    return _VAR.sub(one, value)


def merge(base: Any, over: Any) -> Any:
    """A later compose file over an earlier one: mappings merged key by key, the rest replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = merge(base.get(key), value) if key in base else value
        return merged
    return over


def load(files: list[Path], env: dict[str, str], extra: tuple[dict, ...] = ()) -> dict[str, Any]:
    """The merged, interpolated model of compose files (plus overrides given as mappings)."""
    model: dict[str, Any] = {}
    for path in files:
        model = merge(model, yaml.safe_load(path.read_text()))
    for more in extra:
        model = merge(model, more)
    return interpolate({k: v for k, v in model.items() if not k.startswith("x-")}, env)


def _words(command: str | list[str] | None) -> list[str]:
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _health_command(check: dict[str, Any] | None) -> list[str] | None:
    if not check or check.get("disable"):
        return None
    test = check["test"]
    if isinstance(test, str):
        return ["sh", "-c", test]
    if test[0] == "CMD-SHELL":
        return ["sh", "-c", test[1]]
    return [str(t) for t in (test[1:] if test[0] == "CMD" else test)]


def _limits(spec: dict[str, Any]) -> list[str]:
    """The service's `ulimits` as podman's flags (`nofile: 4096` or `nofile: {soft:, hard:}`)."""
    flags = []
    for name, value in (spec.get("ulimits") or {}).items():
        soft, hard = (value["soft"], value["hard"]) if isinstance(value, dict) else (value, value)
        flags += ["--ulimit", f"{name}={soft}:{hard}"]
    return flags


def _duration(value: str | int | None, default: str) -> str:
    return str(value) if value is not None else default


def _health_flags(check: dict[str, Any] | None) -> list[str]:
    """The healthcheck as podman stores it, from the file's own test. podman 4.3 (its CLI and its
    Docker API alike) joins a CMD array with spaces and splits it on them again: an argument with a
    space in it would not run as written, so it is refused here rather than failing later."""
    if not check or check.get("disable"):
        return []
    test = check["test"]
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if test[0] == "CMD-SHELL":
        command = f"CMD-SHELL {test[1]}"
    else:
        words = [str(t) for t in (test[1:] if test[0] == "CMD" else test)]
        spaced = [w for w in words if not w or any(c.isspace() for c in w)]
        if spaced:
            raise StackError(f"healthcheck argument {spaced[0]!r} has a space: podman would split it")
        command = "CMD " + " ".join(words)
    return [
        "--health-cmd",
        command,
        "--health-interval",
        _duration(check.get("interval"), "30s"),
        "--health-timeout",
        _duration(check.get("timeout"), "30s"),
        "--health-retries",
        str(check.get("retries", 3)),
        "--health-start-period",
        _duration(check.get("start_period"), "0s"),
    ]


def _podman(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise StackError(f"podman {' '.join(args[:3])}: {(done.stderr or done.stdout)[-2000:]}")
    return done


class Stack:
    """One project's containers, network and volumes (names prefixed by the project)."""

    def __init__(self, project: str, root: Path, files: list[Path], env: dict[str, str], extra=()) -> None:
        self.project, self.root = project, root
        self.model = load(files, env, tuple(extra))
        self.services: dict[str, dict[str, Any]] = self.model["services"]
        self.network = f"{project}_default"
        self.timings: dict[str, float] = {}
        self.fixed_ports = False  # published on a free loopback port (the tests); True: as written

    def name(self, service: str) -> str:
        return f"{self.project}_{service}"

    def build(self, builder: Callable[[str, str], object] | None = None) -> None:
        """Every image a service builds, once each, by `builder(tag, dockerfile)` when given, else
        by scripts/image.sh itself (podman reuses the layers between runs)."""
        seen = set()
        for spec in self.services.values():
            build, image = spec.get("build"), spec.get("image")
            if not build or image in seen:
                continue
            seen.add(image)
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if builder is not None:  # the tests' builder: under their build lock, skipped without podman
                builder(image, dockerfile)
                continue
            done = subprocess.run(
                ["bash", "scripts/image.sh", image, dockerfile],
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if done.returncode != 0:
                raise StackError(f"building {image}: {done.stderr[-3000:]}")

    def order(self) -> list[str]:
        """The services, each after those it depends on."""
        placed: list[str] = []

        def place(service: str, path: tuple[str, ...]) -> None:
            if service in placed:
                return
            if service in path:
                raise StackError(f"depends_on cycle through {service}")
            for dep in self.depends(service):
                place(dep, (*path, service))
            placed.append(service)

        for service in self.services:
            place(service, ())
        return placed

    def depends(self, service: str) -> dict[str, str]:
        deps = self.services[service].get("depends_on") or {}
        if isinstance(deps, list):
            return {d: "service_started" for d in deps}
        return {d: (c or {}).get("condition", "service_started") for d, c in deps.items()}

    def up(self, timeout: float = 900, say: Callable[[str], object] | None = None) -> None:
        """Create the network and start every service in order, waiting on each condition
        (`say`: told each wait and start, as `make stack` prints them)."""
        if _podman("network", "exists", self.network, check=False).returncode != 0:
            _podman("network", "create", self.network)
        started = time.monotonic()
        for service in self.order():
            for dep, condition in self.depends(service).items():
                if say:
                    say(f"  {service}: waiting for {dep} ({condition})")
                self.wait(dep, condition, timeout)
            self.create(service)
            self.timings[service] = time.monotonic() - started
            if say:
                say(f"  {service}: started after {self.timings[service]:.0f} s")

    def wait(self, service: str, condition: str, timeout: float) -> None:
        if condition == "service_healthy":
            self.wait_healthy(service, timeout)
        elif condition == "service_completed_successfully":
            status = _podman("wait", self.name(service), timeout=timeout).stdout.strip()
            if status != "0":
                raise StackError(f"{service} exited with {status}:\n{self.logs(service)[-3000:]}")

    def wait_healthy(self, service: str, timeout: float = 600) -> None:
        """Have podman run the service's healthcheck until it passes (its interval shortened to a
        second): `podman healthcheck run`, the command podman stored from the file."""
        if _health_command(self.services[service].get("healthcheck")) is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            state = _podman("inspect", "-f", "{{.State.Status}}", self.name(service), check=False).stdout.strip()
            if state == "running" and self.healthcheck(service).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"{service} not healthy after {timeout:.0f} s ({state}):\n{self.logs(service)[-3000:]}"
                )
            time.sleep(1)

    def healthcheck(self, service: str) -> subprocess.CompletedProcess:
        """The container's healthcheck run once by podman (exit status 0: healthy)."""
        return _podman("healthcheck", "run", self.name(service), timeout=120, check=False)

    def _run_flags(self, service: str, one_off: bool = False) -> list[str]:
        spec = self.services[service]
        flags = [*_limits(spec), "--network", self.network, *([] if one_off else ["--network-alias", service])]
        env = spec.get("environment") or {}
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env)
        flags += [f"--env={k}={'' if v is None else v}" for k, v in env.items()]
        for volume in spec.get("volumes") or []:
            source, _, target = volume.partition(":")
            if source.startswith((".", "/")):
                path = (self.root / source).resolve()
                path.mkdir(parents=True, exist_ok=True)  # as docker makes a missing bind source; podman refuses
                source = str(path)
            else:
                source = f"{self.project}_{source}"
            flags += ["--volume", f"{source}:{target}"]
        for port in spec.get("ports") or []:
            flags += ["--publish", str(port) if self.fixed_ports else f"127.0.0.1::{str(port).split(':')[-1]}"]
        if spec.get("entrypoint") is not None:
            flags += ["--entrypoint", json.dumps(_words(spec["entrypoint"]))]
        if spec.get("restart") not in (None, "no") and not one_off:
            flags += ["--restart", spec["restart"]]
        return flags

    def create(self, service: str) -> None:
        spec = self.services[service]
        _podman("rm", "-f", self.name(service), check=False)
        health = _health_flags(spec.get("healthcheck"))
        args = ["run", "-d", "--name", self.name(service), *self._run_flags(service), *health, spec["image"]]
        _podman(*args, *_words(spec.get("command")))

    def run(self, service: str, *command: str, timeout: float = 600, env=None) -> subprocess.CompletedProcess:
        """A one-off container of the service's definition running `command` (compose run -e)."""
        flags = [*self._run_flags(service, one_off=True), *(f"--env={k}={v}" for k, v in (env or {}).items())]
        args = ["run", "--rm", *flags, self.services[service]["image"], *command]
        return _podman(*args, timeout=timeout, check=False)

    def exec(self, service: str, *command: str, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return _podman("exec", *flags, self.name(service), *command, timeout=timeout, check=False)

    def port(self, service: str, container_port: int) -> int:
        shown = _podman("port", self.name(service), str(container_port)).stdout.strip().splitlines()[0]
        return int(shown.rsplit(":", 1)[1])

    def stop(self, service: str) -> None:
        _podman("stop", "-t", "5", self.name(service))

    def start(self, service: str) -> None:
        _podman("start", self.name(service))

    def kill(self, service: str) -> None:
        _podman("kill", self.name(service))

    def logs(self, service: str) -> str:
        done = _podman("logs", self.name(service), check=False)
        return done.stdout + done.stderr

    def down(self, volumes: bool = True) -> None:
        """Every container and the network gone, and the volumes unless `volumes` is False."""
        names = [self.name(s) for s in self.services]
        _podman("rm", "-f", "-t", "2", *names, check=False, timeout=600)
        _podman("network", "rm", "-f", self.network, check=False)
        if not volumes:
            return
        listed = _podman("volume", "ls", "-q", check=False).stdout.split()
        mine = [v for v in listed if v.startswith(f"{self.project}_")]
        if mine:
            _podman("volume", "rm", "-f", *mine, check=False)


# `make stack`: the secrets the file requires, made once into this file (mode 0600) unless the
# environment gives them; plain http on localhost (DELTAWEB_SECURE_COOKIES=0) for a first look
STACK_ENV = "var/stack.env"
REQUIRED = (
    "POSTGRES_PASSWORD",
    "DELTAWEB_SECRET_KEY",
    "MINIO_ROOT_PASSWORD",
    "DELTAWEB_SPARK_CONNECT_TOKEN",
    "SPARK_AUTH_SECRET",
)
DEFAULTS = {
    "MINIO_ROOT_USER": "deltaweb",
    "DELTAWEB_ALLOWED_HOSTS": "localhost,127.0.0.1",
    "DELTAWEB_SECURE_COOKIES": "0",
}


def stack_env(root: Path, path: str) -> dict[str, str]:
    """The variables of `path` (KEY=VALUE lines; written with new secrets when missing) under the
    process's own environment."""
    env_file = root / path
    if not env_file.exists():
        env_file.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={secrets.token_hex(24)}" for k in REQUIRED] + [f"{k}={v}" for k, v in DEFAULTS.items()]
        env_file.touch(mode=0o600)
        env_file.write_text("\n".join(lines) + "\n")
    env = {}
    for line in env_file.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return {**env, **os.environ}


def main(argv: list[str] | None = None) -> int:
    """`up`: build the images, start every service in order, wait for the web's healthcheck and
    print its address; `down`: stop and remove the containers (`--volumes`: the data too)."""
    root = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(prog="python -m tests.deploy.stack", description=main.__doc__)
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--project", default="deltaweb")
    parser.add_argument("--env-file", default=STACK_ENV)
    parser.add_argument("--no-stand-ins", action="store_true", help="the third-party images from docker.io, quay.io")
    parser.add_argument("--volumes", action="store_true", help="down: remove the volumes (the data) too")
    args = parser.parse_args(argv)
    files = [root / "docker-compose.yml"] + ([] if args.no_stand_ins else [root / "deploy" / "compose.stand-ins.yml"])
    stack = Stack(args.project, root, files, stack_env(root, args.env_file))
    stack.fixed_ports = True
    if args.action == "down":
        stack.down(volumes=args.volumes)
        print(f"{args.project}: stopped" + (" and its volumes removed" if args.volumes else " (volumes kept)"))
        return 0
    started = time.monotonic()
    try:
        print("building the images (scripts/image.sh; cached layers are reused)", flush=True)
        stack.build()
        stack.up(say=lambda line: print(line, flush=True))  # its network too: a first run has none
        stack.wait_healthy("web")
    except StackError as failed:
        print(f"the stack did not start: {failed}", file=sys.stderr)
        return 1
    ports = [str(p) for p in stack.services["web"].get("ports") or []]
    print(
        f"healthy after {time.monotonic() - started:.0f} s: http://localhost:{ports[0].split(':')[0]}/ "
        f"(secrets in {args.env_file}; `make stack-down` stops it)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
