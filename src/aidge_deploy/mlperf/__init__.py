"""The MLPerf Tiny reference models as a first-class set: their published shapes and
counts (``models``), random-weight ONNX models of those shapes (``build``), the published
closed-division Cortex-M results (``published``), and the TFLite -> ONNX conversion of the
trained models (``convert``; needs the ``tflite`` extra). See docs/mlperf_tiny.md."""
