import pytest

from adaptive_rollouts.progress import progress_bar, progress_write


def test_a_disabled_bar_is_a_silent_stand_in(capsys):
    bar = progress_bar(5, enabled=False)
    bar.update(2)
    bar.set_postfix_str("seed 0")
    bar.close()
    assert capsys.readouterr() == ("", "")


def test_an_enabled_bar_counts_from_initial(capsys):
    pytest.importorskip("tqdm")
    bar = progress_bar(10, desc="demo", unit="step", initial=4)
    bar.update(3)
    assert (bar.n, bar.total, bar.desc, bar.unit) == (7, 10, "demo", "step")
    bar.close()
    progress_write("line above the bar")
    assert "line above the bar" in capsys.readouterr().out
