"""A finished run used as a calibrated classifier: its network rebuilt from the run directory (``network``), the
arrays a user hands it (``inputs``), :func:`metacal.load`'s model with its post-hoc calibrator (``model``), the export
to one ``.pt2`` or ``.onnx`` file (``export``) and the command line ``python -m metacal.predict`` (``cli``)."""

from typing import Any

from metacal import moved_attribute

#: the names of the module this package replaced, all now in its command line (served for one release)
OLD_NAMES = {name: "cli" for name in ("main", "console_main", "build_parser", "PROG", "InputError", "check_writable",
                                      "check_device", "check_request", "read_inputs", "write_predictions", "predict")}


def __getattr__(name: str) -> Any:
    return moved_attribute(__name__, name, OLD_NAMES)
