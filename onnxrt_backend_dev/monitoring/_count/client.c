/* valgrind's client requests for the counted blocks of a process that callgrind runs
 * (the pytest plugin's --monitoring-counter instructions): whether valgrind runs this
 * process, start and stop its instrumentation, zero its counters, dump them to a file.
 *
 * A client request is a sequence of instructions that does nothing on a real CPU and
 * that valgrind recognises: outside valgrind every function here is a no-op returning 0.
 * Built by setup.py where valgrind's headers are found; optional, as the package is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>

static PyObject *running(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLong((unsigned long)RUNNING_ON_VALGRIND);
}

/* The block starts: instrument from here, its counters at zero. */
static PyObject *begin(PyObject *self, PyObject *unused) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    Py_RETURN_NONE;
}

/* The block ends: its counters into a dump file named after the label, then no more
 * instrumentation (the rest of the session runs at valgrind's lighter speed). */
static PyObject *end(PyObject *self, PyObject *arg) {
    const char *label = PyUnicode_AsUTF8(arg);
    if (label == NULL) {
        return NULL;
    }
    CALLGRIND_DUMP_STATS_AT(label);
    CALLGRIND_STOP_INSTRUMENTATION;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"running", running, METH_NOARGS, "How many valgrinds run this process (0: none)."},
    {"begin", begin, METH_NOARGS, "Instrument from here, the counters at zero."},
    {"end", end, METH_O, "Dump the counters (labelled), stop instrumenting."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_client", "valgrind's client requests.", -1, methods,
};

PyMODINIT_FUNC PyInit__client(void) { return PyModule_Create(&module); }
