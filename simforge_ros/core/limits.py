"""The ranges every input is held to, in one place: the scenario schema, the nodes'
parameters and the fault specs refuse a value past them naming its field.

Past these the arithmetic breaks instead of the contract: a coordinate of 1e308 drew as
infinity, a seed of -1 failed inside rclpy's message code, a typo'd image width rendered
gigabytes a step.
"""

from __future__ import annotations

INT64 = (-(2**63), 2**63 - 1)
"""ROS 2 integer parameters are int64 (the seeds travel as uint64 in Step and Decide)."""

MAX_STAMP_US = (2**31 - 1) * 1_000_000 + 999_999
"""The last time a message can carry: builtin_interfaces/Time's ``sec`` is int32 (68 years);
a run past it wrapped its /clock and stamps to negative seconds without a word."""

UINT32_MAX = 2**32 - 1
"""StepTiming.ticks_per_step is uint32: a step of 2^32 + 5 ticks was recorded as 5."""

MAX_MAGNITUDE = 1_000_000.0
"""Any physical number of a scene or a fault: metres, m/s, radians."""

MAX_TIME_US = 86_400_000_000
"""A day: any time or time offset in a scenario or a fault."""

IMAGE_SIDE = (2, 8192)
"""Camera image width and height in pixels: the renderer needs 2, 8192 is an 8K frame."""

PLANNER_SAMPLES = (1, 1024)
"""The torch planner's trajectory samples a call: 10^8 asked torch for 51 GB at once."""

TORCH_THREADS = (1, 256)
"""torch's intra-op threads for a deterministic planner: 100 000 ended the process (SIGSEGV)."""

PROBE_CALLS = (1, 1_000_000)
"""`simforge probe-driver --calls`: 10^20 ran on, its list of plans growing, until killed."""
