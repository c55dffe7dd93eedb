"""`simforge carla-map`: what a CARLA server's town offers a scenario, in the map frame.

A scenario for the carla backend is written in its town's coordinates mirrored into the
map frame (x, -y, -yaw), with each signal at a traffic light's pole. Reading those off
CARLA by hand means converting every number; this lists the town's spawn points and
traffic lights already converted, as the scenario file writes them. Without ``--town`` it
only reads: the world's settings, actors and lights are left as they are. ``--town`` loads
that map first, and CARLA's load_world gives the server its default settings back and
destroys every actor: not against a server another client is running a session on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from simforge_ros.backends.base import BackendUnavailable
from simforge_ros.backends.carla_backend import from_carla_xy_yaw, import_carla, load_town
from simforge_ros.core.errors import EXIT_FAILURE, EXIT_USAGE, ConfigError
from simforge_ros.params import coerce
from simforge_ros.tools import parse, say

TOOL = "carla-map"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"simforge {TOOL}",
        description="List a CARLA server's spawn points and traffic lights in the map frame a scenario for "
                    "the carla backend is written in (x, -y, -yaw).")
    parser.add_argument("--host", default="localhost", help="the server's host (sim_bridge.carla_host)")
    parser.add_argument("--port", type=int, default=2000, help="its RPC port (sim_bridge.carla_port)")
    parser.add_argument("--timeout-ms", type=int, default=10_000, help="wall-clock limit of each server call")
    parser.add_argument("--town", default="", help="load this map first (sim_bridge.carla_town), which resets "
                                                   "the server's settings and destroys every actor; default: "
                                                   "the one the server has loaded, only read")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def read_town(carla: Any, host: str, port: int, timeout_ms: int, town: str = "") -> dict[str, Any]:
    """The server's version, its map's name, and its spawn points and traffic lights in the
    map frame (rounded to the millimetre and the tenth of a milliradian).

    Raises: RuntimeError: the server did not answer (the client's time-out).
    """
    client = carla.Client(host, port)
    client.set_timeout(timeout_ms / 1000.0)
    version = client.get_server_version()
    world = load_town(client, town, timeout_ms / 1000.0) if town else client.get_world()
    carla_map = world.get_map()
    points = []
    for t in carla_map.get_spawn_points():
        x, y, yaw = from_carla_xy_yaw(t.location.x, t.location.y, t.rotation.yaw)
        points.append({"x_m": round(x, 3) + 0.0, "y_m": round(y, 3) + 0.0, "yaw_rad": round(yaw, 4) + 0.0})  # no -0.0
    lights = []
    for light in sorted(world.get_actors().filter("traffic.traffic_light*"), key=lambda a: a.id):
        where = light.get_location()
        x, y, _ = from_carla_xy_yaw(where.x, where.y, 0.0)
        lights.append({"carla_id": int(light.id), "x_m": round(x, 3) + 0.0, "y_m": round(y, 3) + 0.0})
    return {"server": str(version), "map": str(carla_map.name), "spawn_points": points, "traffic_lights": lights}


def _text(town: dict[str, Any], where: str) -> str:
    lines = [f"carla {town['server']} at {where}, map {town['map']}",
             f"spawn points ({len(town['spawn_points'])}; each places a vehicle's origin: ego.start is its rear "
             "axle, length_m / 2 - rear_overhang_m behind the box's centre):"]
    lines += [f"  {i}: {{x_m: {p['x_m']}, y_m: {p['y_m']}, yaw_rad: {p['yaw_rad']}}}"
              for i, p in enumerate(town["spawn_points"])]
    lines.append(f"traffic lights ({len(town['traffic_lights'])}; a signal within 10 m of one drives it):")
    lines += [f"  carla id {light['carla_id']}: {{x_m: {light['x_m']}, y_m: {light['y_m']}}}"
              for light in town["traffic_lights"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(_parser(), argv)
    if isinstance(args, int):
        return args
    # the command line first, as sim_bridge's parameters are checked: a bad port or time-out
    # was said only once the carla module was installed, if at all
    try:
        coerce("sim_bridge", "carla_port", args.port, source="--port")
        coerce("sim_bridge", "carla_timeout_ms", args.timeout_ms, source="--timeout-ms")
    except ConfigError as err:
        say(TOOL, err)
        return EXIT_USAGE
    try:
        carla = import_carla()
    except BackendUnavailable as err:
        say(TOOL, err)
        return EXIT_USAGE
    where = f"{args.host}:{args.port}"
    try:
        town = read_town(carla, args.host, args.port, args.timeout_ms, args.town)
    except Exception as err:  # noqa: BLE001 - the client raises RuntimeError on a time-out, others elsewhere
        say(TOOL, f"no answer from a CARLA server at {where} within {args.timeout_ms} ms ({type(err).__name__}: "
                  f"{err})")
        return EXIT_FAILURE
    print(json.dumps(town, indent=2) if args.json else _text(town, where))
    return 0


if __name__ == "__main__":
    sys.exit(main())
