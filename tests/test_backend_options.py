"""Each backend's own options as typed records (``aidge_deploy.backendoptions``): the
guide's flat ``DeployConfig`` fields spell them, the backends read the records, and each
backend declares the records it reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from aidge_deploy.backendoptions import (
    OPTION_RECORDS,
    DockerOptions,
    FarmOptions,
    FlashOptions,
    SerialOptions,
    SshOptions,
)
from aidge_deploy.config import DeployConfig
from aidge_deploy.targetcaps import pair_caps


@pytest.mark.parametrize("record", OPTION_RECORDS, ids=lambda r: r.__name__)
def test_each_record_field_is_spelled_by_one_guide_field_with_the_same_default(
    record: type,
) -> None:
    config_fields = {f.name: f for f in dataclasses.fields(DeployConfig)}
    own = {f.name: f for f in dataclasses.fields(record)}
    assert set(record.ALIASES) == set(own)
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
    assert (config.docker_image, config.docker_pull) == ("aidge:1", True)
    assert config.flash_method == "gdb-remote" and config.flash_options == {"port": "3334"}
    assert config.run_timeout == 42.0 and config.backend == "ssh_docker"
    assert base.ssh_host is None, "with_options returns a copy"
    assert config.ssh.key_path == Path("/k") and config.docker == DockerOptions("aidge:1", True)


@pytest.mark.parametrize(
    ("target", "backend", "records"),
    [
        ("host", "local", (DockerOptions,)),
        ("mps2-an386", "local", ()),
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
