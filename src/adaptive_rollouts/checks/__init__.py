"""Input checks: every check of a value entering the library, one function each, called where the
value enters (public entry points, trainer plug-ins, command line).

- `validation`: prompts, budget and bounds, weights, probabilities, real numbers, every name list
  (`check_choice`, ``ESTIMATORS``, ``AGGREGATIONS``) and `InfeasibleBudgetError`;
- `rewards`: the rewards of a batch, one group per prompt;
- `arguments`: command-line argument types and `UsageError`.
"""
