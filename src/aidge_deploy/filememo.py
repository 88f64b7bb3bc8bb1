"""Facts derived from files, kept in the process while those files are unchanged.

A warm deploy asks the same questions of the same files every time: where the compiler is on
PATH, whether the QEMU plugin is built, what the layer headers say, what the export hashes
to. Each answer is kept with the *signature* of every file and folder it was derived from
(device, inode, size, mtime, ctime, mode) and served again only while one ``stat`` of each
still gives the same signature. Any write, rename into place, chmod or ``utime`` moves a
file's ctime (which, unlike mtime, no user can set: ``touch -d``, ``cp -p`` and ``tar`` set
mtime); adding, removing or renaming an entry moves its folder's. A missing path is a
signature too (``None``): its appearance invalidates the answer.

File times come from a coarse clock (a kernel tick; whole seconds on ext3 or HFS+, two on
FAT), so a file changed twice within one tick keeps its ctime. An answer is therefore kept
only when every file it was read from had last changed clearly before the stats were taken
(git's "racily clean" rule): ``SETTLED_NS`` after on a file system with sub-second times,
``SETTLED_COARSE_NS`` when the times are whole seconds. A file changed a moment ago is read
again each time until it settles.

Standard library only: the build system, the tool cache and the profiling readers use it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable, Iterable

#: (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns, st_mode); None: the path is missing
Signature = tuple[int, int, int, int, int, int] | None

#: how long before the stats a file must have last changed, with sub-second file times
SETTLED_NS = 100_000_000
#: the same for file systems that keep whole seconds (or two: FAT)
SETTLED_COARSE_NS = 3_000_000_000


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def signature(path: str) -> Signature:
    """``path``'s signature (symbolic links followed), None when it cannot be stat'ed."""
    try:
        return signature_of(os.stat(path))
    except OSError:
        return None


def settled(sig: Signature, since_ns: int) -> bool:
    """Whether a file with ``sig`` had last changed long enough before ``since_ns`` (the
    wall-clock time taken just before its stat) that a later change cannot keep its times."""
    if sig is None:
        return True
    changed = max(sig[3], sig[4])
    margin = SETTLED_COARSE_NS if sig[4] % 1_000_000_000 == 0 else SETTLED_NS
    return changed < since_ns - margin


class FileMemo[K: Hashable, V]:
    """The last ``kept`` answers stored, by key, each served while its files' signatures hold.

    Take ``time.time_ns()`` first, then the signatures, then read the files and ``put`` the
    answer: a change after the signatures were taken is then always seen.
    """

    def __init__(self, kept: int = 32) -> None:
        self._kept = kept
        self._answers: dict[K, tuple[V, tuple[tuple[str, Signature], ...]]] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The answer kept for ``key`` if every file it came from is unchanged, else None."""
        kept = self._answers.get(key)
        if kept is None:
            return None
        value, files = kept
        for path, sig in files:
            if signature(path) != sig:
                with self._lock:
                    if self._answers.get(key) is kept:
                        del self._answers[key]
                return None
        return value

    def put(self, key: K, value: V, files: Iterable[tuple[str, Signature]], since_ns: int) -> None:
        """Keep ``value`` for ``key``, derived from ``files`` as signed at ``since_ns``;
        nothing is kept while one of them may still change within its time's resolution."""
        files = tuple(files)
        with self._lock:  # deploys may run in threads of one process
            self._answers.pop(key, None)
            if not all(settled(sig, since_ns) for _, sig in files):
                return
            self._answers[key] = (value, files)
            while len(self._answers) > self._kept:
                del self._answers[next(iter(self._answers))]

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


__all__ = ["FileMemo", "Signature", "settled", "signature", "signature_of"]
