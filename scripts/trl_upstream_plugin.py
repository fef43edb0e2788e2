"""pytest plugin for scripts/trl_upstream_tests.sh: runs TRL's own GRPO trainer tests against
``AdaptiveGRPOTrainer``.

``ADAPTIVE_ALLOCATOR`` selects the trainer: ``stock`` (TRL's ``GRPOTrainer``, the reference) or an
allocator name (``uniform``, ``default`` for ``allocator=None``, ``vigor``, ...). Before the test
module is imported, ``trl.GRPOTrainer`` becomes a subclass of ``AdaptiveGRPOTrainer`` built with
that allocator, so the tests' own ``from trl import GRPOTrainer`` gets the plug-in. Also provides
a minimal ``psutil`` when it is not installed (TRL's testing_utils imports it for a memory check)
and answers "not available" for package checks the installed TRL does not have.
"""

from __future__ import annotations

import os
import sys
import types


def _psutil_stand_in() -> None:
    try:
        import psutil  # noqa: F401
    except ImportError:
        module = types.ModuleType("psutil")

        def virtual_memory():
            return types.SimpleNamespace(total=64 << 30, available=32 << 30)

        module.virtual_memory = virtual_memory  # type: ignore[attr-defined]
        sys.modules["psutil"] = module


def _missing_availability_checks() -> None:
    """TRL's test helpers may import ``is_<package>_available`` checks the installed TRL lacks (tests
    from a newer checkout): those report the package as unavailable, so the tests needing it skip."""
    import trl.import_utils as import_utils

    def __getattr__(name: str):
        if name.startswith("is_") and name.endswith("_available"):
            return lambda *args, **kwargs: False
        raise AttributeError(f"module 'trl.import_utils' has no attribute {name!r}")

    if not hasattr(import_utils, "__getattr__"):
        import_utils.__getattr__ = __getattr__  # type: ignore[attr-defined]


def pytest_configure(config) -> None:
    _psutil_stand_in()
    _missing_availability_checks()
    name = os.environ.get("ADAPTIVE_ALLOCATOR", "stock")
    if name == "stock":
        return
    import trl

    from adaptive_rollouts.integrations.trl import AdaptiveGRPOTrainer

    allocator = None if name == "default" else name

    class GRPOTrainer(AdaptiveGRPOTrainer):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("allocator", allocator)
            super().__init__(*args, **kwargs)

    trl.GRPOTrainer = GRPOTrainer
