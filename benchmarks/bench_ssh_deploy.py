"""``deploy()`` over ``ssh`` to the loopback test board against the bare OpenSSH baseline.

Bare baseline: the same work done by hand with the OpenSSH client CLI — ``scp -r`` of the
export, one ``ssh`` running the same CMake configure + build on the board, one ``ssh`` running
the program (``-o ControlMaster=no``, the board's key and known_hosts). Cold deploy: a fresh
copy of the export (its own remote folder, so everything is uploaded and built). Warm: a
re-deploy of the unchanged export, which must upload nothing and not rebuild.
Target: cold <= 1.2x bare. The board is the sshd fixture of ``tests/boards.py`` (imported).
Run: ``python benchmarks/bench_ssh_deploy.py [repeats]`` (needs /usr/sbin/sshd; root for the
``pi`` board user, otherwise the current user logs in).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aidge_deploy
from aidge_deploy.backendoptions import SshOptions
from aidge_deploy.progress import ProgressUpdate
from aidge_deploy.results import BuildStatus
from common import make_export, median_of, report, timed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from boards import SshBoard, start_ssh_board  # the test boards themselves, not a copy


def ssh_options(board: SshBoard) -> list[str]:
    return [
        "-o",
        "ControlMaster=no",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={board.known_hosts_path}",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        str(board.key_path),
        "-F",
        "/dev/null",
    ]


def bare(board: SshBoard, export_dir: Path, remote: str) -> None:
    """scp + ssh (configure and build) + ssh (run): what a user would type."""
    target = f"{board.user}@{board.host}"
    options = ssh_options(board)
    subprocess.run(
        ["ssh", *options, "-p", str(board.port), target, f"mkdir -p {remote}"],
        check=True,
        timeout=60,
    )
    subprocess.run(
        [
            "scp",
            *options,
            "-q",
            "-r",
            "-P",
            str(board.port),
            str(export_dir),
            f"{target}:{remote}/",
        ],
        check=True,
        timeout=300,
    )
    src = f"{remote}/{export_dir.name}"
    build = (
        f"cmake -S {src} -B {src}/build -DAIDGE_CMP=false -DCMAKE_BUILD_TYPE=Release "
        f"&& cmake --build {src}/build --parallel $(nproc)"
    )
    subprocess.run(
        ["ssh", *options, "-p", str(board.port), target, build],
        check=True,
        timeout=600,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["ssh", *options, "-p", str(board.port), target, f"cd {src} && ./build/run_export"],
        check=True,
        timeout=120,
        capture_output=True,
    )


def deploy_config(board: SshBoard) -> aidge_deploy.DeployConfig:
    return aidge_deploy.DeployConfig(
        target="raspberrypi",
        backend="ssh",
        ssh_host=board.host,
        ssh_port=board.port,
        ssh_user=board.user,
        ssh_key_path=board.key_path,
        ssh_known_hosts_path=board.known_hosts_path,
        backend_options=(SshOptions(config_path=None, allow_agent=False),),
    )


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name, start_ssh_board(name="bench") as board:
        tmp = Path(tmp_name)
        artifact = make_export(tmp, target="raspberrypi", nb_iterations=20)
        source = Path(artifact.path)  # type: ignore[attr-defined]
        config = deploy_config(board)
        home = board.run_as_user("echo $HOME").stdout.strip()
        bare_s: list[float] = []
        cold_s: list[float] = []
        warm_s: list[float] = []
        warm_uploads: list[str] = []
        warm_status: list[BuildStatus] = []
        aidge_deploy.deploy(source, config)  # first contact: the board compiles perf_run once
        for i in range(repeats):
            fresh = tmp / f"copy{i}" / source.name
            shutil.copytree(source, fresh)
            remote = f"{home}/bare-bench-{i}"

            def cold(fresh: Path = fresh) -> None:
                aidge_deploy.deploy(fresh, config)

            def baseline(remote: str = remote) -> None:
                bare(board, source, remote)

            # alternate the order so that neither side always runs on a warmer machine
            if i % 2:
                bare_s.append(timed(baseline))
            cold_s.append(timed(cold))
            if not i % 2:
                bare_s.append(timed(baseline))
            messages: list[str] = []

            def warm(fresh: Path = fresh, messages: list[str] = messages) -> None:
                result = aidge_deploy.deploy(
                    fresh,
                    config,
                    progress=lambda u: (
                        messages.append(u.message)
                        if isinstance(u, ProgressUpdate) and u.message.startswith("upload:")
                        else None
                    ),
                )
                assert result.build is not None
                warm_status.append(result.build.status)

            warm_s.append(timed(warm))
            warm_uploads.extend(messages)
            board.run_as_user(f"rm -rf {remote}")
        b, c, w = median_of(bare_s), median_of(cold_s), median_of(warm_s)
        report(
            f"ssh deploy to the loopback board, median of {repeats}",
            [
                ("bare scp+ssh build+run", b),
                ("deploy() cold", c),
                ("deploy() warm (re-deploy)", w),
            ],
            [("cold / bare", c / b, 1.2)],
        )
        print(f"  re-deploy uploads: {sorted(set(warm_uploads))}")
        print(f"  re-deploy build status: {sorted({s.value for s in warm_status})}")
        if any("upload: 0 file(s) sent (0 B)" not in m for m in warm_uploads) or any(
            s != BuildStatus.CACHED for s in warm_status
        ):
            print("  RE-DEPLOY SENT FILES OR REBUILT")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
