"""Atomic, durable file writes that honour the umask and clean up after killed writers.

`atomic_write(path, data)` writes ``data`` to a temporary file in the same folder, fsyncs it,
renames it over ``path`` (``os.replace``: readers see the old file or the new one, never a part)
and fsyncs the folder so the rename survives a power cut. The temporary file is created with mode
``0o666`` minus the process umask, exactly like ``open(path, "w")`` would create ``path``.

A writer killed between creating its temporary file and the rename leaves the temporary behind.
Temporaries are named ``.<name>.<host>.<pid>.<random>.tmp``, so the next write to the same folder
removes those of ``<name>`` whose writer is provably gone: same host and no process ``<pid>``, or
(another host, which we cannot ask) older than `STALE_AFTER_S`. A concurrent writer's temporary is
never touched. "Same host" means the same process-ID space, not just the same host name: ``<host>``
is the host name plus, on Linux, the kernel's boot id and the PID namespace, so two containers
sharing a volume (even with one host name) never judge each other's process IDs; each treats the
other's temporaries as another host's and leaves them for `STALE_AFTER_S`.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> atomic_write(os.path.join(folder, "a.bin"), b"hello")
>>> sorted(os.listdir(folder)), open(os.path.join(folder, "a.bin"), "rb").read()
(['a.bin'], b'hello')
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

__all__ = ["atomic_write", "remove_stale_temporaries", "STALE_AFTER_S"]

STALE_AFTER_S = 24 * 3600.0  # a temporary of another host older than this is abandoned
_SUFFIX = ".tmp"


def _host() -> str:
    """This process's ID space: host name, and on Linux the boot id and PID namespace (a process ID
    means the same process only within one namespace of one running kernel)."""
    name = socket.gethostname().replace(".", "_") or "localhost"
    return "-".join([name, *_pid_space()])


def _pid_space() -> tuple[str, ...]:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:16]
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # not Linux: the host name alone
        return ()
    return (f"b{boot}", f"ns{namespace}")


def _temporary_name(name: str) -> str:
    return f".{name}.{_host()}.{os.getpid()}.{secrets.token_hex(6)}{_SUFFIX}"


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return True  # cannot tell: keep the file
    return True


def _parse(tmp_name: str) -> tuple[str, str, int] | None:
    """(target name, host, pid) of one of our temporaries, None for any other file."""
    if not (tmp_name.startswith(".") and tmp_name.endswith(_SUFFIX)):
        return None
    parts = tmp_name[1 : -len(_SUFFIX)].rsplit(".", 3)  # name, host, pid, random
    if len(parts) != 4 or not parts[0] or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def _is_stale(tmp: Path, host: str, pid: int, now: float) -> bool:
    """Whether `tmp`, written by process `pid` on `host`, is abandoned (see the module docstring)."""
    if host == _host():
        return pid != os.getpid() and not _process_alive(pid)
    try:
        return now - tmp.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def remove_stale_temporaries(path: str | os.PathLike, every_name: bool = False) -> list[Path]:
    """Delete the abandoned temporaries of ``path`` left by killed writers (with ``every_name``:
    those of every file in the folder ``path``); returns what was removed."""
    path = Path(path)
    folder = path if every_name else path.parent
    if not folder.is_dir():
        return []
    now, removed = time.time(), []
    for tmp in folder.glob(f".*{_SUFFIX}"):
        parsed = _parse(tmp.name)
        if parsed is None or (not every_name and parsed[0] != path.name):
            continue
        if _is_stale(tmp, parsed[1], parsed[2], now):
            try:
                tmp.unlink()
            except OSError:  # another writer cleaned it first, or a read-only folder: leave it
                continue
            removed.append(tmp)
    return removed


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically and durably (see the module docstring). Through a
    symbolic link the link's target is replaced, and the link stays."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = path.parent / _temporary_name(path.name)
    # mode 0o666 is reduced by the umask, as for any new file (mkstemp would force 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_folder(path.parent)
