"""Test boards: real stand-ins for SSH-reachable Linux boards, started by the tests themselves.

A pytest plugin (registered from ``tests/conftest.py`` with ``pytest_plugins = ["boards"]``).
Nothing here is a fake: every board is a real daemon on loopback or in a network namespace this
module creates, and everything it starts is stopped by PID at teardown.

Boards
------
``ssh_board`` (session)
    A real ``/usr/sbin/sshd -D -e -f <tmp>/sshd_config`` on a free 127.0.0.1 port with its own
    ed25519 host key, a client key, ``authorized_keys`` and a ``known_hosts`` file trusting the
    host key. Key-only (``AuthenticationMethods publickey``, ``UsePAM no``, ``StrictModes no``
    because the key files live under /tmp, ``Subsystem sftp internal-sftp``). As root it logs
    in as user ``pi``, created when missing with ``useradd -m -s /bin/bash pi`` and
    ``usermod -p '*' pi`` (``'*'``, not useradd's ``'!'``: with ``UsePAM no`` a ``'!'``
    account is "locked" and even public keys are refused). Without root, sshd runs as the
    current user and that user logs in. Skipped when sshd is not installed.
``fresh_ssh_board`` (function)
    The same, private to one test: for tests that kill its sessions or SIGSTOP it.
``hostile_ssh_board`` (module)
    The same, but its SFTP subsystem lies: OpenSSH's ``sftp-server`` behind
    ``tests/data/hostile_sftp.py``, which lists entries named ``bait-*`` under escaping names
    (``../x``, ``/tmp/x``, ``sub/../../x``) as a hostile board could.
``netns_board`` (module)
    The same sshd inside a network namespace ``adk<N>`` created here, reached over a veth pair
    at ``10.231.N.2:22`` (host side ``10.231.N.1``); the namespace has no other route.
    ``board.black_hole()`` makes its port drop packets (``iptables -j DROP`` inside the
    namespace, or SIGSTOP of sshd when iptables is unusable) for connect-timeout tests.
    Skipped when ``ip netns add`` fails (not root, no iproute2).
``docker_board`` (session)
    A real ``dockerd`` with private ``--data-root/--exec-root``, socket ``unix://<tmp>/docker.sock``,
    ``--bridge=none --iptables=false --ip-masq=false`` (no host network changes), plus an ssh
    board whose sshd does ``SetEnv DOCKER_HOST=unix://…`` and whose user is in group
    ``docker`` (socket group). Its image ``localhost/aidge-deploy-test:1`` is made without any
    registry: ``docker import`` of a rootfs holding ``/bin/sh`` (dash), a few coreutils and the
    ``ldd`` closure of those plus ``libstdc++.so.6`` copied from the host, enough to run a
    host-built C++ binary bind-mounted into the container. No compiler inside the image.
    Always use ``docker run --pull never --network none``. Skipped when dockerd cannot start
    (the reason includes the end of dockerd's log).
``aarch64_runner`` (session)
    Registers binfmt for qemu-aarch64 when it is not (mounts ``binfmt_misc``, then
    ``update-binfmts --enable qemu-aarch64``) and restores the previous state at teardown.
    Static aarch64 binaries then run directly (also over SSH); dynamic ones need
    ``QEMU_LD_PREFIX=/usr/aarch64-linux-gnu`` (``runner.env``). ``runner.compile()`` cross-
    compiles with ``aarch64-linux-gnu-g++``. Skipped when binfmt cannot be registered.
``aarch64_board`` (session)
    ``ssh_board`` + ``aarch64_runner``: the "Raspberry Pi" of the tests is the loopback board
    running cross-compiled binaries through binfmt (``uname -m`` in them says ``aarch64``;
    ``/proc/cpuinfo`` still shows the host). An arm64 rootfs with its own arm64 sshd was
    judged too slow to build here (about 2 minutes of debootstrap).

One-time host changes (as root): user ``pi`` (password field ``*``), ``pi`` added to group
``docker``, directory ``/run/sshd`` (sshd's privilege-separation directory).
"""

from __future__ import annotations

import contextlib
import getpass
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from aidge_deploy.connections.ssh_settings import SshSettings
from envparts import missing

SSHD = Path("/usr/sbin/sshd")
BOARD_USER = "pi"
TEST_IMAGE = "localhost/aidge-deploy-test:1"
AARCH64_SYSROOT = Path("/usr/aarch64-linux-gnu")
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
_START_TIMEOUT_S = 15.0


# --------------------------------------------------------------------------- processes


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _is_zombie(pid: int) -> bool:
    """True when ``pid`` is dead but not yet reaped, or gone altogether."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def descendants(root: int) -> list[int]:
    """PIDs of all live descendants of ``root`` (scan of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _wait_banner(host: str, port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with status {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=1.0) as sock:
                sock.settimeout(2.0)
                if sock.recv(64).startswith(b"SSH-2.0"):
                    return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"sshd gave no SSH banner on {host}:{port} within {timeout_s} s")


def _is_root() -> bool:
    return os.geteuid() == 0


def _run(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("timeout", 60)
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)


# --------------------------------------------------------------------------- ssh board


def ensure_board_user() -> str:
    """``pi`` as root (created key-only when missing), else the current user."""
    if not _is_root():
        return getpass.getuser()
    try:
        pwd.getpwnam(BOARD_USER)
    except KeyError:
        done = _run(["useradd", "-m", "-s", "/bin/bash", BOARD_USER])
        if done.returncode != 0:
            missing(f"cannot create board user {BOARD_USER}: {done.stderr.strip()}")
    shadow = _run(["getent", "shadow", BOARD_USER]).stdout.split(":")
    if len(shadow) > 1 and shadow[1] != "*":
        # '!' means locked: sshd with UsePAM no refuses even public keys for such accounts.
        _run(["usermod", "-p", "*", BOARD_USER])
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privsep dir when root
    return BOARD_USER


def _write_key(path: Path, comment: str) -> asyncssh.SSHKey:
    key = asyncssh.generate_private_key("ssh-ed25519", comment=comment)
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    path.chmod(0o600)
    return key


def _public_line(key: asyncssh.SSHKey) -> str:
    return " ".join(key.export_public_key("openssh").decode().split()[:2])


@dataclass(frozen=True)
class SshBoard:
    """A running test sshd and everything a client needs to reach it."""

    host: str
    port: int
    user: str
    key_path: Path
    known_hosts_path: Path
    host_pubkey: str  # "ssh-ed25519 AAAA..."
    sshd_pid: int
    sshd_log: Path
    workdir: Path
    netns: str | None = None

    def settings(self, **overrides: Any) -> SshSettings:
        """Client settings for this board (short timeouts, no agent, no ssh_config)."""
        values: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_path": self.key_path,
            "known_hosts_path": self.known_hosts_path,
            "config_path": None,
            "allow_agent": False,
            "connect_timeout_s": 5.0,
            "command_timeout_s": 30.0,
            "connect_attempts": 1,
            "retry_backoff_s": 0.1,
        }
        values.update(overrides)
        return SshSettings(**values)

    def run_as_user(
        self, command: str, timeout_s: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell command locally as the board user (without going through sshd)."""
        argv = ["sh", "-c", command]
        if _is_root() and self.user != "root":
            argv = ["runuser", "-u", self.user, "--", *argv]
        return _run(argv, timeout=timeout_s)

    def session_pids(self) -> list[int]:
        """The live sshd processes serving this board's connections: found in the tree of
        this board's own listener (never by user or name machine-wide, where other tests'
        boards run too); killed ones not yet reaped (zombies) are not counted."""
        return [
            pid
            for pid in descendants(self.sshd_pid)
            if _comm(pid) == "sshd" and not _is_zombie(pid)
        ]

    def kill_sessions(self) -> int:
        """SIGKILL every sshd process serving a connection: drops them mid-flight.

        Returns once each of them is dead (a zombie or reaped), so ``session_pids()`` right
        after holds only sessions opened since. SIGKILL cannot be ignored: the wait ends as
        soon as the kernel has run the kill; its deadline only guards against a hang."""
        pids = self.session_pids()
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60.0
        while any(not _is_zombie(pid) and _comm(pid) == "sshd" for pid in pids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd sessions {pids} survived SIGKILL")
            time.sleep(0.01)
        return len(pids)

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """SIGSTOP the listener: TCP connects succeed but no SSH banner ever comes."""
        _signal(self.sshd_pid, signal.SIGSTOP)
        try:
            yield
        finally:
            _signal(self.sshd_pid, signal.SIGCONT)

    @contextlib.contextmanager
    def black_hole(self) -> Iterator[str]:
        """Drop every packet to the board's port (iptables in its netns), else SIGSTOP sshd.

        Yields the method used: ``"iptables"`` or ``"sigstop"``.
        """
        if self.netns is not None:
            rule = ["INPUT", "-p", "tcp", "--dport", str(self.port), "-j", "DROP"]
            base = ["ip", "netns", "exec", self.netns, "iptables"]
            if _run([*base, "-I", *rule]).returncode == 0:
                try:
                    yield "iptables"
                finally:
                    _run([*base, "-D", *rule])
                return
        with self.stopped():
            yield "sigstop"


@contextlib.contextmanager
def start_ssh_board(
    *,
    name: str = "board",
    listen: str = "127.0.0.1",
    port: int | None = None,
    netns: str | None = None,
    extra_config: Sequence[str] = (),
    sftp_subsystem: str = "internal-sftp",
) -> Iterator[SshBoard]:
    """Start a throw-away sshd (see the module docstring) and stop it on exit."""
    if not SSHD.is_file():
        missing(f"{SSHD} not found: install the openssh-server package")
    user = ensure_board_user()
    workdir = Path(tempfile.mkdtemp(prefix=f"adk-{name}-", dir="/tmp"))
    # sshd reads authorized_keys as the board user: the directory must be traversable.
    workdir.chmod(0o755)
    proc: subprocess.Popen[bytes] | None = None
    try:
        host_key = _write_key(workdir / "ssh_host_ed25519_key", f"{name}-host")
        client_key = _write_key(workdir / "id_ed25519", f"{name}-client")
        authorized = workdir / "authorized_keys"
        authorized.write_text(_public_line(client_key) + "\n")
        authorized.chmod(0o644)
        host_line = _public_line(host_key)
        for attempt in range(3):
            chosen = port or _free_port(listen)
            config = workdir / "sshd_config"
            config.write_text(
                "\n".join(
                    [
                        f"Port {chosen}",
                        f"ListenAddress {listen}",
                        f"HostKey {workdir / 'ssh_host_ed25519_key'}",
                        f"PidFile {workdir / 'sshd.pid'}",
                        f"AuthorizedKeysFile {authorized}",
                        "AuthenticationMethods publickey",
                        "PubkeyAuthentication yes",
                        "PasswordAuthentication no",
                        "KbdInteractiveAuthentication no",
                        "PermitRootLogin no",
                        "UsePAM no",
                        "StrictModes no",
                        f"AllowUsers {user}",
                        f"Subsystem sftp {sftp_subsystem}",
                        "MaxStartups 100",
                        "MaxSessions 50",
                        "LogLevel VERBOSE",
                        *extra_config,
                        "",
                    ]
                )
            )
            log = workdir / "sshd.log"
            prefix = ["ip", "netns", "exec", netns] if netns else []
            checked = _run([*prefix, str(SSHD), "-t", "-f", str(config)])
            if checked.returncode != 0:
                raise RuntimeError(f"sshd -t rejected the config: {checked.stderr.strip()}")
            with log.open("ab") as sink:
                proc = subprocess.Popen(
                    [*prefix, str(SSHD), "-D", "-e", "-f", str(config)],
                    stdout=sink,
                    stderr=sink,
                    stdin=subprocess.DEVNULL,
                )
            try:
                _wait_banner(listen, chosen, proc, _START_TIMEOUT_S)
                break
            except RuntimeError as exc:
                _stop_process(proc)
                proc = None
                if attempt == 2 or port is not None:
                    raise RuntimeError(f"{exc}; sshd log:\n{_tail(log)}") from None
        if proc is None:  # pragma: no cover - the loop either breaks with proc or raises
            raise RuntimeError("sshd did not start")
        known_hosts = workdir / "known_hosts"
        name_field = f"[{listen}]:{chosen}" if chosen != 22 else listen
        known_hosts.write_text(f"{name_field} {host_line}\n")
        yield SshBoard(
            host=listen,
            port=chosen,
            user=user,
            key_path=workdir / "id_ed25519",
            known_hosts_path=known_hosts,
            host_pubkey=host_line,
            sshd_pid=proc.pid,
            sshd_log=log,
            workdir=workdir,
            netns=netns,
        )
    finally:
        if proc is not None:
            _signal(proc.pid, signal.SIGCONT)
            sessions = [p for p in descendants(proc.pid) if _comm(p) == "sshd"]
            _stop_process(proc)
            for pid in sessions:
                _signal(pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def ssh_board() -> Iterator[SshBoard]:
    with start_ssh_board(name="ssh") as board:
        yield board


@pytest.fixture
def fresh_ssh_board() -> Iterator[SshBoard]:
    with start_ssh_board(name="fresh") as board:
        yield board


#: what the hostile board's SFTP server lists instead of the bait names (see hostile_ssh_board)
HOSTILE_NAMES = {
    "bait-dotdot": "../escaped-dotdot",
    "bait-absolute": "/tmp/adk-escaped-absolute",
    "bait-nested": "sub/../../escaped-nested",
}
_SFTP_SERVER = Path("/usr/lib/openssh/sftp-server")


@pytest.fixture(scope="module")
def hostile_ssh_board() -> Iterator[SshBoard]:
    """A real sshd whose SFTP subsystem is OpenSSH's sftp-server behind tests/data/hostile_sftp.py:
    a directory entry named ``bait-*`` is listed as the escaping name of ``HOSTILE_NAMES``."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or not _SFTP_SERVER.is_file():
        missing(f"the board's python3 or {_SFTP_SERVER} is missing (openssh-sftp-server)")
    tools = Path(tempfile.mkdtemp(prefix="adk-hostile-", dir="/tmp"))
    try:
        tools.chmod(0o755)
        script = tools / "hostile_sftp.py"
        shutil.copy(Path(__file__).parent / "data" / "hostile_sftp.py", script)
        script.chmod(0o644)
        renames = " ".join(f"{bait}={name}" for bait, name in HOSTILE_NAMES.items())
        with start_ssh_board(
            name="hostile", sftp_subsystem=f"{python} {script} {_SFTP_SERVER} {renames}"
        ) as board:
            yield board
    finally:
        shutil.rmtree(tools, ignore_errors=True)


# --------------------------------------------------------------------------- netns board


def _free_subnet() -> int:
    used = set(re.findall(r"10\.231\.(\d+)\.", _run(["ip", "-o", "-4", "addr"]).stdout))
    for offset in range(250):
        candidate = 1 + (os.getpid() + offset) % 250
        if str(candidate) not in used and not Path(f"/run/netns/adk{candidate}").exists():
            return candidate
    missing("no free 10.231.N.0/24 subnet for a netns board")


@contextlib.contextmanager
def start_netns_board() -> Iterator[SshBoard]:
    """An ssh board with its own address in a network namespace created (and removed) here."""
    if shutil.which("ip") is None:
        missing("iproute2 (`ip`) not installed: cannot create a network namespace")
    n = _free_subnet()
    ns, host_if, board_if = f"adk{n}", f"adkh{n}", f"adkb{n}"
    added = _run(["ip", "netns", "add", ns])
    if added.returncode != 0:
        missing(f"`ip netns add` failed (needs root): {added.stderr.strip()}")
    try:
        steps = [
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", board_if],
            ["ip", "link", "set", board_if, "netns", ns],
            ["ip", "addr", "add", f"10.231.{n}.1/24", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "-n", ns, "addr", "add", f"10.231.{n}.2/24", "dev", board_if],
            ["ip", "-n", ns, "link", "set", board_if, "up"],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
        ]
        for step in steps:
            done = _run(step)
            if done.returncode != 0:
                missing(f"netns setup step {' '.join(step)} failed: {done.stderr.strip()}")
        with start_ssh_board(name="netns", listen=f"10.231.{n}.2", port=22, netns=ns) as board:
            yield board
    finally:
        _run(["ip", "link", "del", host_if])
        _run(["ip", "netns", "del", ns])


@pytest.fixture(scope="module")
def netns_board() -> Iterator[SshBoard]:
    with start_netns_board() as board:
        yield board


# --------------------------------------------------------------------------- docker board


@dataclass(frozen=True)
class DockerBoard:
    """An ssh board whose user drives a private dockerd holding ``image``."""

    ssh: SshBoard
    docker_host: str  # unix://…/docker.sock
    image: str
    root: Path

    def docker(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI locally against this board's dockerd."""
        env = {**os.environ, "DOCKER_HOST": self.docker_host}
        return _run(["docker", *args], env=env, timeout=timeout_s)


def _ldd_closure(binaries: Sequence[Path]) -> set[Path]:
    found: set[Path] = set()
    for binary in binaries:
        out = _run(["ldd", str(binary)]).stdout
        found.update(Path(p) for p in re.findall(r"(/\S+) \(0x", out))
    return found


def build_test_rootfs(root: Path) -> None:
    """A minimal glibc rootfs copied from the host (see the module docstring)."""
    tools = ["cat", "ls", "uname", "env", "sleep", "echo", "true", "false", "mkdir", "rm", "id"]
    binaries = [Path(p) for t in tools if (p := shutil.which(t)) and not Path(p).is_symlink()]
    shell = Path(shutil.which("dash") or "/bin/sh").resolve()
    libstdcxx = [p for p in Path("/usr/lib").glob("*-linux-gnu/libstdc++.so.6")]
    for path in [shell, *binaries, *_ldd_closure([shell, *binaries, *libstdcxx]), *libstdcxx]:
        dest = root / str(path).lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), dest)
    for binary in binaries:  # also reachable as /bin/<tool>
        dest = root / "bin" / binary.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(binary, dest)
    shutil.copy2(shell, root / "bin" / "sh")
    for name in ("tmp", "work", "proc", "sys", "dev", "etc"):
        (root / name).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")


def _docker_ping(sock_path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2.0)
            sock.connect(str(sock_path))
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b"OK" in sock.recv(4096)
    except OSError:
        return False


@contextlib.contextmanager
def start_docker_board() -> Iterator[DockerBoard]:
    dockerd = shutil.which("dockerd")
    if dockerd is None or shutil.which("docker") is None:
        missing("dockerd or the docker CLI is not installed (apt-get install docker.io)")
    if not _is_root():
        missing("dockerd needs root (rootless dockerd is not set up by the tests)")
    user = ensure_board_user()
    try:
        grp.getgrnam("docker")
    except KeyError:
        _run(["groupadd", "--system", "docker"])
    if user not in grp.getgrnam("docker").gr_mem:
        _run(["usermod", "-aG", "docker", user])
    root = Path(tempfile.mkdtemp(prefix="adk-docker-", dir="/tmp"))
    root.chmod(0o711)  # the board user must reach the socket inside
    sock = root / "docker.sock"
    (root / "daemon.json").write_text("{}\n")
    log = root / "dockerd.log"
    proc: subprocess.Popen[bytes] | None = None
    children: list[int] = []
    try:
        with log.open("ab") as sink:
            proc = subprocess.Popen(
                [
                    dockerd,
                    f"--data-root={root / 'data'}",
                    f"--exec-root={root / 'exec'}",
                    f"--host=unix://{sock}",
                    f"--pidfile={root / 'dockerd.pid'}",
                    f"--config-file={root / 'daemon.json'}",
                    "--group=docker",
                    "--bridge=none",
                    "--iptables=false",
                    "--ip-masq=false",
                ],
                stdout=sink,
                stderr=sink,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30.0
        while not _docker_ping(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                missing(f"dockerd could not start; end of its log:\n{_tail(log)}")
            time.sleep(0.05)
        children = descendants(proc.pid)
        rootfs = root / "rootfs"
        build_test_rootfs(rootfs)
        env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", TEST_IMAGE],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        tar.wait(timeout=60)
        if imported.returncode != 0:
            raise RuntimeError(f"docker import failed: {imported.stderr.strip()}")
        with start_ssh_board(
            name="docker", extra_config=[f"SetEnv DOCKER_HOST=unix://{sock}"]
        ) as board:
            yield DockerBoard(ssh=board, docker_host=f"unix://{sock}", image=TEST_IMAGE, root=root)
    finally:
        if proc is not None:
            children = children or descendants(proc.pid)
            _stop_process(proc, timeout_s=20.0)
            for pid in children:  # containerd and its shims, if dockerd left them
                _signal(pid, signal.SIGKILL)
        _run(["sh", "-c", f"grep -o ' {root}/[^ ]*' /proc/mounts | xargs -r -n1 umount -l"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_board() -> Iterator[DockerBoard]:
    with start_docker_board() as board:
        yield board


# --------------------------------------------------------------------------- aarch64


@dataclass(frozen=True)
class Aarch64Runner:
    """How to build and run aarch64 binaries on this x86 host (binfmt + qemu-user)."""

    ld_prefix: Path
    binfmt_entry: Path
    cross_cxx: str | None

    @property
    def env(self) -> dict[str, str]:
        """Environment that lets dynamically linked aarch64 binaries find their loader."""
        return {"QEMU_LD_PREFIX": str(self.ld_prefix)}

    def compile(
        self, source: Path, output: Path, *, static: bool = True, flags: Sequence[str] = ()
    ) -> Path:
        if self.cross_cxx is None:
            missing("aarch64-linux-gnu-g++ not installed (g++-aarch64-linux-gnu)")
        argv = [self.cross_cxx, "-O2", *(["-static"] if static else []), *flags]
        done = _run([*argv, "-o", str(output), str(source)], timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"aarch64 compile failed: {done.stderr}")
        return output

    def run(self, argv: Sequence[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run an aarch64 binary directly (binfmt), locally."""
        return _run(argv, env={**os.environ, **self.env}, timeout=timeout_s)


def _binfmt_state(entry: Path) -> str:
    """ "enabled", "disabled" or "absent"."""
    try:
        first = entry.read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return "absent"
    return "enabled" if first == "enabled" else "disabled"


@contextlib.contextmanager
def start_aarch64_runner() -> Iterator[Aarch64Runner]:
    if shutil.which("update-binfmts") is None:
        missing("update-binfmts not installed (binfmt-support)")
    if not Path("/usr/libexec/qemu-binfmt/aarch64-binfmt-P").exists() and not shutil.which(
        "qemu-aarch64-static"
    ):
        missing("qemu-user-static not installed: no aarch64 binfmt interpreter")
    mounted_here = False
    if not (BINFMT_DIR / "register").exists():
        done = _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)])
        if done.returncode != 0:
            missing(f"cannot mount binfmt_misc (needs root): {done.stderr.strip()}")
        mounted_here = True
    entry = BINFMT_DIR / "qemu-aarch64"
    before = _binfmt_state(entry)
    enabled_here = False
    try:
        if before != "enabled":
            done = _run(["update-binfmts", "--enable", "qemu-aarch64"])
            if done.returncode != 0 or _binfmt_state(entry) != "enabled":
                missing(f"cannot register binfmt for qemu-aarch64: {done.stderr.strip()}")
            enabled_here = True
        yield Aarch64Runner(
            ld_prefix=AARCH64_SYSROOT,
            binfmt_entry=entry,
            cross_cxx=shutil.which("aarch64-linux-gnu-g++"),
        )
    finally:
        if enabled_here:
            _run(["update-binfmts", "--disable", "qemu-aarch64"])
        if mounted_here:
            _run(["umount", str(BINFMT_DIR)])


@pytest.fixture(scope="session")
def aarch64_runner() -> Iterator[Aarch64Runner]:
    with start_aarch64_runner() as runner:
        yield runner


@dataclass(frozen=True)
class Aarch64Board:
    """The loopback ssh board running aarch64 binaries through binfmt."""

    ssh: SshBoard
    runner: Aarch64Runner

    @property
    def remote_env(self) -> dict[str, str]:
        """Environment to pass to ``SshConnection.run`` for dynamically linked binaries."""
        return self.runner.env


@pytest.fixture(scope="session")
def aarch64_board(ssh_board: SshBoard, aarch64_runner: Aarch64Runner) -> Aarch64Board:
    return Aarch64Board(ssh=ssh_board, runner=aarch64_runner)


__all__ = [
    "Aarch64Board",
    "Aarch64Runner",
    "DockerBoard",
    "SshBoard",
    "build_test_rootfs",
    "descendants",
    "start_docker_board",
    "start_netns_board",
    "start_ssh_board",
]
