"""Stand-in for launch_ros (test double; see ../README.md)."""
