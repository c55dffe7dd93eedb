"""`simforge pause --run RUN_DIR` finds the run's domain in its directory, and holds that
run only: a run killed before its manifest leaves its directory as it was, and its domain
may be another run's by now (an audit held an unrelated run that way)."""

from __future__ import annotations

from pathlib import Path

from simforge_ros.isolation import _held_for_a_run, hold_domain
from simforge_ros.pause_client import main
from simforge_ros.record.rundir import DOMAIN


def _run_dir(tmp_path: Path, name: str, domain: int) -> Path:
    run = tmp_path / name
    (run / DOMAIN).parent.mkdir(parents=True)
    (run / DOMAIN).write_text(f"{domain}\n")
    return run


def test_a_run_whose_domain_no_run_holds_is_no_run_going_on(tmp_path, capsys):
    domain = next(d for d in range(200, 232) if not _held_for_a_run(d))
    run = _run_dir(tmp_path, "right_turn-s0-00-dead01", domain)
    assert main(["--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert err == (f"simforge pause: --run: run: expected the directory of a run still going on (no run holds its "
                   f"ROS_DOMAIN_ID={domain}: it was stopped before writing its manifest.json; `simforge salvage` "
                   f"keeps what it recorded), got '{run}'\n")


def test_a_domain_another_run_holds_now_is_not_touched(tmp_path, capsys):
    domain = next(d for d in range(200, 232) if not _held_for_a_run(d))
    run = _run_dir(tmp_path, "right_turn-s0-00-dead02", domain)
    with hold_domain(domain, "simforge run right_turn-s0-00-other1"):
        assert main(["--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"(its ROS_DOMAIN_ID={domain} is now simforge run right_turn-s0-00-other1 (pid " in err


def test_a_domain_file_that_is_no_domain_is_the_runs_not_the_environments(tmp_path, capsys):
    """'abc' there was said as the environment's ROS_DOMAIN_ID ("unset: simforge leases a
    free one"), and a FIFO there hung it."""
    import os

    run = _run_dir(tmp_path, "r", 0)
    (run / DOMAIN).write_text("abc\n")
    assert main(["--run", str(run)]) == 2
    assert capsys.readouterr().err == (f"simforge pause: --run: run: expected the directory of a run `simforge run` "
                                       f"started ({DOMAIN}: expected a domain from 0 to 232, got 'abc'), got "
                                       f"'{run}'\n")
    (run / DOMAIN).unlink()
    os.mkfifo(run / DOMAIN)
    assert main(["--run", str(run)]) == 2
    assert "(logs/ros_domain_id: not a regular file)" in capsys.readouterr().err
