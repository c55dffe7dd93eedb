"""Topic and service names: one place, so nodes, recorder, verify and launch files agree."""

from __future__ import annotations

CLOCK = "/clock"
TIMING = "/simforge/timing"
ACTION = "/simforge/action"
APPLIED = "/simforge/applied_action"
STATE = "/simforge/state"
CONTACTS = "/simforge/contacts"
# nav_msgs/Odometry, from the bridge once a step when sim_bridge.odometry is on: the same
# ego state in a standard type (recorded, never chained: /simforge/state is)
ODOM = "/simforge/odom"
# simforge_ros/GroundTruth, from the bridge once a step when sim_bridge.ground_truth is on:
# every scripted actor and signal at the step's time (recorded, never chained)
GROUND_TRUTH = "/simforge/ground_truth"
# visualization_msgs/MarkerArray, from the bridge once a step when sim_bridge.markers is on:
# the actors' boxes and the signals' states for RViz or Foxglove (recorded, never chained)
MARKERS = "/simforge/markers"
# tf2_msgs/TFMessage, from the bridge: map_frame -> base_frame once a step (sim_bridge.tf),
# and base_frame -> each rendered camera's frame once, latched (sim_bridge.camera_tf)
TF = "/tf"
TF_STATIC = "/tf_static"
STATUS = "/simforge/status"
NODE_PARAMS = "/simforge/node_params"
# std_msgs/UInt64: steps the recorder has chained so far (wall-clock paced, never recorded);
# the clock master keeps its lead over the recorder bounded with it (core.backlog)
RECORDED = "/simforge/recorded"
# std_msgs/String, latched: why the recorder could not write the run's record (a full
# disk); the clock master refuses the run at its next step instead of running on unrecorded
RECORDER_FAILURE = "/simforge/recorder_failure"
# published latched (transient local, depth 16): a reader that comes later gets them too
LATCHED = (STATUS, NODE_PARAMS)
# published once a step, all by the clock master: what a recorder must hear from the start
STEP_TOPICS = (CLOCK, TIMING, ACTION, APPLIED, STATE)

STEP_SERVICE = "/simforge/step"
DECIDE_SERVICE = "/simforge/decide"


def requests_topic(service: str) -> str:
    """The DDS topic a server of ``service`` reads requests on (rmw's mangling: ``rq`` +
    name + ``Request``): the graph lists that reader with its node's name, and discovery
    announces it after the node's earlier readers."""
    return f"rq{service}Request"


FINISH_SERVICE = "/simforge/finish"
# std_srvs/SetBool on the clock master: true holds the run before its next step (the world
# stays at the last step's time, its records out), false lets it go on; wall time only
PAUSE_SERVICE = "/simforge/pause"
# std_srvs/Trigger on the clock master: a held run does one more step, then holds again
ADVANCE_SERVICE = "/simforge/advance"


def image_topic(camera: str) -> str:
    """sensor_msgs/Image of one camera; header.stamp is the exact sim time of the frame."""
    return f"/simforge/camera/{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    """sensor_msgs/CameraInfo of one camera, stamped like its image."""
    return f"/simforge/camera/{camera}/camera_info"
