"""The `simforge` command's entry point, apart from the CLI so that its imports are inside it.

The CLI's imports (numpy, yaml, the runner's) take about a quarter of a second. A Ctrl-C
in them is said as an interrupt anywhere else in the command is, one line and status 130,
not as Python's KeyboardInterrupt traceback.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT, as the CLI's own "interrupted" exit


def main() -> int:
    try:
        from simforge_ros.process_tuning import tolerate_dependency_warnings

        tolerate_dependency_warnings()  # the tools that read bags build ROS messages too
        from simforge_ros.cli import main as cli_main
    except KeyboardInterrupt:
        print("simforge: interrupted", file=sys.stderr)
        return INTERRUPTED
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
