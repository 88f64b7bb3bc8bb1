"""Small C helpers compiled once per source version into the cache.

The emulated-PMU QEMU plugin and the ``perf_run`` launcher ship as C sources; they are
built with the machine's (or a cross) compiler on first use. The cache key hashes the
sources, the compiler and the flags, and the build renames a temporary file into place,
so concurrent first uses (parallel test workers) are safe.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from aidge_deploy.cachedir import default_cache_root
from aidge_deploy.connections.local_process import run_captured
from aidge_deploy.errors import BuildError, PreflightError
from aidge_deploy.filememo import FileMemo, Reads
from aidge_deploy.pathsearch import which
from aidge_deploy.readiness import ToolCheck

#: outputs built, by (name, sources, compiler, flags, suffix, output folder)
_BUILT: FileMemo[tuple[str, tuple[str, ...], str, tuple[str, ...], str, str], Path] = FileMemo()


def find_c_compiler(explicit: str | None = None, *, purpose: str) -> str:
    """The first C compiler found among ``explicit``, ``$CC``, ``cc`` and ``gcc``."""
    for name in (explicit, os.environ.get("CC"), "cc", "gcc"):
        found = which(name) if name else None
        if found:
            return found
    raise PreflightError(
        f"No C compiler found to build {purpose}",
        hint="apt-get install --no-install-recommends gcc (or set CC).",
    )


def c_compiler_check(purpose: str) -> ToolCheck:
    """``find_c_compiler`` as a check (``doctor``, Preflight): the compiler, or how to get one."""
    try:
        return ToolCheck("C compiler", True, f"{find_c_compiler(purpose=purpose)} ({purpose})")
    except PreflightError as exc:
        return ToolCheck("C compiler", False, f"not found (for {purpose})", exc.hint)


def compile_cached(
    name: str,
    sources: Sequence[Path],
    compiler: str,
    flags: Sequence[str],
    *,
    suffix: str = "",
    cache_root: Path | None = None,
    timeout_s: float = 120.0,
) -> Path:
    """Compile and link the ``.c`` files of ``sources`` (the others are hashed headers)
    into one output, unless that exact set of sources, compiler and flags is cached.

    The answer is kept for the process while the sources and the output are unchanged
    (``filememo``): later calls stat them instead of reading and hashing the sources.
    """
    out_dir = (cache_root or default_cache_root()) / "tools"
    key = (name, tuple(map(str, sources)), compiler, tuple(flags), suffix, str(out_dir))

    def derive(reads: Reads) -> Path:
        for src in sources:
            reads.sign(src)
        digest = hashlib.sha256()
        for src in sources:
            digest.update(src.name.encode() + b"\0" + src.read_bytes())
        digest.update(compiler.encode() + b"\0" + " ".join(flags).encode())
        target = out_dir / f"{name}-{digest.hexdigest()[:16]}{suffix}"
        if not target.is_file():
            _compile(name, sources, compiler, flags, suffix, out_dir, target, timeout_s)
        reads.sign(target)
        return target

    return _BUILT.answer(key, derive)


def _compile(
    name: str,
    sources: Sequence[Path],
    compiler: str,
    flags: Sequence[str],
    suffix: str,
    out_dir: Path,
    target: Path,
    timeout_s: float,
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}-", suffix=suffix, dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        includes = sorted({f"-I{src.parent}" for src in sources})
        proc = run_captured(
            [
                compiler,
                *flags,
                *includes,
                "-o",
                str(tmp),
                *(str(s) for s in sources if s.suffix == ".c"),
            ],
            timeout_s=timeout_s,
        )
        if proc.returncode != 0:
            raise BuildError(
                f"Building {name} failed:\n{proc.stderr.strip()[-2000:]}",
                hint=f"Check the C compiler ({compiler}); {name} needs only libc.",
            )
        tmp.chmod(0o755)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
