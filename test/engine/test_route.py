"""engine.route: projection onto the route, checked against brute force."""

import itertools
import math
import random

from simforge_ros.engine.route import RouteGeometry
from simforge_ros.engine.scenario import RouteWaypoint


def _route(points):
    return RouteGeometry(tuple(RouteWaypoint(x, y, 0.0, 5.0) for x, y in points))


def _nearest_by_sampling(points, x, y, samples=400):
    best = math.inf
    for (ax, ay), (bx, by) in itertools.pairwise(points):
        for k in range(samples + 1):
            f = k / samples
            best = min(best, math.hypot(ax + (bx - ax) * f - x, ay + (by - ay) * f - y))
    return best


def test_projection_finds_the_nearest_point_of_the_polyline():
    rng = random.Random(7)
    for _ in range(20):
        points = [(0.0, 0.0)]
        for _ in range(rng.randint(1, 12)):
            points.append((points[-1][0] + rng.uniform(1, 15), points[-1][1] + rng.uniform(-8, 8)))
        route = _route(points)
        for _ in range(10):
            x, y = rng.uniform(0, points[-1][0]), rng.uniform(-20, 20)
            s, _ = route.project(x, y)
            if not 0.0 <= s <= route.length_m:
                continue  # beyond an end the route is extended straight: not on the polyline
            px, py = route.point_at(s)
            assert math.hypot(px - x, py - y) <= _nearest_by_sampling(points, x, y) + 1e-6


def test_lateral_offset_is_positive_to_the_left_of_travel():
    route = _route([(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)])
    assert route.project(5.0, 2.0) == (5.0, 2.0)
    assert route.project(15.0, -3.0) == (15.0, -3.0)


def test_with_a_heading_the_leg_facing_the_other_way_is_skipped():
    # a hairpin: out along y = 0, back along y = 4; a point on the way back, nearer the out leg
    route = _route([(0.0, 0.0), (20.0, 0.0), (20.0, 4.0), (0.0, 4.0)])
    s_any, _ = route.project(10.0, 1.5)
    s_back, lateral = route.project(10.0, 1.5, math.pi)
    assert s_any == 10.0  # the out leg is nearest
    assert s_back == 20.0 + 4.0 + 10.0 and lateral == 2.5  # heading back: the back leg
    # facing no segment at all (a straight route, heading back): the nearest one all the same
    assert _route([(0.0, 0.0), (10.0, 0.0), (20.0, 0.0)]).project(15.0, 1.0, math.pi) == (15.0, 1.0)


def test_beyond_either_end_the_route_extends_straight():
    route = _route([(0.0, 0.0), (10.0, 0.0)])
    assert route.project(-4.0, 1.0) == (-4.0, 1.0)
    assert route.project(13.0, -1.0) == (13.0, -1.0)
