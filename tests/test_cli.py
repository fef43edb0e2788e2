"""The console script's `allocate` subcommand prints the exact optimum."""

from adaptive_rollouts.cli import main


def test_allocate_command_prints_worked_example(capsys):
    assert (
        main(
            [
                "allocate",
                "--p",
                "0.01,0.1,0.2,0.4,0.5,0.8,0.95,0.99",
                "--budget",
                "64",
                "--lower",
                "4",
                "--upper",
                "12",
                "--objective",
                "drgrpo",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "objective: drgrpo" in out and "budget: 64 rollouts over 8 prompts, lower 4, upper 12" in out
    assert _rollouts(out) == [4, 7, 10, 12, 12, 10, 5, 4]


def _rollouts(out):
    """The counts of the `rollouts:` line of `allocate`'s output."""
    line = next(line for line in out.splitlines() if line.startswith("rollouts:"))
    return [int(c) for c in line.split()[1:]]


def test_allocate_command_grpo_sums_to_budget(capsys):
    assert main(["allocate", "--p", "0.1,0.5,0.9", "--budget", "24", "--lower", "2", "--objective", "grpo"]) == 0
    counts = _rollouts(capsys.readouterr().out)
    assert sum(counts) == 24 and counts[1] == max(counts)


def test_map_cells_must_be_known(tmp_path, capsys):
    assert main(["bench", "--map", "--cells", "d16-Q32,nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown cells ['nope']" in err and "d128-Q16-L16" in err
    assert not (tmp_path / "runs.jsonl").exists()


def test_cells_without_map_is_an_error_not_ignored(tmp_path, capsys):
    assert main(["bench", "--cells", "d16-Q32", "--out", str(tmp_path)]) == 2
    assert "add --map" in capsys.readouterr().err
