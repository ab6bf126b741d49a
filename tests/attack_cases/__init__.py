"""The attack suite's cases (see tests/sandbox/test_attacks.py); importing this registers them all."""

from attack_cases import inside, outside
from attack_cases.base import ATTACKS, Attack

__all__ = ["ATTACKS", "Attack", "inside", "outside"]
