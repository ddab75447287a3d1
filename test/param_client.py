"""A parameter client in its own process: what ``ros2 param set`` / ``get`` do, over DDS.

Run as ``python param_client.py``; it prints ``READY`` once rclpy is up, then answers one
JSON request per stdin line with one JSON line and a ``DONE`` line:

- ``{"op": "set", "node": "/controller", "parameters": [[name, value], ...]}``: one
  ``SetParameters`` service call per parameter, in order (as ``ros2 param set`` makes one
  per invocation); the answer is ``[{"successful": bool, "reason": str}, ...]``.
- ``{"op": "get", "node": "/controller", "names": [name, ...]}``: one ``GetParameters``
  call; the answer is the list of values (lists for arrays, None when unset).

Values travel as JSON (NaN included) and are typed as rclpy types Python values: a float is
a DOUBLE, an int an INTEGER, a list of floats a DOUBLE_ARRAY. Every wait is bounded: a
service that does not answer gives ``{"successful": false, "reason": "TIMEOUT ..."}`` (or
null values) rather than a hang. Only the standard library is imported at module level.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

SERVICE_WAIT_S = 20.0
CALL_TIMEOUT_S = 10.0


def _say(text: str) -> None:
    print(text, flush=True)


def run() -> int:
    import rclpy
    from rcl_interfaces.srv import GetParameters, SetParameters
    from rclpy.parameter import Parameter, parameter_value_to_python

    rclpy.init(args=[])
    # rclpy's handler only shuts the context down, and this process waits on stdin: let
    # the test's terminate() end it at once.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    node = rclpy.create_node("param_client")
    clients: dict[tuple[str, str], Any] = {}

    def client(kind: type, service: str) -> Any:
        key = (kind.__name__, service)
        if key not in clients:
            clients[key] = node.create_client(kind, service)
        if not clients[key].wait_for_service(timeout_sec=SERVICE_WAIT_S):
            return None
        return clients[key]

    def call(service_client: Any, request: Any) -> Any:
        future = service_client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=CALL_TIMEOUT_S)
        return future.result() if future.done() else None

    def set_parameters(target: str, parameters: list[list[Any]]) -> list[dict[str, Any]]:
        service = client(SetParameters, f"{target}/set_parameters")
        results = []
        for name, value in parameters:
            request = SetParameters.Request(
                parameters=[Parameter(name, value=value).to_parameter_msg()])
            response = None if service is None else call(service, request)
            if response is None:
                results.append({"successful": False, "reason": f"TIMEOUT setting {name}"})
            else:
                (result,) = response.results
                results.append({"successful": bool(result.successful),
                                "reason": str(result.reason)})
        return results

    def get_parameters(target: str, names: list[str]) -> list[Any]:
        service = client(GetParameters, f"{target}/get_parameters")
        response = None if service is None else call(
            service, GetParameters.Request(names=names))
        if response is None:
            return [None] * len(names)
        values: list[Any] = [parameter_value_to_python(v) for v in response.values]
        return [v if isinstance(v, str) or not hasattr(v, "__len__") else list(v)
                for v in values]

    try:
        _say("READY")
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            if request["op"] == "set":
                answer: Any = set_parameters(request["node"], request["parameters"])
            elif request["op"] == "get":
                answer = get_parameters(request["node"], request["names"])
            else:
                answer = {"error": f"unknown op {request['op']!r}"}
            _say(json.dumps(answer))
            _say("DONE")
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description="Set and get node parameters over their services, "
                                        "one JSON request per stdin line (see the module "
                                        "docstring).").parse_args(argv)
    return run()


if __name__ == "__main__":
    sys.exit(main())
