// `dot`, a CPython extension module over the cuda_library :dot: dot.dot(xs, ys) -> float,
// dot.launches() -> int. Built against the stable ABI (Py_LIMITED_API, CPython 3.11 on), so
// one build loads in any later CPython.
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "examples/python_extension/dot.h"

// The items of a sequence of numbers as a new array of doubles (NULL, with an exception
// set, on failure).
static double* doubles_of(PyObject* seq, Py_ssize_t* n) {
  PyObject* fast = PySequence_Fast(seq, "dot() takes two sequences of numbers");
  if (fast == NULL) return NULL;
  *n = PySequence_Size(fast);
  double* out = malloc((*n > 0 ? *n : 1) * sizeof(double));
  for (Py_ssize_t i = 0; out != NULL && i < *n; ++i) {
    PyObject* item = PySequence_GetItem(fast, i);
    out[i] = item ? PyFloat_AsDouble(item) : -1.0;
    Py_XDECREF(item);
    if (PyErr_Occurred()) {
      free(out);
      out = NULL;
    }
  }
  Py_DECREF(fast);
  if (out == NULL && !PyErr_Occurred()) PyErr_NoMemory();
  return out;
}

static PyObject* dot(PyObject* self, PyObject* args) {
  PyObject *xs, *ys;
  if (!PyArg_ParseTuple(args, "OO", &xs, &ys)) return NULL;
  Py_ssize_t n = 0, m = 0;
  double* x = doubles_of(xs, &n);
  double* y = x ? doubles_of(ys, &m) : NULL;
  PyObject* result = NULL;
  if (y != NULL && n != m) {
    PyErr_Format(PyExc_ValueError, "dot() takes sequences of one length, not %zd and %zd", n,
                 m);
  } else if (y != NULL) {
    double sum = 0.0;
    char err[256] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = dot_on_gpu(x, y, (size_t)n, &sum, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc == DOT_OK) result = PyFloat_FromDouble(sum);
    else PyErr_SetString(PyExc_RuntimeError, err);
  }
  free(x);
  free(y);
  return result;
}

static PyObject* launches(PyObject* self, PyObject* unused) {
  return PyLong_FromLongLong(dot_launches);
}

static PyMethodDef methods[] = {
    {"dot", dot, METH_VARARGS, "dot(xs, ys): the sum of xs[i] * ys[i], computed on the GPU."},
    {"launches", launches, METH_NOARGS, "The kernel launches made so far."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dot", NULL, -1, methods};

PyMODINIT_FUNC PyInit_dot(void) { return PyModule_Create(&module); }
