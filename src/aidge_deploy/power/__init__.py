"""Power and energy: monitors behind one small protocol, and energy per inference.

``--power SOURCE`` (``DeployConfig.power``) picks a monitor (``source.py``); the power stages
of the pipeline (``pipeline/stages/power.py``) plan a run of N inferences from the clean
profile timing, run the target's power variant while the monitor captures the gated window,
and turn the capture into a ``PowerResult`` (``result.py``) whose every figure has a unit and
a provenance: measured (silicon/host) for instruments and sensors, estimated for models.
Nothing heavy is imported here: the Joulescope packages load only when a run asks for them.
"""
