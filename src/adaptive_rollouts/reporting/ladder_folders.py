"""The ladder's committed protocol folders: what each checked, the arm its target is read for, and
the note its table carries (`ladder_tables` renders them in `FOLDERS` order)."""

from __future__ import annotations

__all__ = [
    "BEFORE_SHORT",
    "BEFORE_SWITCH",
    "FOLDERS",
    "LADDER_CARRIED",
    "LADDER_CARRIED_SKIP",
    "LADDER_FRESH",
    "LADDER_LATEST",
    "LADDER_PRIOR",
    "LADDER_PRIOR_BEFORE",
    "LADDER_PROTOCOL",
    "LADDER_SHARP",
    "LADDER_SHARP_BEFORE",
    "LADDER_SHORT",
    "LADDER_SKIP",
    "LADDER_SKIP_MEASURED",
    "LADDER_SKIP_MEASURED_FIRST",
    "LADDER_SHARE",
    "LADDER_WIDE",
    "NOTES",
    "RENAMED",
    "SUBJECTS",
]

LADDER_PROTOCOL = "results/demo_ladder/protocol"
LADDER_FRESH = "results/demo_ladder/fresh_seeds"  # a variant of the protocol's runs, checked on seeds not seen before
LADDER_WIDE = "results/demo_ladder/seeds_16_47"  # the bound on pilots on 32 further seeds, after that switch
LADDER_SHORT = "results/demo_ladder/seeds_48_79"  # the default with short pilots on 32 more seeds, after that switch
LADDER_SHARP = (
    "results/demo_ladder/seeds_112_143"  # the probe on the whole hidden state, 32 more seeds, after that switch
)
LADDER_SHARP_BEFORE = "results/demo_ladder/seeds_112_143_before"  # the same seeds, the default+view before that switch
LADDER_PRIOR = "results/demo_ladder/seeds_144_175"  # a weaker prior on the probe's weights, tried on 32 more seeds
LADDER_PRIOR_BEFORE = "results/demo_ladder/seeds_144_175_before"  # the same seeds, the default+view as shipped
LADDER_CARRIED = (
    "results/demo_ladder/seeds_216_247"  # the default with a belief carried from earlier runs, 32 more seeds
)
LADDER_SKIP = "results/demo_ladder/seeds_248_279"  # skipping unseen with the present belief, 32 more seeds
LADDER_SKIP_MEASURED_FIRST = "results/demo_ladder/seeds_280_311"  # skipping unseen where measured, first form
LADDER_SKIP_MEASURED = "results/demo_ladder/seeds_312_343"  # skipping unseen where measured to pay, 32 more seeds
LADDER_CARRIED_SKIP = "results/demo_ladder/seeds_344_375"  # a carried belief that also skips unseen, 32 more seeds
LADDER_SHARE = "results/demo_ladder/seeds_376_407"  # the share 0.2 against the shipped 0.1, 32 more seeds
LADDER_LATEST = LADDER_SHARE  # what README's line reads
# The protocol's runs precede the bound per group on pilots as the default: there its arm ``default``
# is the rule without it, and the bound on pilots (with the policy's view) ran under its explicit name.
# The arm each folder's target is read for, the first of these it has.
SUBJECTS = {
    LADDER_PROTOCOL: ("default[flat_chance=0.1;bound_skips=False]+view", "default"),
    LADDER_FRESH: ("default+view", "default"),
    LADDER_WIDE: ("default", "default+view"),
    LADDER_SHORT: ("default", "default+view"),
    LADDER_SHARP: ("default+view", "default"),  # the trainer's default now gives the view where it can
    LADDER_SHARP_BEFORE: ("default+view",),
    LADDER_PRIOR: ("default+view", "default"),
    LADDER_PRIOR_BEFORE: ("default+view",),
    LADDER_CARRIED: ("default+view", "default"),
    LADDER_SKIP: ("default+view",),
    LADDER_SKIP_MEASURED_FIRST: ("default+view",),
    LADDER_SKIP_MEASURED: ("default+view",),
    LADDER_CARRIED_SKIP: ("default+view",),
    LADDER_SHARE: ("default[share=0.2]+view",),  # the default since this check
}
BEFORE_SWITCH = (
    "The runs of `default` and of its variants without `flat_chance` here precede the switch: they are the "
    "rule without the bound per group. `default[flat_chance=0.1;bound_skips=False]` is the rule with the bound "
    "on pilots, full pilots of 4 (`+view`: with the policy's view)."
)
BEFORE_SHORT = (
    "These runs precede short pilots: their `default` is the rule with full pilots of 4, "
    "`default[short_pilots=False]` today."
)
BEFORE_SHARP = (
    "These runs precede the probe on the whole hidden state: their belief saw a random projection of it to "
    "32 columns and added the probe weights' variance to the spread of p."
)
TRIED_PRIOR = (
    "These runs tried a weaker prior on the probe's weights (prior variance 10 per weight; the shipped belief "
    "has 1), not adopted: their `default` and `default+view` are that variant."
)
CARRIED = (
    "`default[belief_from=...]+view` starts the default's belief from a state learned on earlier runs "
    "(`results/carried_belief`: the first of the sixteen development traces, or all of them; Uniform runs "
    "of the same warm-started model on a recurring pool of the ladder, other seeds): the regression of p "
    "on the policy's view and its calibration, no prompt history. Those runs' rollouts are not charged here."
)
NOTES = {
    LADDER_PROTOCOL: BEFORE_SWITCH,
    LADDER_FRESH: BEFORE_SHORT,
    LADDER_WIDE: BEFORE_SHORT,
    LADDER_SHORT: BEFORE_SHARP,
    LADDER_SHARP_BEFORE: BEFORE_SHARP
    + " They ran on the seeds of the table above, beside the same Uniform runs (copied, not re-run).",
    LADDER_PRIOR: TRIED_PRIOR,
    LADDER_CARRIED: CARRIED,
    LADDER_SKIP: "A check of skipping unseen (`default[bound_skips=True]+view`: the bound also before any rollout) "
    "with the present belief against the default as shipped, on seeds fixed before the run.",
    LADDER_SKIP_MEASURED_FIRST: "A check of the first form of skipping unseen where the run has measured that it "
    "pays (`[bound_skips='measured']` when a step skipped only while the chance that the prompts the bound would "
    "skip yield fewer varied groups per rollout than the rest was at least 0.9: a one-sided test), with the learned "
    "belief and view and with the known p (`default@true-p`), against the default as shipped, on seeds fixed "
    "before the run.",
    LADDER_SKIP_MEASURED: "A check of skipping unseen where the run has measured that it pays "
    "(`[bound_skips='measured']`, the two-sided test: it starts once the prompts the bound would skip yield fewer "
    "varied groups per rollout than the rest with chance 0.9, and stops once they yield more with chance 0.9), "
    "with the learned belief and view and with the known p (`default@true-p`), against the default as shipped, on "
    "seeds fixed before the run.",
    LADDER_CARRIED_SKIP: "A check of skipping unseen on a sharper belief: the belief carried from sixteen earlier "
    "runs (`belief_from=...belief_dev16.npz`, as in the seeds 216-247 table) with and without `bound_skips=True`, "
    "beside the default as shipped, on seeds fixed before the run (the skipping one is read head to head against "
    "the carried belief and against `default+view`).",
    LADDER_SHARE: "A check of the share epsilon at 0.2 (`default[share=0.2]+view`: the step may give up a fifth of "
    "its expected signal) beside the default as shipped then (`default+view`, a tenth), on seeds fixed before the "
    "run, read head to head; the share 0.2 became the default after this check (docs/saving.md), so the target "
    "is read for it.",
    LADDER_PRIOR_BEFORE: "The default with the policy's view as shipped (the unit prior), on the seeds of the table "
    "above, beside the same Uniform runs (copied, not re-run).",
}

# arms whose name meant another rule when they ran than it does now: their label in README's line
RENAMED = {LADDER_SHARE: {"default+view": "the default as shipped before, a share of a tenth (with the view)"}}

FOLDERS = (
    LADDER_PROTOCOL,
    LADDER_FRESH,
    LADDER_WIDE,
    LADDER_SHORT,
    LADDER_SHARP,
    LADDER_SHARP_BEFORE,
    LADDER_PRIOR,
    LADDER_PRIOR_BEFORE,
    LADDER_CARRIED,
    LADDER_SKIP,
    LADDER_SKIP_MEASURED_FIRST,
    LADDER_SKIP_MEASURED,
    LADDER_CARRIED_SKIP,
    LADDER_SHARE,
)
"""Every folder, in the order the docs show them."""
