/* variational_sim.multibody._kernels: compiled kernels of variational_sim.multibody (see mav_geometry.kernels). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyMethodDef methods[] = {
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "variational_sim.multibody._kernels", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
