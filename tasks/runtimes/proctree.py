"""Ending a whole process tree that we started: SIGTERM to its process group and every descendant, then SIGKILL
after a grace period.

Some programs move children out of the group (BentoML's circus workers and Airflow's components call
setsid()), so the tree is snapshotted *before* signalling, from the leader's descendants and the group's
members, and its processes are signalled by PID. psutil.Process remembers each process's create time and
refuses to signal a PID that now belongs to someone else; only processes started after the leader count.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import psutil

POLL_S = 0.05
KILL_WAIT_S = 5.0


def is_running(pid: int, create_time: float) -> bool:
    """True when `pid` is still the (non-zombie) process created at `create_time` (`create_time_of`)."""
    try:
        proc = psutil.Process(pid)
        return abs(_since_boot(proc) - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError):  # ValueError: a negative pid (a handle's owner read from a label)
        return False


def create_time_of(pid: int) -> float:
    """When `pid` started, in seconds since the host booted; 0.0 when it is gone. Not psutil's create_time: that adds
    the boot time as the wall clock reads it now, which moves when a VM's clock is stepped (after a pause), and a
    process we started would no longer be known as ours (a dockerd started by `make test` was left running so)."""
    try:
        return _since_boot(psutil.Process(pid))
    except psutil.Error:
        return 0.0


def _since_boot(proc: psutil.Process) -> float:
    return proc.create_time() - psutil.boot_time()


def group_members(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return members


def group_alive(pgid: int) -> bool:
    return bool(pgid) and bool(group_members(pgid))


def descendants(pid: int, pgid: int, create_time: float) -> list[psutil.Process]:
    """Every descendant of the leader and of the group's members, started after the leader (so ours)."""
    roots = [pid] if is_running(pid, create_time) else []
    roots += [p for p in group_members(pgid) if p not in roots] if pgid else []
    found: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            children = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            try:
                if _since_boot(child) >= create_time - 0.01:
                    found.setdefault(child.pid, child)
            except psutil.Error:
                continue
    return list(found.values())


def tree_alive(tree: list[psutil.Process]) -> bool:
    for proc in tree:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def signal_tree(pgid: int, tree: list[psutil.Process], sig: int) -> None:
    if pgid:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in tree:
        try:
            proc.send_signal(sig)  # raises NoSuchProcess when the PID now belongs to another process
        except psutil.Error:
            continue


def terminate_tree(pid: int, pgid: int, create_time: float, grace_s: float,
                   reap: Callable[[], object] = lambda: None) -> None:
    """SIGTERM the group and the tree, wait up to `grace_s`, then SIGKILL what is left. `reap` is called while
    waiting (e.g. `Popen.poll`, so our own child does not linger as a zombie)."""
    if not (is_running(pid, create_time) or group_alive(pgid)):
        reap()
        return
    tree = descendants(pid, pgid, create_time)

    def alive() -> bool:
        reap()
        return group_alive(pgid) or tree_alive(tree) or is_running(pid, create_time)

    signal_tree(pgid, tree, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive() and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if alive():
        tree = list({p.pid: p for p in [*tree, *descendants(pid, pgid, create_time)]}.values())
        signal_tree(pgid, tree, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        while alive() and time.monotonic() < deadline:
            time.sleep(POLL_S)
    reap()
