"""Interactive session drivers (validation, MLPerf Tiny) and the ``ProcessChannel`` they use.

Three kinds of peers, from fastest to most real:

* ``ProcessChannel`` against small real programs (``cat``, a silent ``sleep``, Python one-liners);
* a **simulated device**: a Python process that plays the firmware side of the protocol on its
  stdin/stdout, reproducing the template's input loop (``char[48]`` tokens, ``\\r`` skipped,
  128-character command buffer). It unit-tests the driver logic, including failure modes a
  real firmware cannot be made to produce on demand (persistent parse errors, hangs);
* the **real firmware** in QEMU (mps2-an386 from ``aidge_qemu_boards``): ``tiny_cnn`` exported
  with the validation and MLPerf Tiny applications, built with arm-none-eabi-gcc, run under
  ``qemu-system-arm -serial stdio`` through ``ProcessChannel`` and driven by the drivers.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from aidge_core.export_utils.artifact import ExportManifest

from aidge_deploy.connections.process_channel import ProcessChannel
from aidge_deploy.errors import CaptureError, ConfigError, ProtocolError
from aidge_deploy.protocols.base import Channel, SessionRequest
from aidge_deploy.protocols.manifest_facts import TensorSpec, numpy_dtype
from aidge_deploy.protocols.mlperf import (
    DB_CHUNK_BYTES,
    drive_mlperf,
    mlperf_input_bytes,
    parse_mlperf_transcript,
)
from aidge_deploy.protocols.registry import get_protocol
from aidge_deploy.protocols.uart import parse_uart_validation_v1
from aidge_deploy.protocols.uart_validation import drive_validation, format_sample
from envparts import needs

sys.path.insert(0, str(Path(__file__).parent))
import modelzoo

CONTRACT = Path(__file__).parent / "data" / "logs" / "contract"


def contract_manifest(name: str) -> ExportManifest:
    return ExportManifest.from_dict(
        json.loads((CONTRACT / f"{name}.aidge-export.json").read_text())
    )


def with_app(manifest: ExportManifest, **changes: object) -> ExportManifest:
    return replace(manifest, application_config={**manifest.application_config, **changes})


def validation_manifest(**changes: object) -> ExportManifest:
    """The contract's validation manifest without profiling (the simulated device has none)."""
    manifest = contract_manifest("mps2-an386_validation")
    return replace(with_app(manifest, profiling=False, **changes), profiling=False)


# --- ProcessChannel ------------------------------------------------------------------------


def test_process_channel_lines_timeouts_and_eof() -> None:
    with ProcessChannel(["cat"]) as channel:
        assert isinstance(channel, Channel)
        channel.write(b"hello\r\nwor")
        assert channel.read_line(5) == "hello"
        with pytest.raises(CaptureError, match=r"within 0\.2 s"):
            channel.read_line(0.2)  # "wor" has no terminator yet
        channel.write(b"ld\n\rnext\n")
        assert channel.read_line(5) == "world"
        assert channel.read_line(5) == "next"
        channel.write(b"tail without newline")
        channel.close_input()
        assert channel.read_line(5) == "tail without newline"
        assert channel.read_line(5) is None
        assert channel.wait(5) == 0
        assert channel.transcript() == "hello\r\nworld\n\rnext\ntail without newline"


def test_process_channel_silent_program_times_out_and_is_stopped(tmp_path: Path) -> None:
    log = tmp_path / "raw.log"
    channel = ProcessChannel(["sleep", "60"], log_path=log)
    started = time.monotonic()
    with pytest.raises(CaptureError) as info:
        channel.read_line(0.3)
    assert time.monotonic() - started < 5
    assert info.value.log_path == log
    code = channel.close(grace_s=2)
    assert code is not None and code < 0  # killed by our SIGTERM
    assert log.read_bytes() == b""


def test_process_channel_write_after_exit_and_stderr() -> None:
    program = "import sys; sys.stderr.write('diag\\n'); print('bye')"
    with ProcessChannel([sys.executable, "-c", program]) as channel:
        assert channel.read_line(10) == "bye"
        assert channel.read_line(10) is None
        assert channel.wait(10) == 0
        assert channel.stderr_text() == "diag\n"
        with pytest.raises(CaptureError, match="closed its input"):
            for _ in range(50):  # the pipe may accept a first write before EPIPE shows up
                channel.write(b"x" * 65536)


def test_process_channel_missing_program() -> None:
    with pytest.raises(CaptureError, match="Cannot start"):
        ProcessChannel(["/nonexistent/program"])


# --- sample formatting ---------------------------------------------------------------------


def test_format_sample_round_trips_float32_and_checks_ints() -> None:
    spec = TensorSpec("in", "float", numpy_dtype("float"), 5)
    sample = np.array([0.1, -1e-38, 3.4028235e38, 1 / 3, -0.0], dtype=np.float32)
    line = format_sample(sample, spec)
    assert "\n" not in line and all(len(t) <= 47 for t in line.split())
    back = np.array([np.float32(t) for t in line.split()], dtype=np.float32)
    assert back.tobytes() == sample.tobytes()  # bit-exact through strtof
    ints = TensorSpec("in", "int8_t", numpy_dtype("int8_t"), 3)
    assert format_sample(np.array([-128, 0, 127]), ints) == "-128 0 127"
    assert format_sample(np.array([1.0, 2.0, -3.0]), ints) == "1 2 -3"
    with pytest.raises(ConfigError, match="does not fit"):
        format_sample(np.array([128, 0, 0]), ints)
    with pytest.raises(ConfigError, match="non-integer"):
        format_sample(np.array([0.5, 0, 0]), ints)
    with pytest.raises(ConfigError, match="expects 5"):
        format_sample(np.zeros(4, np.float32), spec)


def test_mlperf_input_bytes_follow_the_firmware_conversion() -> None:
    spec = TensorSpec("in", "float", numpy_dtype("float"), 4)
    image = np.array([0, 17, 128, 255], dtype=np.float32)
    assert mlperf_input_bytes(image, spec, "ic01") == bytes([0, 17, 128, 255])
    with pytest.raises(ConfigError, match=r"integers in \[0, 255\]"):
        mlperf_input_bytes(image / 255.0, spec, "ic01")
    ad = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32)
    assert mlperf_input_bytes(ad, spec, "ad01") == ad.astype("<f4").tobytes()
    codes = np.frombuffer(
        mlperf_input_bytes(np.array([0.0, 1.0, -10.0, 5.0]), spec, "kws01"), np.int8
    )
    dequantised = (codes.astype(np.float64) - 83) * 0.5847029089927673
    assert np.allclose(dequantised[:2], [0.0, 1.0], atol=0.3)
    int16 = TensorSpec("in", "int16_t", numpy_dtype("int16_t"), 4)
    with pytest.raises(ConfigError, match="one per value"):
        mlperf_input_bytes(np.zeros(4), int16, "ic01")


# --- the simulated device ------------------------------------------------------------------

# The firmware side of both protocols, written after validation_inference_time.jinja and
# tinyml_benchmark.jinja. Flags: reject=<id> (answer error: parse_input once for that sample),
# always_reject, hang_after=<id> (stop answering after READY <id>), inference_error,
# echo (echo every received byte, like a serial terminal), raw_out=<path> (write the db buffer).
SIMULATED_DEVICE = textwrap.dedent(
    r"""
    import struct, sys, time
    args = dict(a.split("=", 1) if "=" in a else (a, "1") for a in sys.argv[2:])
    out = sys.stdout.buffer
    inp = sys.stdin.buffer

    def say(text):
        out.write(text.encode()); out.flush()

    def read_byte():
        b = inp.read(1)
        if not b:
            sys.exit(3)
        if "echo" in args:
            out.write(b); out.flush()
        return b

    def read_values(n):
        tok, vals = b"", []
        while len(vals) < n:
            b = read_byte()
            if b == b"\r":
                continue
            if b in b" ,\t\n":
                if not tok:
                    if b == b"\n":
                        return None
                    continue
                try:
                    vals.append(float(tok))
                except ValueError:
                    vals.append(0.0)
                tok = b""
                if b == b"\n":
                    break
                continue
            if len(tok) + 1 >= 48:
                return None
            tok += b
        else:
            while read_byte() != b"\n":
                pass
        return vals if len(vals) == n else None

    def validation(n, size):
        say("\r\n*** DEMO EXPORT ARM ***\r\n")
        i, rejected = 0, set()
        while i < n:
            say(f"READY {i}\n")
            if args.get("hang_after") == str(i):
                time.sleep(60)
            vals = read_values(size)
            if vals is None or "always_reject" in args or (
                args.get("reject") == str(i) and i not in rejected
            ):
                rejected.add(i)
                say("error: parse_input\n")
                continue
            if "inference_error" in args:
                say("error: inference\n"); i += 1; continue
            say(f"prediction: {max(range(10), key=lambda k: vals[k])}\n")
            i += 1
        say("VALIDATION_DONE\n")
        say("inference_time: 0.500 0.600 0.500 \n")
        say("BENCHMARK_DONE\n")
        say("\r\n********************** END DEMO *********************\r\n")

    def mlperf():
        say("m-init-done\r\nm-ready\r\n")
        buf, expected, raw = b"", 0, bytearray()
        while True:
            c = read_byte()
            if c != b"%":
                if len(buf) < 128:
                    buf += c
                continue
            cmd, buf = buf.decode().split(" "), b""
            if cmd[0] == "name":
                say("m-name-dut-[Aidge_ARM_CortexM]\r\n")
            elif cmd[0] == "profile":
                say("m-profile-[ULPMark for tinyML Firmware V0.0.1]\r\nm-model-[ic01]\r\n")
            elif cmd[0] == "db" and cmd[1] == "load":
                expected, raw = int(cmd[2]), bytearray()
                say(f"m-[Expecting {expected} bytes]\r\n")
            elif cmd[0] == "db":
                for k in range(0, len(cmd[1]), 2):
                    if len(raw) < expected:
                        raw.append(int(cmd[1][k:k + 2], 16))
                        if len(raw) == expected:
                            say("m-load-done\r\n")
                if "raw_out" in args:
                    open(args["raw_out"], "wb").write(bytes(raw))
            elif cmd[0] == "infer":
                n, w = int(cmd[1]), int(cmd[2])
                say(f"m-warmup-start-{w}\r\nm-warmup-done\r\nm-infer-start-{n}\r\n")
                say(f"m-lap-us-1000\r\nm-lap-us-{1000 + 250 * n}\r\nm-infer-done\r\n")
                say("m-results-[" + ",".join(f"{b / 255:.3f}" for b in raw[:10]) + "]\r\n")
            elif cmd[0] == "results":
                say("m-results-[" + ",".join(f"{b / 255:.3f}" for b in raw[:10]) + "]\r\n")
            say("m-ready\r\n")

    if sys.argv[1] == "validation":
        validation(int(args["n"]), int(args["size"]))
    else:
        mlperf()
    """
)


def simulated_device(*args: str) -> ProcessChannel:
    return ProcessChannel([sys.executable, "-u", "-c", SIMULATED_DEVICE, *args])


def validation_samples(n: int, size: int = 64) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    return tuple(rng.standard_normal(size).astype(np.float32) for _ in range(n))


def test_validation_driver_with_simulated_device() -> None:
    manifest = validation_manifest(nb_validation_iterations=3)
    samples = validation_samples(3)
    with simulated_device("validation", "n=3", "size=64", "reject=1") as channel:
        transcript = drive_validation(
            channel, manifest, SessionRequest(samples=samples, line_timeout_s=10)
        )
    assert transcript.count("READY 1") == 2  # rejected once, resent
    result = parse_uart_validation_v1(transcript, manifest)
    assert result.predictions == tuple(int(np.argmax(s[:10])) for s in samples)
    assert result.timings_ms == (0.5, 0.6, 0.5)
    assert result.notices == ("sample 1: the device could not parse the input line (resent)",)


def test_validation_driver_gives_up_on_persistent_parse_errors() -> None:
    manifest = validation_manifest()
    with (
        simulated_device("validation", "n=2", "size=64", "always_reject") as channel,
        pytest.raises(ProtocolError, match="rejected sample 0 3 times") as info,
    ):
        drive_validation(
            channel, manifest, SessionRequest(samples=validation_samples(2), line_timeout_s=10)
        )
    assert info.value.line == "READY 0" and info.value.hint


def test_validation_driver_times_out_on_a_hung_device() -> None:
    manifest = validation_manifest()
    request = SessionRequest(samples=validation_samples(2), line_timeout_s=0.5)
    with (
        simulated_device("validation", "n=2", "size=64", "hang_after=1") as channel,
        pytest.raises(CaptureError, match=r"waiting for READY 1"),
    ):
        drive_validation(channel, manifest, request)


def test_validation_driver_reports_inference_errors_and_bad_requests() -> None:
    manifest = validation_manifest()
    with (
        simulated_device("validation", "n=2", "size=64", "inference_error") as channel,
        pytest.raises(ProtocolError, match="error: inference"),
    ):
        drive_validation(
            channel, manifest, SessionRequest(samples=validation_samples(2), line_timeout_s=10)
        )
    with simulated_device("validation", "n=2", "size=64") as channel:
        with pytest.raises(ConfigError, match="2 validation samples, 1 given"):
            drive_validation(channel, manifest, SessionRequest(samples=validation_samples(1)))
        with pytest.raises(ConfigError, match="expects 64"):
            drive_validation(
                channel, manifest, SessionRequest(samples=validation_samples(2, size=63))
            )


def test_validation_driver_via_registry_with_echoing_device() -> None:
    manifest = validation_manifest()
    protocol = get_protocol(manifest.protocol)
    samples = validation_samples(2)
    with simulated_device("validation", "n=2", "size=64", "echo") as channel:
        transcript = protocol.drive(
            channel, manifest, SessionRequest(samples=samples, line_timeout_s=10)
        )
    result = protocol.parse(transcript, manifest)  # the echoed sample lines are noise
    assert result.predictions == tuple(int(np.argmax(s[:10])) for s in samples)


@pytest.mark.parametrize("echo", [False, True], ids=["plain", "echo"])
def test_mlperf_driver_with_simulated_device(tmp_path: Path, echo: bool) -> None:
    manifest = replace(
        contract_manifest("mps2-an386_tinyml"),
        inputs=[{"dims": [1, 10, 10, 3], "dtype": "float", "name": "in", "size": 300}],
    )
    sample = np.arange(300, dtype=np.float32) % 256  # 300 bytes: 5 chunks of <= 62
    raw_out = tmp_path / "loaded.bin"
    args = ["mlperf", f"raw_out={raw_out}"] + (["echo"] if echo else [])
    request = SessionRequest(samples=(sample,), nb_iterations=4, nb_warmup=2, line_timeout_s=10)
    with simulated_device(*args) as channel:
        transcript = drive_mlperf(channel, manifest, request)
    assert raw_out.read_bytes() == bytes(int(v) for v in sample)
    assert 300 // DB_CHUNK_BYTES + 1 == 5
    result = parse_mlperf_transcript(transcript, manifest)
    assert result.mlperf is not None
    assert (result.mlperf.nb_inferences, result.mlperf.nb_warmup) == (4, 2)
    assert result.mlperf.latency_us == 250.0
    assert result.mlperf.results == tuple(round(v / 255, 3) for v in range(10))


def test_mlperf_driver_needs_a_sample_and_a_talking_device() -> None:
    manifest = contract_manifest("mps2-an386_tinyml")
    with ProcessChannel(["cat"]) as channel, pytest.raises(ConfigError, match="one input sample"):
        drive_mlperf(channel, manifest, SessionRequest())
    # `sleep` never prints m-ready nor answers name%: a CaptureError with what was awaited
    sample = np.zeros(64, np.float32)
    with (
        ProcessChannel(["sleep", "30"]) as channel,
        pytest.raises(CaptureError, match="m-ready after 'name%'"),
    ):
        drive_mlperf(channel, manifest, SessionRequest(samples=(sample,), line_timeout_s=0.3))


# --- the real firmware in QEMU -------------------------------------------------------------

QEMU_TOOLS = ("qemu-system-arm", "arm-none-eabi-gcc", "arm-none-eabi-g++", "make")
_MISSING = [tool for tool in QEMU_TOOLS if shutil.which(tool) is None]
BOARD = "mps2-an386"


def _export_and_build(
    model: Path, x: np.ndarray, out_dir: Path, **app: object
) -> tuple[Path, ExportManifest]:
    import aidge_core
    import aidge_onnx
    from aidge_core.export_utils import export
    from aidge_core.export_utils.artifact import ExportApplication
    from aidge_core.export_utils.config import ExportConfig

    import aidge_qemu_boards  # noqa: F401  (registers the emulated boards)

    graph = aidge_onnx.load_onnx(str(model))
    tensor = aidge_core.Tensor(x)
    tensor.set_backend("cpu")
    tensor.to_dformat(aidge_core.dformat.nchw)  # untagged 4-D inputs are misread (§5.4)
    config = ExportConfig(
        target=BOARD,
        export_folder=str(out_dir),
        dtype="float32",
        compile=False,
        application=ExportApplication(**app),
    )
    # export() drops exported_graph.mmd into the working directory: keep it in tmp
    with contextlib.chdir(out_dir.parent):
        artifact = export(graph, config, [tensor])
    path = Path(artifact.path).resolve()
    build = subprocess.run(
        ["make", "build", "-j2", "AIDGE_CMP=false"],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    return path, artifact.manifest


def _qemu_channel(path: Path, manifest: ExportManifest) -> ProcessChannel:
    from aidge_qemu_boards import get_board, qemu_command

    (elf,) = sorted(path.glob(manifest.expected_artifact))
    return ProcessChannel(list(qemu_command(get_board(BOARD), elf)), cwd=path)


@pytest.fixture(scope="module")
def qemu_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return modelzoo.tiny_cnn(tmp_path_factory.mktemp("model") / "tiny_cnn.onnx")


@pytest.mark.slow
@pytest.mark.qemu
@needs(not _MISSING, f"not installed: {', '.join(_MISSING)}")
def test_validation_session_on_qemu_firmware(qemu_model: Path, tmp_path: Path) -> None:
    x = modelzoo.sample_input((1, 3, 4, 4))
    path, manifest = _export_and_build(
        qemu_model,
        x,
        tmp_path / "validation",
        kind="validation",
        profiling=True,
        nb_warmup=1,
        nb_iterations=3,
        nb_validation_iterations=3,
    )
    nchw = [modelzoo.sample_input((1, 3, 4, 4), seed=s) for s in (21, 22, 23)]
    # the firmware reads the exported layout: NHWC for a Cortex-M 4-D input
    samples = tuple(s.transpose(0, 2, 3, 1).copy() for s in nchw)
    assert list(manifest.inputs[0]["dims"]) == [1, 4, 4, 3]
    with _qemu_channel(path, manifest) as channel:
        transcript = drive_validation(
            channel,
            manifest,
            SessionRequest(samples=samples, line_timeout_s=30, benchmark_timeout_s=60),
        )
    result = get_protocol(manifest.protocol).parse(transcript, manifest)
    expected = tuple(int(np.argmax(modelzoo.onnx_reference(qemu_model, s))) for s in nchw)
    assert result.predictions == expected
    assert result.timings_ms is not None and len(result.timings_ms) == 3
    assert result.cycles is not None and all(c > 0 for c in result.cycles)
    assert "END DEMO" in transcript


@pytest.mark.slow
@pytest.mark.qemu
@needs(not _MISSING, f"not installed: {', '.join(_MISSING)}")
def test_mlperf_session_on_qemu_firmware(qemu_model: Path, tmp_path: Path) -> None:
    x = modelzoo.sample_input((1, 3, 4, 4))
    path, manifest = _export_and_build(
        qemu_model,
        x,
        tmp_path / "tinyml",
        kind="benchmark",
        tinymlbenchmark=True,
        nb_warmup=1,
        nb_iterations=3,
    )
    assert manifest.protocol == "mlperf-tiny-uart/v1"
    # an 8-bit image, as EEMBC ic01 samples are: the firmware casts each byte to float
    image = np.random.default_rng(3).integers(0, 256, size=(1, 4, 4, 3)).astype(np.float32)
    request = SessionRequest(samples=(image,), nb_iterations=5, nb_warmup=2, line_timeout_s=30)
    with _qemu_channel(path, manifest) as channel:
        transcript = drive_mlperf(channel, manifest, request)
        assert channel.returncode is None  # the firmware never exits: close() stops QEMU
    result = get_protocol(manifest.protocol).parse(transcript, manifest)
    mlperf = result.mlperf
    assert mlperf is not None
    assert (mlperf.dut_name, mlperf.model) == ("Aidge_ARM_CortexM", "ic01")
    assert (mlperf.nb_inferences, mlperf.nb_warmup) == (5, 2)
    assert mlperf.latency_us > 0 and len(mlperf.results) == 10
    # the device's answer is a softmax of tiny_cnn on the loaded image (3 decimals)
    logits = modelzoo.onnx_reference(qemu_model, image.transpose(0, 3, 1, 2).copy()).reshape(-1)
    probabilities = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(mlperf.results, probabilities, atol=2e-3)
