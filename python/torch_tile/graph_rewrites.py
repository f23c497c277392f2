"""Rewrites of Inductor's post-grad aten graphs onto the tile ops, shared by the "tile"
torch.compile backend (backend.py) and the hook into the default Inductor (inductor.py).

They run as a post-grad pass after Inductor's own (post_grad_custom_post_pass), on every
graph Inductor lowers: the inference graph, and the forward and the backward of training.
By then the partitioner has fixed what the forward saves, so a rewrite sees everything that
reads a value it replaces, and Inductor's patterns have settled which GEMMs are mm and which
addmm. There, leaky_relu(x, slope) is decomposed into where(gt(x, 0), x, mul(x, slope)) and
its backward into where(gt(x, 0), grad, mul(grad, slope)). Left alone, the partitioner has
the forward compute that mask and save it (a byte per element, where x itself would take
two), which costs a pointwise kernel of its own once x lives only inside the fused kernel.
So a pass on the joint graph (JointRewritePass, before the partition) first points the
backward's mask at leaky_relu's output, which the next GEMM's backward saves anyway. The
backward's grad is a GEMM's output too (the next layer's gradient times its weight): that
GEMM takes the gate into its epilogue (tile.matmul_leaky_relu_backward).

Which GEMMs move to tile is torch_tile.config.backend_matmul's: every eligible one
("always"), none ("never"), or those whose shape bucket tile was measured to win on this
device ("auto", backend_choice.py).
"""

import logging
import math
from collections.abc import Callable

import torch
from torch._guards import detect_fake_mode
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files
from torch._prims_common import is_contiguous_or_false
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

from . import backend_choice, config, ops  # noqa: F401  (ops defines tile_inductor's op)

aten = torch.ops.aten
tile = torch.ops.tile
tile_inductor = torch.ops.tile_inductor
log = logging.getLogger(__name__)

# What the tile kernels take, other than int8 (which aten graphs express as _int_mm; left
# to Inductor) and out_dtype (aten.mm.dtype; left to Inductor too).
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
DEVICE_TYPES = ("cpu", "cuda")

# The smallest add, in elements, from which tile.vector_add beats the kernel Inductor
# generates for an add that nothing fuses with, per device type; absent: never.
# benchmarks/bench_graph_add.py (results/bench_graph_add_cpu.json) times both inside
# Inductor-compiled functions on this project's znver5 CPU, 2 threads: tile.vector_add runs
# at 0.75-0.98x of Inductor's speed for float32, float16 and bfloat16 from 2**10 to 2**22
# elements (2-4 us more per call when small: the op's call through the dispatcher), and at
# 0.99-1.04x at 2**24, where both wait on memory (within run-to-run noise); with 1 thread,
# 0.76-1.04x at every size. On an H200 it runs at 0.85-0.99x of eager torch.add
# (results/bench_vector_add_cuda.json); Inductor's own add was not timed there. List a
# device here once a measurement shows a size from which tile wins.
VECTOR_ADD_MIN_ELEMENTS: dict[str, int] = {}

# Whether to put a GEMM on tile: (op name, fake a, fake b, bias=fake bias or None) -> bool.
# None: every eligible one.
GemmFilter = Callable[..., bool] | None

# Kernels Inductor calls as they are: no pointwise kernel fuses into their inputs or outputs.
_TILE_OPS = (tile.matmul.default, tile.matmul_leaky_relu.default,
             tile.matmul_leaky_relu.Tensor, tile.matmul_leaky_relu_backward.default,
             tile.vector_add.default, tile_inductor.matmul_leaky_relu_bias.default)


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _on_tile_device(*tensors) -> bool:
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        return False
    first = tensors[0]
    return (first.device.type in DEVICE_TYPES and first.dtype in FLOAT_DTYPES
            and all(t.device == first.device and t.dtype == first.dtype for t in tensors))


def _is_tile_matmul(a, b) -> bool:
    return _on_tile_device(_val(a), _val(b)) and _val(a).dim() == 2 and _val(b).dim() == 2


def _insert_after(node, target, args, kwargs=None):
    """A call of `target` right after `node`, with its fake value for later passes."""
    graph = node.graph
    kwargs = kwargs or {}
    with graph.inserting_after(node):
        new = graph.call_function(target, args, kwargs)
    fake = lambda arg: _val(arg) if isinstance(arg, torch.fx.Node) else arg  # noqa: E731
    fake_args = [fake(arg) for arg in args]
    fake_kwargs = {name: fake(arg) for name, arg in kwargs.items()}
    with unset_fake_temporarily(), detect_fake_mode([*fake_args, *fake_kwargs.values()]):
        new.meta["val"] = target(*fake_args, **fake_kwargs)
    if "stack_trace" in node.meta:
        new.meta["stack_trace"] = node.meta["stack_trace"]
    return new


def _gemm_parts(node):
    """(a, b, bias) when `node` is mm(a, b) (bias None) or addmm(bias, a, b) with beta = alpha
    = 1, on operands the tile kernels take; None otherwise."""
    if node.target == aten.mm.default:
        a, b = node.args
        return (a, b, None) if _is_tile_matmul(a, b) else None
    if node.target != aten.addmm.default or node.kwargs.get("beta", 1) != 1 \
            or node.kwargs.get("alpha", 1) != 1:
        return None
    bias, a, b = node.args
    if not (_is_tile_matmul(a, b) and _on_tile_device(_val(a), _val(bias))):
        return None
    return a, b, bias


def _kernel_takes_bias(bias, b) -> bool:
    """Whether an addmm's bias is one the kernels add in their epilogue: 1-D of length N
    (a Linear's), not a full M x N matrix or a broadcast row."""
    n = _val(b).shape[1]
    return _val(bias).dim() == 1 and statically_known_true(sym_eq(_val(bias).shape[0], n))


def _take_over_result(graph, fused, where, narrowed, scaled):
    """The fused op's node takes the place of a decomposed leaky_relu (or its backward),
    `where` and its narrowing where there is one, whose nodes go with its scaled branch."""
    (where if narrowed is None else narrowed).replace_all_uses_with(fused)
    if narrowed is not None:
        graph.erase_node(narrowed)
    graph.erase_node(where)
    graph.erase_node(scaled)


def _erase_gemm(graph, x, gemm_node):
    """The GEMM a fused op replaced, and its widening `x` where it had one."""
    graph.erase_node(x)
    if gemm_node is not x:
        graph.erase_node(gemm_node)


def _is_constant_slope(slope) -> bool:
    """A slope written into the graph as a finite number (not a node, not a bool)."""
    return (not isinstance(slope, bool) and isinstance(slope, (int, float))
            and math.isfinite(slope))


def _leaky_relu_parts(where):
    """(x, slope, mask, scaled) when `where` is leaky_relu(x, slope) as decomposed: slope a
    float, or the 0-d tensor node it is read from when it is a graph input."""
    if where.target != aten.where.self:
        return None
    mask, x, scaled = where.args
    if not (isinstance(mask, torch.fx.Node) and isinstance(scaled, torch.fx.Node)):
        return None
    if not (mask.target == aten.gt.Scalar and mask.args == (x, 0)):
        return None
    if not (scaled.target == aten.mul.Tensor and scaled.args[0] is x):
        return None
    slope = scaled.args[1]
    if isinstance(slope, torch.fx.Node):
        source = _runtime_slope(slope)
        return None if source is None else (x, source, mask, scaled)
    if not _is_constant_slope(slope):
        return None
    return x, float(slope), mask, scaled


def _runtime_slope(scale):
    """The 0-d tensor input that a leaky_relu's slope comes from when it is a graph input
    (dynamic=True makes float attributes inputs: torch._dynamo.config.specialize_float is
    False), where `scale` is its conversion to the activation's dtype; None otherwise."""
    if scale.target != torch.ops.prims.convert_element_type.default:
        return None
    source = scale.args[0]
    value = _val(source)
    if not (isinstance(source, torch.fx.Node) and isinstance(value, torch.Tensor)
            and value.dim() == 0 and value.dtype.is_floating_point and value.device.type == "cpu"):
        return None
    return source


def fuse_matmul_leaky_relu(graph: torch.fx.Graph, wanted: GemmFilter = None,
                           timed: bool = False) -> int:
    """leaky_relu(mm(a, b)) -> tile.matmul_leaky_relu(a, b), and leaky_relu(addmm(bias, a,
    b)) (a Linear with its bias) -> tile.matmul_leaky_relu(a, b, bias=bias); returns how
    many were fused.

    Only where nothing else reads the GEMM's output, and `wanted` accepts it; with `timed`
    (Inductor's max-autotune then times the fused op against its own GEMM + leaky_relu), a
    pair with a constant slope regardless, its bias passed positionally
    (tile_inductor.matmul_leaky_relu_bias, the form that timing takes). The backward's mask
    gt(x, 0) may read the fused output instead when slope >= 0: the output is then > 0
    exactly where x is.
    """
    fused_count = 0
    for where in list(graph.nodes):
        parts = _leaky_relu_parts(where)
        if parts is None:
            continue
        x, slope, mask, scaled = parts
        # float16 and bfloat16: leaky_relu as decomposed computes in float32, between a
        # widening of the GEMM's output and a narrowing of its own.
        gemm_node, narrowed = _widened_gemm(x, where)
        gemm = _gemm_parts(gemm_node)
        if gemm is None or (gemm[2] is not None and not _kernel_takes_bias(gemm[2], gemm[1])):
            continue
        a, b, bias = gemm
        masks = [user for user in x.users if user.target == aten.gt.Scalar
                 and user.args == (x, 0)]
        if set(x.users) != {where, scaled, *masks} or set(scaled.users) != {where}:
            continue
        masks_read_elsewhere = any(set(m.users) != {where} for m in masks)
        runtime = isinstance(slope, torch.fx.Node)
        # A slope that is a graph input has no sign when compiling.
        if masks_read_elsewhere and (runtime or slope < 0):
            continue
        timed_here = timed and not runtime
        if wanted is not None and not timed_here and not wanted("matmul_leaky_relu", _val(a), _val(b),
                                                                bias=_val(bias)):
            continue
        # A slope that is a graph input is read by the kernel's call, from its 0-d tensor,
        # at run time: no value of it compiles again.
        op = tile.matmul_leaky_relu.Tensor if runtime else tile.matmul_leaky_relu.default
        if timed_here and bias is not None:
            fused = _insert_after(x, tile_inductor.matmul_leaky_relu_bias.default, (a, b, bias, slope))
        else:
            fused = _insert_after(x, op, (a, b, slope), {} if bias is None else {"bias": bias})
        _take_over_result(graph, fused, where, narrowed, scaled)
        for m in masks:
            if m.users:
                m.replace_input_with(x, fused)
            else:
                graph.erase_node(m)
        _erase_gemm(graph, x, gemm_node)
        fused_count += 1
    return fused_count


def _leaky_relu_backward_parts(where):
    """(x, activation, slope, mask, scaled) when `where` is leaky_relu's backward as
    decomposed, where(gt(activation, 0), x, mul(x, slope)), x being the gradient of its
    output and activation its input or output (the joint pass points it at the output), with
    a constant slope; None otherwise. Any slope: the rewrite computes the same where."""
    if where.target != aten.where.self:
        return None
    mask, x, scaled = where.args
    if not all(isinstance(node, torch.fx.Node) for node in (mask, x, scaled)):
        return None
    if not (mask.target == aten.gt.Scalar and len(mask.args) == 2 and mask.args[1] == 0
            and isinstance(mask.args[0], torch.fx.Node) and mask.args[0] is not x):
        return None
    if not (scaled.target == aten.mul.Tensor and scaled.args[0] is x):
        return None
    slope = scaled.args[1]
    if not _is_constant_slope(slope):
        return None
    activation = mask.args[0]
    # gt(widened, 0) of a float16 or bfloat16 activation: its own sign is the same.
    if (activation.target == torch.ops.prims.convert_element_type.default
            and isinstance(activation.args[0], torch.fx.Node)
            and _val(activation.args[0]) is not None
            and _val(activation.args[0]).dtype in (torch.float16, torch.bfloat16)):
        activation = activation.args[0]
    return x, activation, float(slope), mask, scaled


def fuse_matmul_leaky_relu_backward(graph: torch.fx.Graph, wanted: GemmFilter = None) -> int:
    """leaky_relu's backward of a GEMM's output, where(gt(activation, 0), mm(a, b),
    mul(mm(a, b), slope)) (the backward of a Linear followed by leaky_relu: the gradient of
    the Linear's output, the next layer's gradient times its weight, gated by the
    activation's sign) -> tile.matmul_leaky_relu_backward(a, b, activation, slope); returns
    how many were fused.

    The gate then applies in the GEMM's epilogue, where Inductor's kernel for it read the
    GEMM's output and the activation and wrote the gradient: one trip through memory of the
    three where the fused kernel reads the activation alone. Only where nothing else reads
    the GEMM's output, the activation has the output's shape, and `wanted` accepts it.
    """
    fused_count = 0
    for where in list(graph.nodes):
        parts = _leaky_relu_backward_parts(where)
        if parts is None:
            continue
        x, activation, slope, mask, scaled = parts
        gemm_node, narrowed = _widened_gemm(x, where)
        gemm = _gemm_parts(gemm_node)
        if gemm is None or gemm[2] is not None:
            continue
        a, b, _ = gemm
        out, act = _val(narrowed if narrowed is not None else where), _val(activation)
        if not (isinstance(act, torch.Tensor) and act.device == out.device
                and act.dtype in (_val(a).dtype, out.dtype)
                and statically_known_true(sym_eq(act.shape, out.shape))):
            continue
        if set(x.users) != {where, scaled} or set(scaled.users) != {where}:
            continue
        if wanted is not None and not wanted("matmul_leaky_relu_backward", _val(a), _val(b)):
            continue
        # After both of its inputs: the activation may be computed after the GEMM.
        order = {node: i for i, node in enumerate(graph.nodes)}
        anchor = max(x, activation, key=order.__getitem__)
        fused = _insert_after(anchor, tile.matmul_leaky_relu_backward.default,
                              (a, b, activation, slope))
        _take_over_result(graph, fused, where, narrowed, scaled)
        if not mask.users:
            widened = mask.args[0]
            graph.erase_node(mask)
            if widened is not activation and not widened.users:
                graph.erase_node(widened)
        _erase_gemm(graph, x, gemm_node)
        fused_count += 1
    return fused_count


def _same_value_at_f32(node, source) -> bool:
    """`node` is `source` widened to float32."""
    return (node.target == torch.ops.prims.convert_element_type.default
            and node.args[0] is source and node.args[1] == torch.float32)


def mask_from_leaky_relu_output(graph: torch.fx.Graph) -> int:
    """On the joint graph: where leaky_relu(x, slope) has a constant slope >= 0, the
    backward's gt(x, 0) reads gt(out, 0) instead, out being leaky_relu's result (narrowed
    back to x's dtype where the decomposition widened it). The two are equal there: out > 0
    exactly where x > 0, NaN included. The partitioner then finds the mask's input already
    saved (the next GEMM's weight gradient reads out) and computes the mask in the backward,
    in the kernel that applies it, instead of a kernel of the forward writing it. Returns how
    many masks it moved."""
    moved = 0
    for where in list(graph.nodes):
        parts = _leaky_relu_parts(where)
        if parts is None or isinstance(parts[1], torch.fx.Node) or parts[1] < 0:
            continue
        x = parts[0]
        convert = torch.ops.prims.convert_element_type.default
        widened = x.target == convert and isinstance(x.args[0], torch.fx.Node)
        source = x.args[0] if widened else x
        out = where
        users = list(where.users)
        if widened and len(users) == 1 and users[0].target == convert \
                and users[0].args[1] == _val(source).dtype:
            out = users[0]
        # Every gt(x, 0) of the same value but the forward's own use of its mask.
        readers = [x, *(u for u in source.users if u is not x and _same_value_at_f32(u, source))]
        masks = [m for r in readers for m in r.users
                 if m.target == aten.gt.Scalar and m.args == (r, 0)]
        backward_uses = [(m, u) for m in masks for u in m.users if u is not where]
        if not backward_uses:
            continue
        moved_mask = _insert_after(out, aten.gt.Scalar, (out, 0))
        for mask, user in backward_uses:
            user.replace_input_with(mask, moved_mask)
        for mask in masks:
            if not mask.users:
                graph.erase_node(mask)
        for reader in readers[1:]:
            if not reader.users:
                graph.erase_node(reader)
        moved += 1
    return moved


def _widened_gemm(x, where):
    """(gemm, narrowed) where leaky_relu's input `x` is a float16 or bfloat16 GEMM's
    output widened to float32 (read by nothing else) and `where`, its result, is read only
    by its narrowing back to that dtype: the fused kernel's leaky_relu on its float32
    accumulator, rounded once, is then the pair's (which rounds the GEMM's output first:
    they differ by at most an ulp of the result where x < 0). (x, None) otherwise.
    """
    convert = torch.ops.prims.convert_element_type.default
    if x.target != convert or x.args[1] != torch.float32 or not isinstance(x.args[0], torch.fx.Node):
        return x, None
    gemm = x.args[0]
    narrow = _val(gemm).dtype
    users = list(where.users)
    if narrow not in (torch.float16, torch.bfloat16) or len(gemm.users) != 1 or len(users) != 1:
        return x, None
    narrowed = users[0]
    if narrowed.target != convert or narrowed.args[1] != narrow:
        return x, None
    return gemm, narrowed


def matmul_to_tile(graph: torch.fx.Graph, wanted: GemmFilter = None) -> int:
    """mm(a, b) -> tile.matmul(a, b), addmm(bias, a, b) -> tile.matmul(a, b, bias=bias) (a
    Linear with its bias), where `wanted` accepts the GEMM.

    An addmm whose bias the kernel does not take (an M x N matrix, a broadcast row)
    becomes tile.matmul(a, b) + bias, a plain aten add that Inductor fuses into the
    pointwise ops after it.
    """
    rewritten = 0
    for node in list(graph.nodes):
        parts = _gemm_parts(node)
        if parts is None:
            continue
        a, b, bias = parts
        added = None
        if bias is not None and not _kernel_takes_bias(bias, b):
            bias, added = None, bias
        if wanted is not None and not wanted("matmul", _val(a), _val(b), bias=_val(bias)):
            continue
        product = _insert_after(node, tile.matmul.default, (a, b),
                                {} if bias is None else {"bias": bias})
        result = product if added is None else _insert_after(product, aten.add.Tensor,
                                                             (product, added))
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        rewritten += 1
    return rewritten


def _fuses_with_nothing(node) -> bool:
    """Inductor makes no kernel of `node` that an add reading it could join."""
    return node.op in ("placeholder", "output") or node.target in _TILE_OPS


def add_to_vector_add(graph: torch.fx.Graph, min_elements: dict[str, int]) -> int:
    """Same-shape add(a, b) -> tile.vector_add(a, b) where nothing would fuse with the add:
    a and b come from graph inputs or tile kernels and are read by nothing Inductor would
    fuse (a sibling pointwise kernel could otherwise read them once with the add), the sum
    goes only to tile kernels or the output, and it has at least min_elements[device type].
    """
    rewritten = 0
    for node in list(graph.nodes):
        if node.target != aten.add.Tensor or node.kwargs.get("alpha", 1) != 1:
            continue
        a, b = node.args
        out = _val(node)
        if not (_on_tile_device(_val(a), _val(b), out) and is_contiguous_or_false(out)
                and statically_known_true(sym_eq(_val(a).shape, _val(b).shape))):
            continue
        threshold = min_elements.get(out.device.type)
        if threshold is None or not statically_known_true(out.numel() >= threshold):
            continue
        neighbours = [*a.users, *b.users, a, b, *node.users]
        if not all(n is node or _fuses_with_nothing(n) for n in neighbours):
            continue
        summed = _insert_after(node, tile.vector_add.default, (a, b))
        node.replace_all_uses_with(summed)
        graph.erase_node(node)
        rewritten += 1
    return rewritten


def _gemm_templates_in_play() -> bool:
    """Inductor's max-autotune times GEMM templates of its own (Triton's, its C++ one, ...)
    for the graph being compiled: those can fuse the pointwise ops around a GEMM."""
    from torch._inductor import config as inductor_config

    backends = {name.strip().upper()
                for name in inductor_config.max_autotune_gemm_backends.split(",")}
    return (bool(inductor_config.max_autotune or inductor_config.max_autotune_gemm)
            and bool(backends - {"ATEN", "TILE", ""}))


class TileRewritePass(CustomGraphPass):
    """The rewrites above as an Inductor post-grad pass; `uuid` keys Inductor's caches.

    matmul: whether plain mm and addmm move to tile (the fusions with leaky_relu and its
    backward always may).
    backend_matmul: "auto", "always" or "never" for those GEMM rewrites; None follows
    torch_tile.config.backend_matmul as it is at each compile.
    """

    def __init__(self, *, matmul: bool, vector_add_min_elements: dict[str, int] | None = None,
                 backend_matmul: str | None = None, fuse_where_autotuned: bool = False):
        if backend_matmul is not None and backend_matmul not in config.BACKEND_MATMUL_CHOICES:
            raise ValueError(f"backend_matmul must be one of "
                             f"{', '.join(map(repr, config.BACKEND_MATMUL_CHOICES))} or None, "
                             f"got {backend_matmul!r}")
        self.matmul = matmul
        self.vector_add_min_elements = vector_add_min_elements or {}
        # Where Inductor's max-autotune offers tile's GEMMs, the fused op with a constant
        # slope is timed against Inductor's own GEMM + leaky_relu
        # (gemm_choices.fused_op_lowering): every such pair is fused, with no verdict,
        # unless backend_matmul is "never"; one with a run-time slope keeps the verdicts.
        self.fuse_where_autotuned = fuse_where_autotuned
        self.backend_matmul = backend_matmul

    def _backend_matmul(self) -> str:
        return self.backend_matmul or config.backend_matmul

    def _fusion_autotuned(self) -> bool:
        if not self.fuse_where_autotuned:
            return False
        from .gemm_choices import tile_gemm_enabled
        return tile_gemm_enabled()

    def __call__(self, graph: torch.fx.Graph) -> None:
        choice = self._backend_matmul()
        counts = {}
        if choice != "never":
            wanted = backend_choice.tile_wins if choice == "auto" else None
            counts["matmul_leaky_relu"] = fuse_matmul_leaky_relu(
                graph, wanted, timed=self._fusion_autotuned())
            # Where max-autotune times Inductor's GEMM templates, a template may take
            # leaky_relu's backward into its own epilogue, which the verdict (against aten's
            # GEMM and a pointwise kernel) does not know: there the pair stays Inductor's.
            if not _gemm_templates_in_play():
                counts["matmul_leaky_relu_backward"] = fuse_matmul_leaky_relu_backward(graph,
                                                                                       wanted)
            if self.matmul:
                counts["matmul"] = matmul_to_tile(graph, wanted)
        if self.vector_add_min_elements:
            counts["vector_add"] = add_to_vector_add(graph, self.vector_add_min_elements)
        log.debug("tile rewrites (backend_matmul=%s): %s", choice, counts)

    def uuid(self) -> bytes:
        # Inductor computes its cache key, this uuid in it, before the pass runs, so under
        # "auto" the key holds the verdicts known then: this machine's (its devices, the
        # compiler, torch, the tuning settings), from memory and from the disk cache. A
        # compile that has to time a bucket stores its graph under the key of what was known
        # before; a later compile with that same knowledge is on the same devices and
        # settings, where it would time and decide the same (within noise). A process that
        # knows the new verdict compiles once more, under a key that holds it. Bypassing the
        # cache under "auto", the default, would recompile every graph in every process.
        choice = self._backend_matmul()
        verdicts = backend_choice.fingerprint() if choice == "auto" else None
        settings = repr((self.matmul, sorted(self.vector_add_min_elements.items()), choice,
                         verdicts, self._fusion_autotuned(), _gemm_templates_in_play()))
        return get_hash_for_files((__file__, backend_choice.__file__), extra=settings)


class JointRewritePass(CustomGraphPass):
    """mask_from_leaky_relu_output as an Inductor joint-graph pass (joint_custom_post_pass),
    which runs before the partitioner decides what the forward saves. Where backend_matmul
    is "never" it leaves the graph as Inductor has it."""

    def __init__(self, *, backend_matmul: str | None = None):
        self.backend_matmul = backend_matmul

    def _backend_matmul(self) -> str:
        return self.backend_matmul or config.backend_matmul

    def __call__(self, graph: torch.fx.Graph) -> None:
        if self._backend_matmul() != "never":
            log.debug("tile joint rewrites: %d masks from leaky_relu's output",
                      mask_from_leaky_relu_output(graph))

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,), extra=repr(self._backend_matmul() != "never"))


class PassChain(CustomGraphPass):
    """Several post-grad passes as the one pass Inductor's config holds. torch 2.13 also
    takes a list there, torch 2.11 (on the GPU machine) only one pass; a chain works on
    both. The uuid covers every pass, so Inductor's FX graph cache keys on all of them."""

    def __init__(self, passes):
        self.passes = list(passes)

    def __call__(self, graph: torch.fx.Graph) -> None:
        for graph_pass in self.passes:
            graph_pass(graph)

    def uuid(self):
        uuids = [graph_pass.uuid() if hasattr(graph_pass, "uuid") else None
                 for graph_pass in self.passes]
        # A pass without a uuid cannot be keyed: Inductor then skips its cache, as it would
        # for that pass alone.
        return None if None in uuids else get_hash_for_files((__file__,), extra=repr(uuids))


def chain_after(configured, graph_pass) -> PassChain:
    """`graph_pass` run after what the config already holds (None, a pass, a list of them,
    or a chain)."""
    if configured is None:
        earlier = []
    elif isinstance(configured, PassChain):
        earlier = configured.passes
    elif isinstance(configured, (list, tuple)):
        earlier = list(configured)
    else:
        earlier = [configured]
    return PassChain([*earlier, graph_pass])
