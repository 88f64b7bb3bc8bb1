"""Each backend's own options as typed records (``aidge_deploy.backendoptions``): the
guide's flat ``DeployConfig`` fields spell them, the backends read the records, and each
backend declares the records it reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from aidge_deploy.backendoptions import (
    OPTION_RECORDS,
    DockerOptions,
    FarmOptions,
    FlashOptions,
    QemuOptions,
    SerialOptions,
    SshOptions,
    with_own,
)
from aidge_deploy.cli.options import config_values
from aidge_deploy.config import DeployConfig
from aidge_deploy.connections.ssh_settings import ssh_settings_from_config
from aidge_deploy.errors import ConfigError
from aidge_deploy.targetcaps import pair_caps


@pytest.mark.parametrize("record", OPTION_RECORDS, ids=lambda r: r.__name__)
def test_each_record_field_is_spelled_by_one_guide_field_with_the_same_default(
    record: type,
) -> None:
    config_fields = {f.name: f for f in dataclasses.fields(DeployConfig)}
    own = {f.name: f for f in dataclasses.fields(record)}
    assert set(record.ALIASES) <= set(own)
    assert set(record.own_fields()) == set(own) - set(record.ALIASES)  # type: ignore[attr-defined]
    for name in record.own_fields():  # type: ignore[attr-defined]
        assert name not in config_fields, f"{record.__name__}.{name} is its own: no flat field"
        assert own[name].metadata.get("doc"), f"{record.__name__}.{name} has no doc"
    for name, alias in record.ALIASES.items():
        guide = config_fields[alias]
        if guide.default_factory is not dataclasses.MISSING:
            assert guide.default_factory() == own[name].default_factory()  # type: ignore[misc]
        else:
            assert guide.default == own[name].default, (name, alias)
        assert own[name].metadata.get("doc"), f"{record.__name__}.{name} has no doc"


def test_the_records_follow_the_guide_fields_even_when_set_after_construction() -> None:
    config = DeployConfig(target="raspberrypi", backend="ssh", ssh_host="pi", ssh_port=2222)
    # the published exporter's helper sets the API fields after construction
    config.api_url = "http://farm:8000/api"
    config.api_password = "s3cret"
    config.serial_port = "/dev/ttyACM0"
    config.end_keyword = "DONE | END"
    assert config.ssh == SshOptions(host="pi", port=2222)
    assert config.farm.url == "http://farm:8000/api" and config.farm.password == "s3cret"
    assert config.serial.port == "/dev/ttyACM0"
    assert config.serial.end_markers == ("DONE", "END") == config.end_markers
    assert "s3cret" not in repr(config.farm) and "s3cret" not in repr(config)
    assert config.snapshot()["api_password"] == "***"


def test_with_options_sets_each_record_and_keeps_the_rest() -> None:
    base = DeployConfig(target="raspberrypi", backend="ssh_docker", run_timeout=42.0)
    config = base.with_options(
        SshOptions(host="pi", key_path=Path("/k"), cross_compile=True),
        DockerOptions(image="aidge:1", pull=True),
        FlashOptions(method="gdb-remote", options={"port": "3334"}),
    )
    assert config.ssh_host == "pi" and config.ssh_key_path == Path("/k") and config.cross_compile
    assert (config.docker_image, config.docker.pull) == ("aidge:1", True)
    assert config.flash_method == "gdb-remote" and config.flash_options == {"port": "3334"}
    assert config.run_timeout == 42.0 and config.backend == "ssh_docker"
    assert base.ssh_host is None, "with_options returns a copy"
    assert config.ssh.key_path == Path("/k") and config.docker == DockerOptions("aidge:1", True)


@pytest.mark.parametrize(
    ("target", "backend", "records"),
    [
        ("host", "local", (DockerOptions,)),
        ("mps2-an386", "local", (QemuOptions,)),
        ("raspberrypi", "ssh", (SshOptions,)),
        ("raspberrypi", "ssh_docker", (SshOptions, DockerOptions)),
        ("stm32h743", "local", (FlashOptions, SerialOptions)),
        ("mps2-an386", "api", (FarmOptions,)),
    ],
)
def test_each_backend_declares_the_records_it_reads(
    target: str, backend: str, records: tuple[type, ...]
) -> None:
    assert pair_caps(target, backend).options == records


def test_a_records_own_options_are_kept_in_it_and_its_guide_fields_set() -> None:
    """Options no guide field spells live in their record (``backend_options``): given
    with the record's guide fields, those become the config's fields."""
    config = DeployConfig(
        target="raspberrypi",
        backend="ssh",
        backend_options=(SshOptions(host="pi", connect_attempts=1, config_path=None),),
    )
    assert config.ssh_host == "pi" and config.ssh.host == "pi"
    assert config.backend_options == (SshOptions(connect_attempts=1, config_path=None),)
    settings = ssh_settings_from_config(config)
    assert (settings.connect_attempts, settings.config_path) == (1, None)
    assert (settings.allow_agent, settings.kill_after_s) == (True, 5.0)  # the defaults
    assert repr(config).endswith(
        "backend_options=(SshOptions(config_path=None, connect_attempts=1),))"
    )
    assert config.snapshot()["backend_options"] == {
        "SshOptions": {"config_path": None, "connect_attempts": 1}
    }
    # with_options replaces the record of its kind and keeps the others
    qemu = config.with_options(QemuOptions(binary="/opt/qemu/bin/qemu-system-arm"))
    assert qemu.ssh.connect_attempts == 1 and qemu.qemu.binary.startswith("/opt/")
    again = qemu.with_options(SshOptions(host="pi2"))
    assert again.ssh.connect_attempts == 3 and again.ssh_host == "pi2"
    assert again.qemu.binary.startswith("/opt/")
    assert DeployConfig().qemu == QemuOptions() and DeployConfig().backend_options == ()


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: DeployConfig(ssh_host="a", backend_options=(SshOptions(host="b"),)), "sets ssh_host"),
        (lambda: DeployConfig(backend_options=(QemuOptions(), QemuOptions(binary="q"))), "two Qemu"),
        (lambda: DeployConfig(backend_options=({"binary": "q"},)), "not a backend's options"),
        (lambda: DeployConfig(extra={"ssh_settings": {"connect_attempts": 1}}), "SshOptions"),
        (lambda: DeployConfig(extra={"docker_build": "container"}), "DockerOptions"),
        (lambda: DockerOptions(build="inside"), "Docker build location"),
        (lambda: QemuOptions(binary=" "), "QEMU binary is empty"),
        (lambda: QemuOptions(extra_args="-S -s"), "extra_args is a string"),
    ],
)  # fmt: skip
def test_bad_own_options_are_refused_with_a_hint(make: Callable[[], object], error: str) -> None:
    with pytest.raises(ConfigError, match=error) as info:
        make()
    assert info.value.hint


def test_the_command_line_gives_own_options_as_their_records() -> None:
    values = config_values(
        {
            "qemu_binary": "/q",
            "qemu_arg": ["-d", "guest_errors"],
            "docker_build": "outside",
            "ssh_host": None,
        }
    )
    config = DeployConfig(**values)
    assert config.qemu == QemuOptions(binary="/q", extra_args=("-d", "guest_errors"))
    assert config.docker.build == "outside"
    farm = DeployConfig(
        **config_values(
            {
                "backend": "ssh",
                "ssh_trust_on_first_use": True,
                "api_job_timeout": 5.0,
                "docker_pull": False,
            }
        )
    )
    assert farm.ssh.trust_on_first_use and farm.farm.job_timeout == 5.0
    assert not farm.docker.pull
    with pytest.raises(ConfigError, match="no own option"):
        with_own((), SshOptions, host="pi")  # a guide field: the config's, not the record's
    assert "backend_options" not in config_values({"qemu_binary": None, "qemu_arg": None})
