"""Every `>>>` example in the library runs (the modules without a framework, plus advantages)."""

import doctest
import importlib
import pkgutil

import pytest

import adaptive_rollouts

EDGE = ("adaptive_rollouts.integrations", "adaptive_rollouts.demo", "adaptive_rollouts.cli")
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(adaptive_rollouts.__path__, "adaptive_rollouts.")
    if not m.name.startswith(EDGE) and m.name != "adaptive_rollouts.__main__"
) + ["adaptive_rollouts"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTIVE_ROLLOUTS_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} failing examples in {name}"


def test_public_classes_have_examples():
    """BoTorch style: each published method documents its rule with a runnable example."""
    from adaptive_rollouts import allocators, predictors

    methods = [c for c in allocators.ALLOCATORS.values() if isinstance(c, type)]
    methods += [getattr(predictors, n) for n in predictors.__all__]
    missing = [c.__name__ for c in methods if isinstance(c, type) and ">>>" not in (c.__doc__ or "")]
    assert not missing, f"classes without a >>> example: {missing}"
