"""Keeps compose.yaml in step with the native stack (scripts/stack): run by scripts/test after `docker-compose config`.

Checks, on the file as docker-compose resolves it: every service executable the package defines has a container
running it from the one image, with a health check; each listens on its DESIGN.md port under the same variable
names the native stack sets (HABITFLOW_<SERVICE>_PORT, _HOST, _DATABASE_URL as its own role); the others find it
through HABITFLOW_<SERVICE>_ADDRESSES; only the gateway publishes a port, on loopback.
"""

import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from habitflow_stack import DEFAULT_PORTS  # noqa: E402


def main():
    resolved = subprocess.run(["docker-compose", "--file", os.path.join(ROOT, "compose.yaml"), "config"],
                              capture_output=True, text=True, check=True, cwd=ROOT).stdout
    services = yaml.safe_load(resolved)["services"]
    with open(os.path.join(ROOT, "Package.swift")) as f:
        executables = re.findall(r'name: "habitflow-(auth|habits|goals|social|gateway)"', f.read())
    problems = []
    images = {services[name].get("image") for name in executables if name in services}
    if len(images) != 1:
        problems.append("the services should share one image, found %s" % sorted(map(str, images)))
    for name, service in services.items():
        if name != "gateway" and service.get("ports"):
            problems.append("%s publishes ports; only the gateway may" % name)
    for name in executables:
        service = services.get(name)
        if service is None:
            problems.append("habitflow-%s exists but compose.yaml has no %s service" % (name, name))
            continue
        env = service.get("environment", {})
        prefix = "HABITFLOW_%s_" % name.upper()
        port = DEFAULT_PORTS[name]
        if service.get("command") != ["habitflow-" + name]:
            problems.append("%s: command should be habitflow-%s" % (name, name))
        if env.get(prefix + "PORT") != str(port):
            problems.append("%s: %sPORT should be %d" % (name, prefix, port))
        if env.get(prefix + "HOST") != "0.0.0.0":
            problems.append("%s: %sHOST should be 0.0.0.0 inside its container" % (name, prefix))
        if name != "gateway" and not str(env.get(prefix + "DATABASE_URL", "")).startswith("postgresql://%s:" % name):
            problems.append("%s: %sDATABASE_URL should log in as the %s role" % (name, prefix, name))
        health = service.get("healthcheck", {}).get("test", [])
        if "127.0.0.1:%d" % port not in health:
            problems.append("%s: no gRPC health check on port %d" % (name, port))
        for other in executables:
            if other == name:
                continue
            expected = "%s:%d" % (other, DEFAULT_PORTS[other])
            if env.get("HABITFLOW_%s_ADDRESSES" % other.upper()) != expected:
                problems.append("%s: HABITFLOW_%s_ADDRESSES should be %s" % (name, other.upper(), expected))
    published = [str(port) for port in services.get("gateway", {}).get("ports", [])]
    if not any(str(DEFAULT_PORTS["gateway"]) in port for port in published):
        problems.append("the gateway should publish port %d" % DEFAULT_PORTS["gateway"])
    if not all(port.startswith("127.0.0.1:") for port in published):
        problems.append("the gateway should publish its port on 127.0.0.1 only, found %s" % published)
    for problem in problems:
        print("compose.yaml: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
