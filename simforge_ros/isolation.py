"""Give every run and every test its own DDS world: a leased ROS_DOMAIN_ID, localhost-only
discovery and a private ROS log directory; when the lease ends, what its killed processes
left in shared memory is removed (see shm_cleanup).

Two runs that share a domain see each other's topics and services; a lockstep loop would
then step on another run's clock. A domain is leased with an exclusive file lock, so that
concurrent test sessions and runs on one machine never pick the same id; the lease ends
with the process that holds it, even after a crash. A user's ROS_DOMAIN_ID is honoured.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from simforge_ros.core.errors import SimforgeError
from simforge_ros.shm_cleanup import remove_zombies

# One place for the whole machine, whatever TMPDIR says: DDS domains are the machine's,
# and a shell with a TMPDIR of its own (pam_tmpdir, a CI job's) held its leases apart, so
# a second run in the same ROS_DOMAIN_ID broke the first ("2 nodes serve /simforge/step").
LOCK_DIR = Path("/tmp") / "simforge-domains"
# Fast DDS maps a domain to UDP ports 7400 + 250 * id; ids above 232 overflow the port range.
DOMAIN_RANGE = range(1, 200)


class NoFreeDomain(SimforgeError):
    """Every domain a lease may take is in use (said as "simforge: ...", exit 1; it was an
    "unexpected error: RuntimeError", and a run directory was left holding only params.yaml)."""


@dataclass(frozen=True)
class DomainLease:
    """A ROS domain held for the life of a run; ``env`` is what child processes inherit."""

    domain_id: int
    log_dir: Path
    env: Mapping[str, str]


def _open_lock(path: Path) -> int:
    """A lock file every user of this machine can open: two users' runs share localhost
    discovery, so they must share the leases too. The directory is made like /tmp
    (world-writable, sticky) and each file read-write for all by whoever creates it; a file
    made 0644 by another user's older simforge could not be opened here (PermissionError).

    Raises:
        ConfigError: the file exists and this user may not open it (it names the file).
    """
    from simforge_ros.core.errors import ConfigError

    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # only its owner may (who made it, maybe an older simforge)
        os.chmod(LOCK_DIR, 0o1777)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        raise ConfigError.single("ROS_DOMAIN_ID", "lock file", "a file every user may open (remove it, or ask "
                                 "its owner to: it only holds a lease while a run lasts)", str(path)) from None
    with contextlib.suppress(OSError):  # only the owner may; the umask took the others' bits
        os.fchmod(fd, 0o666)
    return fd


def _try_lock(domain_id: int) -> IO[str] | None:
    handle = os.fdopen(_open_lock(LOCK_DIR / f"{domain_id}.lock"), "w")  # held for the lease
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _held_for_a_run(domain_id: int) -> bool:
    """Whether a run or play holds ``domain_id`` (see hold_domain): a user's ROS_DOMAIN_ID
    is not leased, so a free lease can still be a domain someone runs in by hand."""
    path = LOCK_DIR / f"{domain_id}.run"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also lets go of the probe's own shared lock
    return False


def domain_holder(domain_id: int) -> str | None:
    """Who holds ``domain_id`` for a run or a play (hold_domain's "simforge run RUN_ID
    (pid N)"), None when no one does."""
    if not _held_for_a_run(domain_id):
        return None
    try:
        return (LOCK_DIR / f"{domain_id}.run").read_text(errors="replace").strip() or "another process"
    except OSError:
        return "another process"


PARTICIPANT_IDS_PROBED = 10
"""How many of a domain's participant ids ``_has_participants`` looks at: Fast DDS gives a
new participant the lowest free one."""


def _has_participants(domain_id: int) -> bool:
    """Whether a DDS participant on this host is in ``domain_id``: a node someone started
    by hand with that ROS_DOMAIN_ID (an external driver left running, a viewer) holds no
    lease, and a run leased there had its Decide calls answered by it. Each participant
    binds its metatraffic unicast port, 7410 + 250 * domain + 2 * participant id (the RTPS
    port mapping), so a port that cannot be bound is a participant.

    Within Linux's ephemeral range (32768-60999 here: from domain 102 up), where every DDS
    participant on the host binds sockets of its own to port 0, one busy port alone is not:
    one of those made a free domain look taken, once in some hundreds of checks (a CI run's
    lease test), so there the user unicast port above it must be bound too, as every builtin
    transport binds it. Below the range one port is enough (a participant whose user port
    moved, or with none, is still seen)."""
    import socket

    def busy(port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                return True
        return False

    low, high = _ephemeral_ports()
    for participant in range(PARTICIPANT_IDS_PROBED):
        metatraffic = 7410 + 250 * domain_id + 2 * participant
        if busy(metatraffic) and (not low <= metatraffic <= high or busy(metatraffic + 1)):
            return True
    return False


def _ephemeral_ports() -> tuple[int, int]:
    """The ports the kernel hands a socket bound to port 0 (Linux's defaults where unread)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


LEASED_WHEN_UNSET = "unset: simforge leases a free one"
"""How a run or the bench picks its domain, said in a refusal of the domain it was given."""


@contextmanager
def hold_domain(domain_id: int, who: str, when_unset: str = LEASED_WHEN_UNSET) -> Iterator[None]:
    """Hold ``domain_id`` for one run (or one ``simforge play``) while it lasts.

    Two runs in one domain answer each other's requests and record each other's /clock;
    both were refused, but by symptoms ("two nodes serve /simforge/decide", "step 1
    requested after step 5") that did not name the cause. A leased domain is already
    exclusive; this also covers a user's ROS_DOMAIN_ID, given to two runs at once. The lock
    file says who holds it, and the lock ends with the process, even after a crash.

    Raises:
        ConfigError: another run or play on this machine holds the domain (nothing is
            started or written); ``when_unset`` says which domain the command takes
            without ROS_DOMAIN_ID.
    """
    from simforge_ros.core.errors import ConfigError

    fd = _open_lock(LOCK_DIR / f"{domain_id}.run")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        owner = os.read(fd, 4096).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise ConfigError.single(
            "environment", "ROS_DOMAIN_ID",
            f"a domain no other simforge run or play on this machine is in ({when_unset})",
            f"{domain_id}, held by {owner}") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{who} (pid {os.getpid()})".encode())
        yield
    finally:
        os.close(fd)


MAX_DOMAIN_ID = 232
"""Fast DDS maps domain d to UDP ports from 7400 + 250 * d: past 232 there are none."""


def user_domain(text: str) -> int:
    """The user's ROS_DOMAIN_ID, checked: an id Fast DDS has ports for.

    Raises:
        ConfigError: not an integer from 0 to MAX_DOMAIN_ID in plain decimal digits (Fast
            DDS failed with "port number is too high" on 500; "abc" ended in an unexpected
            error). rcl reads the variable with strtoul(..., 0), which Python's int() does
            not match: "4_2" was domain 42 to the run and 4 to a user's node, "010" 10 and
            8, so only the spelling both read alike is taken.
    """
    from simforge_ros.core.errors import ConfigError

    plain = text.strip()
    value = int(plain) if re.fullmatch(r"0|[1-9][0-9]{0,2}", plain, flags=re.ASCII) else -1
    if not 0 <= value <= MAX_DOMAIN_ID:
        raise ConfigError.single("environment", "ROS_DOMAIN_ID", f"an integer from 0 to {MAX_DOMAIN_ID} in decimal "
                                 "digits, no leading zero (unset: simforge leases a free one)", text)
    return value


def installed_rmws() -> list[str]:
    """The RMW implementations installed here (this environment's ament index and any on
    AMENT_PREFIX_PATH): from the PyPI wheels, rmw_fastrtps_cpp only."""
    prefixes = [sys.prefix, *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))]
    names: set[str] = set()
    for prefix in prefixes:
        index = Path(prefix) / "share" / "ament_index" / "resource_index" / "rmw_typesupport"
        if index.is_dir():
            names |= {p.name for p in index.iterdir() if p.name != "rmw_implementation"}
    return sorted(names)


def check_rmw() -> None:
    """A user's RMW_IMPLEMENTATION must be installed: rcl otherwise ends the process itself
    (exit 102, "Expected RMW implementation identifier of ..."), the CLI with it.

    Raises:
        ConfigError: RMW_IMPLEMENTATION names an RMW that is not installed.
    """
    from simforge_ros.core.errors import ConfigError

    given = os.environ.get("RMW_IMPLEMENTATION", "").strip()
    known = installed_rmws()
    if given and known and given not in known:
        raise ConfigError.single("environment", "RMW_IMPLEMENTATION",
                                 f"an RMW installed here: {', '.join(known)} (or unset)", given)


DISCOVERY_VAR = "ROS_AUTOMATIC_DISCOVERY_RANGE"
DISCOVERY_RANGES = ("LOCALHOST", "SUBNET")
"""What a run's nodes may discover on: LOCALHOST (unset), or SUBNET when the user asks, to
reach a driver (an ECU) or a viewer on another machine. OFF and SYSTEM_DEFAULT are not
offered: the first leaves the nodes blind to each other, the second is the middleware's
guess."""


def discovery_range(environ: Mapping[str, str] | None = None) -> str:
    """The discovery range a run's nodes use, from the user's ROS_AUTOMATIC_DISCOVERY_RANGE:
    LOCALHOST when unset. SUBNET needs a ROS_DOMAIN_ID of the user's own: a leased domain
    is free of runs on this machine only, and two machines' runs in one domain answer each
    other's requests.

    Raises:
        ConfigError: a range other than DISCOVERY_RANGES, or SUBNET with no ROS_DOMAIN_ID.
    """
    from simforge_ros.core.errors import ConfigError

    env = os.environ if environ is None else environ
    given = env.get(DISCOVERY_VAR, "").strip()
    if not given:
        return "LOCALHOST"
    if given.upper() not in DISCOVERY_RANGES:
        raise ConfigError.single("environment", DISCOVERY_VAR, "LOCALHOST (the default) or SUBNET (to reach "
                                 "a driver or a viewer on another machine)", given)
    if given.upper() == "SUBNET" and not env.get("ROS_DOMAIN_ID", "").strip():
        raise ConfigError.single("environment", "ROS_DOMAIN_ID", f"a domain of your own with {DISCOVERY_VAR}=SUBNET "
                                 "(one leased here is free of runs on this machine only)", "unset")
    return given.upper()


def tool_discovery_range(unset_as: str | None = "LOCALHOST") -> str | None:
    """The discovery range of a tool that joins a domain (`simforge pause` a run's, `play`
    the user's), from ROS_AUTOMATIC_DISCOVERY_RANGE checked as `simforge run` checks it,
    and set in this process's environment for rclpy; unset, ``unset_as`` (None: ROS's own
    default). OFF or a misspelling made `pause` wait out its limit and say no run was
    there, beside a run held there.

    Raises:
        ConfigError: a range other than DISCOVERY_RANGES.
    """
    from simforge_ros.core.errors import ConfigError

    given = os.environ.get(DISCOVERY_VAR, "").strip().upper() or unset_as
    if given is None:
        return None
    if given not in DISCOVERY_RANGES:
        raise ConfigError.single("environment", DISCOVERY_VAR, "LOCALHOST or SUBNET, as a run's nodes take it",
                                 os.environ.get(DISCOVERY_VAR))
    os.environ[DISCOVERY_VAR] = given
    return given


def ros_env(domain_id: int, log_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an isolated ROS process."""
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env[DISCOVERY_VAR] = "LOCALHOST"
    env["ROS_LOG_DIR"] = str(log_dir)
    env["ROS_HOME"] = str(log_dir)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return env


@contextmanager
def lease_domain(log_dir: Path | None = None) -> Iterator[DomainLease]:
    """Lease a free ROS_DOMAIN_ID (or the user's own) and a log dir for one run or test.

    Raises:
        ConfigError: the user's ROS_DOMAIN_ID is not a domain id.
        NoFreeDomain: every domain in DOMAIN_RANGE is held by another run, or nodes are in it.
    """
    user = os.environ.get("ROS_DOMAIN_ID", "").strip()
    candidates = [user_domain(user)] if user else list(DOMAIN_RANGE)
    start = os.getpid() % len(candidates)
    handle = None
    chosen = -1
    for i in range(len(candidates)):
        domain_id = candidates[(start + i) % len(candidates)]
        if user:
            chosen = domain_id  # honoured as given, shared at the user's wish
            break
        handle = _try_lock(domain_id)
        if handle is not None and (_held_for_a_run(domain_id) or _has_participants(domain_id)):
            handle.close()  # a user's ROS_DOMAIN_ID, in use by a run or by nodes of their own
            handle = None
        if handle is not None:
            chosen = domain_id
            break
    if chosen < 0:
        raise NoFreeDomain(f"no free ROS domain id in {DOMAIN_RANGE.start}..{DOMAIN_RANGE.stop - 1}: each is held by "
                           "another run, or DDS participants on this machine are in it; wait for a run to end, or "
                           "give the run a domain of your own (ROS_DOMAIN_ID, 0..232)")
    own_tmp = None
    if log_dir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="simforge-ros-log-")
        log_dir = Path(own_tmp.name)
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        yield DomainLease(chosen, log_dir, ros_env(chosen, log_dir))
    finally:
        # what killed participants left in shared memory: this lease's, and any earlier
        # one's that never ended (its `simforge run` killed too; see shm_cleanup)
        remove_zombies()
        if handle is not None:
            handle.close()
        if own_tmp is not None:
            own_tmp.cleanup()


@contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in os.environ for the duration, then what was there before (a run or a
    salvage in this process sets its own log directory and discovery range)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
