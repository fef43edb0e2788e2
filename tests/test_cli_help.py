"""The command line as a new user meets it: every option documented with its default, `--help`
describing today's tool, `allocate` echoing what it solved, and user errors as one `error:` line
naming the flag to change (exit status 2, no traceback)."""

import argparse

import pytest

from adaptive_rollouts.cli import build_parser, main


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


@pytest.mark.parametrize("command", ["allocate", "demo", "bench"])
def test_every_option_has_help_and_shows_its_default(command):
    sub = _subparsers(build_parser())[command]
    text = sub.format_help()
    for action in sub._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help text"
        if action.default is False:  # a flag
            continue
        rendered = sub._get_formatter()._expand_help(action) if action.help else ""
        if action.required:
            continue
        assert "(default" in rendered, f"{command} {action.option_strings[0]} shows no default: {rendered!r}"
    assert text.count("(default") >= 3


def test_main_help_describes_the_saving_default_not_a_fixed_budget():
    text = build_parser().format_help()
    assert "under a fixed budget" not in text
    assert "VIP vs VIGOR" not in text
    assert "pilots every prompt with 2" in text and 'kind "save"' in text


def test_allocate_echoes_objective_bounds_and_counts_per_p(capsys):
    assert main(["allocate", "--p", "0.1,0.5,0.9", "--budget", "12"]) == 0
    out = capsys.readouterr().out
    assert "objective: rloo" in out
    assert "budget: 12 rollouts over 3 prompts, lower 2, upper no limit but the budget" in out
    p_line = next(line for line in out.splitlines() if line.startswith("p:"))
    assert p_line.split()[1:] == ["0.1", "0.5", "0.9"]


def test_allocate_lower_one_gives_the_prompt_with_signal_two(capsys):
    assert main(["allocate", "--p", "0.0,0.5,1.0", "--budget", "4", "--lower", "1"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("rollouts:"))
    assert line.split()[1:] == ["1", "2", "1"]


@pytest.mark.parametrize(
    "argv, flag, hint",
    [
        (["--p", "0.1,0.5,0.9", "--budget", "4", "--lower", "2"], "--budget 4 is below --lower 2 x 3 prompts", ">= 6"),
        (["--p", "0.1,0.5", "--budget", "20", "--upper", "4"], "--budget 20 is above --upper 4 x 2 prompts", "<= 8"),
        (["--p", "0.1,0.5", "--budget", "6", "--lower", "3", "--upper", "2"], "--upper 2 is below --lower 3", ""),
        (["--p", "0.1,,0.5", "--budget", "6"], "argument --p", "comma-separated"),
        (["--p", "0.1,1.5", "--budget", "6"], "argument --p", "[0, 1]"),
        (["--p", "0.1", "--budget", "x"], "argument --budget", "invalid integer"),
        (["--p", "0.1", "--budget", "4", "--objective", "ppo"], "argument --objective", "invalid choice"),
    ],
)
def test_allocate_errors_name_the_flag_one_line_exit_2(argv, flag, hint, capsys):
    with pytest.raises(SystemExit) if "argument" in flag else _no_raise():
        code = main(["allocate", *argv])
        assert code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and flag in lines[0] and hint in lines[0], err
    assert "upper=" not in err and "Traceback" not in err


class _no_raise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("methods", ["uniform,,default", "uniform,uniform", ""])
def test_demo_methods_use_the_one_comma_list_rule(methods, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--methods", methods, "--out", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "argument --methods" in err and "Traceback" not in err
