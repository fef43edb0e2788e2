"""The ladder's learning target read off a demo protocol summary: the default's speedup against
1.5x, its interval against 1 and the null control's, its share of the known-p skip rule's, and
its variants with their head-to-head readings (`ladder_tables` and README's line render them)."""

from __future__ import annotations

from adaptive_rollouts.reporting.markdown import fmt
from adaptive_rollouts.reporting.saving_tables import speedup_interval

__all__ = [
    "GAIN_STATISTIC",
    "LADDER_SHARE_OF_KNOWN_P",
    "LADDER_SPEEDUP",
    "TARGET_STATISTIC",
    "ladder_reading",
    "ladder_target_met",
    "primary",
    "versus_text",
]

# The ladder's learning target: the default reaches Uniform's targets with at least this many times
# fewer generated rollouts, with its interval above 1 and above the null control's, and at least
# this share of the known-p skip rule's speedup.
LADDER_SPEEDUP, LADDER_SHARE_OF_KNOWN_P = 1.5, 0.6


GAIN_STATISTIC = (
    "Speedups: the map's statistic, Uniform's rollouts (tokens, modelled time) to 50%, 75% and 90% of the gain "
    "over the arm's, geometric mean over the three, on the seed-mean curves; 95% jackknife-t intervals over the "
    "paired seeds."
)
TARGET_STATISTIC = (
    "Speedups: rollouts (tokens, modelled time) to one target at half the run on the seed-mean curves; 95% "
    "paired bootstrap intervals (this summary predates the map's statistic on the ladder)."
)


def primary(d: dict) -> dict:
    """The ladder's statistic of one arm on one cost axis: the map's statistic (``gain``: three
    shares of the gain, jackknife-t) where the summary has it, else the single target's.

    >>> primary({"speedup": 2.0, "ci95": [0, 3], "gain": {"speedup": 1.8, "ci95": [1.5, 2.1]}})["speedup"]
    1.8
    >>> primary({"speedup": 2.0, "ci95": [0, 3]})["speedup"]
    2.0
    """
    return d.get("gain", d)


def ladder_target_met(arm: dict, null: dict | None) -> bool:
    """The ladder target on one arm's statistic (`primary`): the estimate at `LADDER_SPEEDUP` or
    more, its interval above 1 and above the null control's (``null``: its statistic, None when the
    summary has no null control).

    >>> ladder_target_met({"speedup": 1.8, "ci95": [1.2, 2.6]}, {"speedup": 1.0, "ci95": [0.8, 1.1]})
    True
    >>> ladder_target_met({"speedup": 1.8, "ci95": [1.2, 2.6]}, {"speedup": 1.1, "ci95": [0.9, 1.3]})
    False
    """
    lo = arm["ci95"][0]
    return arm["speedup"] >= LADDER_SPEEDUP and lo > 1 and (null is None or lo > null["ci95"][1])


def ladder_reading(arms: dict[str, dict], subject: str = "default") -> list[str]:
    """The ladder target read off a protocol summary's arms (by name) for arm ``subject`` (the
    default, or a variant of it checked on its own): what holds and what does not.

    >>> arm = lambda s, lo, hi: {"rollouts": {"speedup": s, "ci95": [lo, hi]}}
    >>> arms = {"default": arm(1.8, 1.2, 2.6), "null": arm(1.0, 0.8, 1.1), "oracle-skip": arm(2.5, 1.9, 3.3)}
    >>> ladder_reading(arms)[0]
    "Target: the default's speedup in rollouts >= 1.5, its interval above 1 and above the null control's: met (1.80 (95% 1.20-2.60))"
    >>> ladder_reading(arms)[1]
    "- interval above 1: yes; above the null control's (0.80-1.10): yes; interval clears 1.5: no"
    >>> ladder_reading({**arms, "default": arm(1.8, 0.0, 2.6)})[0].rsplit(": ", 1)[1]
    'missed (1.80 (95% 0.00-2.60))'
    >>> ladder_reading({**arms, "default@true-p": arm(2.0, 1.5, 2.5)})[-1]
    "- the default's variants (other sources or rules), speedup and share of the known-p rule's: default@true-p 2.00 (95% 1.50-2.50), 0.80"
    """
    if subject not in arms:
        return []
    d = primary(arms[subject]["rollouts"])
    lo, hi = d["ci95"]
    who = "the default's" if subject == "default" else f"{subject}'s"
    null = arms.get("null", {}).get("rollouts")
    null = None if null is None else primary(null)
    above_null = null is None or lo > null["ci95"][1]
    met = ladder_target_met(d, null)
    out = [
        f"Target: {who} speedup in rollouts >= {LADDER_SPEEDUP:g}, its interval above 1 and above the null "
        f"control's: {'met' if met else 'missed'} ({speedup_interval(d)})"
    ]
    parts = [f"interval above 1: {'yes' if lo > 1 else 'no'}"]
    if null is not None:
        nlo, nhi = null["ci95"]
        parts.append(f"above the null control's ({fmt(nlo)}-{fmt(nhi)}): {'yes' if above_null else 'no'}")
    parts.append(f"interval clears {LADDER_SPEEDUP:g}: {'yes' if lo >= LADDER_SPEEDUP else 'no'}")
    out.append("- " + "; ".join(parts))
    if arms[subject].get("versus"):  # a variant read as the target's arm: against what it adds to
        out.append(f"- {who} head to head{versus_text(arms[subject]['versus'])}")
    known = arms.get("oracle-skip", {}).get("rollouts")
    if known is not None:
        known = primary(known)
        share = d["speedup"] / known["speedup"]
        out.append(
            f"- share of the known-p skip rule's speedup ({fmt(known['speedup'], inf='never')}): {fmt(share)} "
            f"(target >= {LADDER_SHARE_OF_KNOWN_P:g}: {'met' if share >= LADDER_SHARE_OF_KNOWN_P else 'missed'})"
        )
        # the default given other sources (the policy's view, similar prompts, the sampled p itself) or rules
        variants = [
            (name, primary(a["rollouts"]), a.get("versus"))
            for name, a in arms.items()
            if name.startswith("default") and name != subject
        ]
        if variants:
            shares = "; ".join(
                f"{name} {speedup_interval(v)}, {fmt(v['speedup'] / known['speedup'])}{versus_text(versus)}"
                for name, v, versus in variants
            )
            out.append(
                f"- the default's variants (other sources or rules), speedup and share of the known-p rule's: {shares}"
            )
    return out


def versus_text(versus: list[dict] | None) -> str:
    """A variant's head-to-head readings against the arms it adds options to (the summary's
    ``versus``, `demo.protocol_speed.head_to_head`), 90% intervals; empty where the summary has none.

    >>> versus_text([{"arm": "default+view", "speedup": 0.85, "ci90": [0.72, 1.01]}])
    ' (over default+view, paired: 0.85 (90% 0.72-1.01), not separated)'
    >>> versus_text(None)
    ''
    """
    parts = []
    for v in versus or []:
        lo, hi = v["ci90"]
        reading = "ahead" if lo > 1 else "behind" if hi < 1 else "not separated"
        parts.append(f"over {v['arm']}, paired: {fmt(v['speedup'])} (90% {fmt(lo)}-{fmt(hi)}), {reading}")
    return f" ({'; '.join(parts)})" if parts else ""
