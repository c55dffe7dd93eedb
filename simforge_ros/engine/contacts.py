"""Contact events between oriented boxes, and who is to blame.

A contact is recorded once, at the first tick a pair's boxes overlap (SAT test); it is
recorded again only after the pair has separated for at least one tick.

harness_fault rule (decided at the first overlapping tick, from the velocities then):
  * contacts between two scripted actors are always harness faults (authored data);
  * an ego contact with the ego (nearly) stopped, ego speed < EGO_STOPPED_MPS (0.1 m/s), is a
    harness fault unless the ego is the faster of the two and closing, faster than the other
    (an ego creeping into a parked van was the harness's fault: a van that never moved caused
    nothing); a pair placed overlapping, neither moving, is the scenario's, so the
    harness's, and so is a car cutting in that clips a parked or creeping ego (its centre
    past the ego's: it "closes" at less than 0);
  * otherwise, when the other actor is faster than the ego AND closes faster than the ego
    does. Closing speed of a body is the component of its velocity along the line from its
    centre to the other body's centre.
So traffic rear-ending a slower or stopped ego is the harness's fault; the ego driving into a
stopped or slower actor, however slowly, or cutting across a crossing actor's path faster
than it closes, is the ego's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simforge_ros.core.values import ContactEvent  # re-exported: the engine reports these
from simforge_ros.engine.geometry import Box, boxes_overlap

EGO_ID = "ego"
EGO_STOPPED_MPS = 0.1


@dataclass(frozen=True)
class Body:
    """A footprint with its map-frame velocity, as seen by the contact test."""

    id: str
    box: Box
    vx_mps: float
    vy_mps: float


def is_harness_fault(ego: Body, other: Body) -> bool:
    """The blame rule in the module docstring, for a contact between the ego and ``other``."""
    ego_speed = math.hypot(ego.vx_mps, ego.vy_mps)
    other_speed = math.hypot(other.vx_mps, other.vy_mps)
    dx = ego.box.x_m - other.box.x_m
    dy = ego.box.y_m - other.box.y_m
    dist = math.hypot(dx, dy)
    if dist == 0.0:
        return ego_speed < EGO_STOPPED_MPS or other_speed > ego_speed
    other_closing = (other.vx_mps * dx + other.vy_mps * dy) / dist
    ego_closing = -(ego.vx_mps * dx + ego.vy_mps * dy) / dist
    if ego_speed < EGO_STOPPED_MPS:
        # the ego's only when it is the faster of the two and the one closing, faster: a car
        # cutting in that clipped an ego creeping at 1 mm/s (its centre past the ego's, it
        # "closes" at less than 0) was the ego's fault
        return not (other_speed < ego_speed and ego_closing > 0.0 and ego_closing > other_closing)
    return other_speed > ego_speed and other_closing > ego_closing


class ContactTracker:
    """Turns per-tick overlaps into start-of-contact events."""

    def __init__(self) -> None:
        self._touching: set[tuple[str, str]] = set()

    def update(self, tick: int, t_us: int, ego: Body, actors: list[Body]) -> list[ContactEvent]:
        """Events for pairs that overlap now and did not at the previous update."""
        pairs = [(ego, a) for a in actors]
        pairs += [(actors[i], actors[j]) for i in range(len(actors)) for j in range(i + 1, len(actors))]
        return self.update_pairs(tick, t_us, pairs)

    def update_pairs(self, tick: int, t_us: int, pairs: list[tuple[Body, Body]]) -> list[ContactEvent]:
        """update() given the pairs to test, in update()'s order (ego pairs first, in actor
        order, then actor pairs (i, j), i < j). A caller may leave out pairs it knows cannot
        overlap (e.g. rejected by the boxes_overlap radius test): a pair that does not overlap
        has no effect."""
        if not pairs and not self._touching:
            return []  # nothing overlaps and nothing did: no events, no state change
        now: set[tuple[str, str]] = set()
        events: list[ContactEvent] = []
        for a, b in pairs:
            if not boxes_overlap(a.box, b.box):
                continue
            key = (a.id, b.id)
            now.add(key)
            if key not in self._touching:
                fault = is_harness_fault(a, b) if a.id == EGO_ID else True
                events.append(ContactEvent(tick, t_us, a.id, b.id, fault))
        self._touching = now
        return events
