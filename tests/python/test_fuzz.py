"""Property test of the matmul ops on the CPU: a fixed budget of seeded random cases
(torch_tile.testing) against a float64 reference. A failure prints a reproducer."""

import pytest

from torch_tile.testing import cases, check, run

# About 300 cases keep this file to a few seconds of kernel compiles and runs in CI.
CPU_CASES = cases(300, seed=20261123)


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda case: f"seed{case.seed}")
def test_random_case_matches_float64(case):
    a, b = case.operands("cpu")
    bias = case.bias_operand("cpu")
    a_before, b_before = a.clone(), b.clone()
    try:
        out = run(case, a, b, bias)
        check(case, a, b, out, bias)
        assert a.equal(a_before) and b.equal(b_before), "the op wrote to its inputs"
    except Exception as error:
        raise AssertionError(f"{case}: {error}\nreproducer:\n{case.reproducer()}") from error
