"""What the launch file tells the participants it starts, and how they take a Ctrl-C there.

A module of its own, importing nothing: both the launch plan and every node process read
it (nodes.common.run_participant, launch/simforge.launch.py).
"""

UNDER_LAUNCH_ENV = "SIMFORGE_UNDER_LAUNCH"
"""Set to 1 by the launch file for the participants it starts (bridge, driver, recorder):
a first Ctrl-C leaves them serving until the clock master has ended the run."""

LAUNCH_INTERRUPT_S = 10.0
"""Wall clock: how long a participant under launch serves after a Ctrl-C for the clock
master to end the run (a second one, or SIGTERM, stops it at once); launch's SIGTERM comes
after it (the launch file's sigterm_timeout)."""
