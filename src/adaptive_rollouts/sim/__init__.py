"""Learning simulator: a linear-softmax policy trained from allocated rollouts.

>>> from adaptive_rollouts.sim import make_problem, train, TrainConfig, OracleAllocator
>>> pb = make_problem("hard-heavy", n_prompts=300, n_test=100, seed=0)
>>> tr = train(pb, OracleAllocator(lambda ps: (pb.success(list(ps)), pb.reward_variance(list(ps)))),
...            TrainConfig(steps=5, batch_prompts=16, budget=128, optimizer="sgd", lr=300.0, grad_var_every=0))
>>> tr["rollouts"][-1]
640
"""

from adaptive_rollouts.sim.estimators import AGGREGATIONS, aggregation_weights, group_advantages_np, policy_gradient
from adaptive_rollouts.sim.lengths import LengthModel
from adaptive_rollouts.sim.oracle import OracleAllocator, TruePredictor
from adaptive_rollouts.sim.problem import SCENARIOS, Problem, make_problem
from adaptive_rollouts.sim.train import Simulator, TrainConfig, train

__all__ = [
    "AGGREGATIONS",
    "SCENARIOS",
    "LengthModel",
    "OracleAllocator",
    "Problem",
    "Simulator",
    "TrainConfig",
    "TruePredictor",
    "aggregation_weights",
    "group_advantages_np",
    "make_problem",
    "policy_gradient",
    "train",
]
