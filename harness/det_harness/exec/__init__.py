"""Programs the platform runs inside a task (``python3 -m det_harness.exec.harness …``)."""
