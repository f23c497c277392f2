// torch_tile._C: the tile ops as functions of Python's C API, called the way torch.add is.
//
// torch.ops.tile.vector_add(a, b) runs a Python frame (the op packet's __call__), then
// torch's boxed path: every argument converted to an IValue against the schema, a stack,
// a boxed call, the result unboxed again. That is about a microsecond more than torch.add,
// whose generated binding parses its arguments once and calls the dispatcher unboxed.
// These functions do what that binding does, with torch's own argument parser: the GIL
// is released around the call, and the call goes through the dispatcher (autograd, fake
// tensors and dispatch modes see it as a call of the tile op). A call that a tensor
// subclass or a mode overriding __torch_function__ must see goes through torch.ops
// instead, so that the override gets the op packet it knows.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_arg_parser.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

namespace {

using OptionalTensor = std::optional<at::Tensor>;
using OptionalDtype = std::optional<at::ScalarType>;

/// torch.ops.tile.<name>(*args, **kwargs).
PyObject *callThroughTorchOps(const char *name, PyObject *args, PyObject *kwargs) {
  static PyObject *tileOps = [] {
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *ops = torch ? PyObject_GetAttrString(torch, "ops") : nullptr;
    PyObject *tile = ops ? PyObject_GetAttrString(ops, "tile") : nullptr;
    Py_XDECREF(ops);
    Py_XDECREF(torch);
    return tile;
  }();
  if (!tileOps)
    return nullptr;
  PyObject *op = PyObject_GetAttrString(tileOps, name);
  if (!op)
    return nullptr;
  PyObject *result = PyObject_Call(op, args, kwargs);
  Py_DECREF(op);
  return result;
}

template <typename Signature>
c10::TypedOperatorHandle<Signature> findOp(const char *name, const char *overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

/// The result of one op call with the GIL released, as a Python tensor.
template <typename Call> PyObject *callWithoutGil(Call &&call) {
  at::Tensor out;
  {
    pybind11::gil_scoped_release noGil;
    out = call();
  }
  return THPVariable_Wrap(std::move(out));
}

PyObject *vectorAdd(PyObject * /*self*/, PyObject *args, PyObject *kwargs) {
  HANDLE_TH_ERRORS
  static torch::PythonArgParser parser({"vector_add(Tensor a, Tensor b)"});
  static const auto op =
      findOp<at::Tensor(const at::Tensor &, const at::Tensor &)>("tile::vector_add", "");
  torch::ParsedArgs<2> parsed;
  auto r = parser.parse(args, kwargs, parsed);
  if (r.has_torch_function())
    return callThroughTorchOps("vector_add", args, kwargs);
  const at::Tensor a = r.tensor(0), b = r.tensor(1);
  return callWithoutGil([&] { return op.call(a, b); });
  END_HANDLE_TH_ERRORS
}

PyObject *matmul(PyObject * /*self*/, PyObject *args, PyObject *kwargs) {
  HANDLE_TH_ERRORS
  static torch::PythonArgParser parser(
      {"matmul(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor? bias=None)"});
  static const auto op = findOp<at::Tensor(const at::Tensor &, const at::Tensor &, OptionalDtype,
                                           const OptionalTensor &)>("tile::matmul", "");
  torch::ParsedArgs<4> parsed;
  auto r = parser.parse(args, kwargs, parsed);
  if (r.has_torch_function())
    return callThroughTorchOps("matmul", args, kwargs);
  const at::Tensor a = r.tensor(0), b = r.tensor(1);
  const OptionalDtype outDtype = r.scalartypeOptional(2);
  const OptionalTensor bias = r.optionalTensor(3);
  return callWithoutGil([&] { return op.call(a, b, outDtype, bias); });
  END_HANDLE_TH_ERRORS
}

PyObject *matmulLeakyRelu(PyObject * /*self*/, PyObject *args, PyObject *kwargs) {
  HANDLE_TH_ERRORS
  // The slope as a number, or as a 0-d tensor (what a compiled graph passes when the
  // slope is one of its inputs): the op's two overloads.
  static torch::PythonArgParser parser(
      {"matmul_leaky_relu(Tensor a, Tensor b, double negative_slope=0.01, *, "
       "ScalarType? out_dtype=None, Tensor? bias=None)",
       "matmul_leaky_relu(Tensor a, Tensor b, Tensor negative_slope, *, "
       "ScalarType? out_dtype=None, Tensor? bias=None)"});
  static const auto numberSlope =
      findOp<at::Tensor(const at::Tensor &, const at::Tensor &, double, OptionalDtype,
                        const OptionalTensor &)>("tile::matmul_leaky_relu", "");
  static const auto tensorSlope =
      findOp<at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &, OptionalDtype,
                        const OptionalTensor &)>("tile::matmul_leaky_relu", "Tensor");
  torch::ParsedArgs<5> parsed;
  auto r = parser.parse(args, kwargs, parsed);
  if (r.has_torch_function())
    return callThroughTorchOps("matmul_leaky_relu", args, kwargs);
  const at::Tensor a = r.tensor(0), b = r.tensor(1);
  const OptionalDtype outDtype = r.scalartypeOptional(3);
  const OptionalTensor bias = r.optionalTensor(4);
  if (r.idx == 0) {
    const double slope = r.toDouble(2);
    return callWithoutGil([&] { return numberSlope.call(a, b, slope, outDtype, bias); });
  }
  const at::Tensor slope = r.tensor(2);
  return callWithoutGil([&] { return tensorSlope.call(a, b, slope, outDtype, bias); });
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"vector_add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(vectorAdd)),
     METH_VARARGS | METH_KEYWORDS,
     "vector_add(a, b) -> Tensor\n\ntorch.ops.tile.vector_add, called as torch.add is."},
    {"matmul", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(matmul)),
     METH_VARARGS | METH_KEYWORDS,
     "matmul(a, b, *, out_dtype=None, bias=None) -> Tensor\n\n"
     "torch.ops.tile.matmul, called as torch.matmul is."},
    {"matmul_leaky_relu",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(matmulLeakyRelu)),
     METH_VARARGS | METH_KEYWORDS,
     "matmul_leaky_relu(a, b, negative_slope=0.01, *, out_dtype=None, bias=None) -> Tensor\n\n"
     "torch.ops.tile.matmul_leaky_relu, called as torch.matmul is."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef moduleDef = {PyModuleDef_HEAD_INIT, "torch_tile._C",
                         "The tile ops as direct Python functions (see torch_tile.vector_add).", -1,
                         methods};

} // namespace

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&moduleDef); }
