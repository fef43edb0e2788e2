"""Rule-based reward of the verl harness (loaded by verl's reward manager from its path):
1 if the answer says "right", else 0; data source "pm1" scores +-1 instead."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    ok = "right" in solution_str.split()
    if data_source == "pm1":
        return 1.0 if ok else -1.0
    return 1.0 if ok else 0.0
