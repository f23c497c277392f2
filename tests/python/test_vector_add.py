"""Parity of torch.ops.tile.vector_add with torch on the CPU, and its input checks."""

import pytest
import torch

import torch_tile

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [0, 1, 98432, 2**20 + 3]


def random(shape, dtype):
    return torch.randn(shape, dtype=torch.float32).to(dtype)


def assert_parity(out, a, b):
    expected = a + b
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    assert out.device == expected.device
    # One correctly rounded addition per element (half types are summed in float32 and
    # rounded once, as torch does): the results must agree bit for bit.
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_parity(dtype, size):
    a, b = random(size, dtype), random(size, dtype)
    assert_parity(torch.ops.tile.vector_add(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 1, 1000, 3), (0, 4), (1,)])
def test_any_rank(dtype, shape):
    a, b = random(shape, dtype), random(shape, dtype)
    assert_parity(torch.ops.tile.vector_add(a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous(dtype):
    base = random((300, 517), dtype)
    other = random((517, 300), dtype)
    transposed = other.t()
    assert not transposed.is_contiguous()
    assert_parity(torch.ops.tile.vector_add(base, transposed), base, transposed)

    sliced = random((300, 1034), dtype)[:, ::2]
    assert not sliced.is_contiguous()
    assert_parity(torch.ops.tile.vector_add(sliced, base), sliced, base)

    broadcast_view = random((1, 517), dtype).expand(300, 517)
    assert_parity(torch.ops.tile.vector_add(broadcast_view, base), broadcast_view, base)

    offset_view = random(10_000, dtype)[17:17 + 4099]
    other_1d = random(4099, dtype)
    assert_parity(torch.ops.tile.vector_add(offset_view, other_1d), offset_view, other_1d)


def test_special_values():
    a = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 3.0e38])
    b = torch.tensor([1.0, float("-inf"), 1.0, -0.0, -0.0, 3.0e38])
    out = torch.ops.tile.vector_add(a, b)
    torch.testing.assert_close(out, a + b, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(out), torch.signbit(a + b))


def test_inputs_untouched():
    a, b = random(5000, torch.float32), random(5000, torch.float32)
    a_copy, b_copy = a.clone(), b.clone()
    torch.ops.tile.vector_add(a, b)
    assert torch.equal(a, a_copy) and torch.equal(b, b_copy)


def test_compiled_on_first_call_then_cached():
    torch_tile.runtime.clear_cache()
    a, b = random(1000, torch.float16), random(1000, torch.float16)
    torch.ops.tile.vector_add(a, b)
    def counts():
        stats = torch_tile.runtime.cache_stats()
        return stats["hits"], stats["misses"]

    assert counts() == (0, 1)
    assert_parity(torch.ops.tile.vector_add(a, b), a, b)
    assert counts() == (1, 1)


def test_runtime_reports_host_target():
    assert torch_tile.runtime.host_target().startswith("cpu:")
    assert torch_tile.runtime.compiler_version().startswith("torch-tile ")


@pytest.mark.parametrize(
    "a, b, error, message",
    [
        (torch.zeros(4), torch.zeros(5), RuntimeError, "shapes differ"),
        (torch.zeros(2, 3), torch.zeros(3, 2), RuntimeError, "shapes differ"),
        (torch.zeros(4), torch.zeros(1), RuntimeError, "does not broadcast"),
        (torch.zeros(4), torch.zeros(4, dtype=torch.float16), RuntimeError, "dtypes differ"),
        (torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), TypeError,
         "unsupported dtype"),
        (torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32), TypeError,
         "unsupported dtype"),
        (torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool), TypeError,
         "unsupported dtype"),
        (torch.zeros(4, dtype=torch.complex64), torch.zeros(4, dtype=torch.complex64),
         TypeError, "unsupported dtype"),
        (torch.zeros(4), torch.zeros(4, device="meta"), RuntimeError, "is on meta"),
    ],
)
def test_bad_input_raises(a, b, error, message):
    with pytest.raises(error, match=message):
        torch.ops.tile.vector_add(a, b)


def test_matmul_schemas_are_registered():
    schemas = {str(torch.ops.tile.matmul.default._schema),
               str(torch.ops.tile.matmul_leaky_relu.default._schema),
               str(torch.ops.tile.vector_add.default._schema)}
    assert schemas == {
        "tile::matmul(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor? bias=None) "
        "-> Tensor",
        "tile::matmul_leaky_relu(Tensor a, Tensor b, float negative_slope=0.01, *, "
        "ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor",
        "tile::vector_add(Tensor a, Tensor b) -> Tensor",
    }
