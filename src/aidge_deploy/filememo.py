"""Facts derived from files, kept in the process while those files are unchanged.

A warm deploy asks the same questions of the same files every time: whether the QEMU plugin
is built, what the layer headers and the firmware's symbols say, what the export hashes to,
whether its build is in the cache. Each answer is kept with the *signature* of every file and folder it was derived from
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

``FileMemo.answer(key, derive)`` does it in the one safe order: the clock first, then each
file's signature as ``derive`` names it through ``Reads.sign`` (before reading it), then the
answer. Standard library only: the build system, the tool cache and the profiling readers
use it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable

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


class Reads:
    """The files an answer is derived from, each signed before it is read."""

    def __init__(self) -> None:
        self.files: list[tuple[str, Signature]] = []
        self.kept = True

    def sign(self, path: str | os.PathLike[str]) -> Signature:
        """Sign ``path`` (call it before reading the file or listing the folder)."""
        name = os.fspath(path)
        sig = signature(name)
        self.files.append((name, sig))
        return sig

    def signed(self, path: str, sig: Signature) -> None:
        """Record a signature the caller took itself (a walk's ``DirEntry.stat``)."""
        self.files.append((path, sig))

    def forget(self) -> None:
        """Keep nothing of this answer (it does not depend on files alone)."""
        self.kept = False


class FileMemo[K: Hashable, V]:
    """The last ``kept`` answers stored, by key, each served while its files' signatures hold.

    With ``put``, take ``time.time_ns()`` first, then the signatures, then read the files:
    a change after the signatures were taken is then always seen (``answer`` does so).
    """

    def __init__(self, kept: int = 32) -> None:
        self._kept = kept
        self._answers: dict[K, tuple[V, tuple[tuple[str, Signature], ...]]] = {}
        self._lock = threading.Lock()

    def answer(self, key: K, derive: Callable[[Reads], V]) -> V:
        """The answer kept for ``key`` if its files are unchanged, else ``derive(reads)``'s,
        kept with the files it named through ``reads.sign`` (unless it called
        ``reads.forget()``). An exception of ``derive`` keeps nothing."""
        kept = self._answers.get(key)
        if kept is not None and self._valid(key, kept):
            return kept[0]
        since = time.time_ns()
        reads = Reads()
        value = derive(reads)
        if reads.kept:
            self.put(key, value, reads.files, since)
        return value

    def get(self, key: K) -> V | None:
        """The answer kept for ``key`` if every file it came from is unchanged, else None."""
        kept = self._answers.get(key)
        return kept[0] if kept is not None and self._valid(key, kept) else None

    def _valid(self, key: K, kept: tuple[V, tuple[tuple[str, Signature], ...]]) -> bool:
        for path, sig in kept[1]:
            if signature(path) != sig:
                with self._lock:
                    if self._answers.get(key) is kept:
                        del self._answers[key]
                return False
        return True

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


__all__ = ["FileMemo", "Reads", "Signature", "settled", "signature", "signature_of"]
