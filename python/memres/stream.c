/* memres - CUDA memory resources
 * stream.c: a stream argument from Python: None (the legacy default stream, or the buffer's
 * own where a method says so), an int handle, any object with __cuda_stream__ (the cuda.core
 * protocol: a (version, handle) tuple), a torch.cuda.Stream (.cuda_stream) or a CuPy stream
 * (.ptr). */
#include "pymemres.h"

#ifndef Py_GIL_DISABLED
PyObject *pymemres_last_stream_int;
MemresStream pymemres_last_stream;
#endif

static PyObject *name_cuda_stream; /* "__cuda_stream__" */
static PyObject *name_torch;       /* "cuda_stream" */
static PyObject *name_cupy;        /* "ptr" */

int
pymemres_stream_init (void)
{
  name_cuda_stream = PyUnicode_InternFromString ("__cuda_stream__");
  name_torch = PyUnicode_InternFromString ("cuda_stream");
  name_cupy = PyUnicode_InternFromString ("ptr");
  return name_cuda_stream != NULL && name_torch != NULL && name_cupy != NULL ? 0 : -1;
}

/* obj.name, NULL without an exception when there is no such attribute */
static PyObject *
optional_attr (PyObject *obj, PyObject *name, int *failed)
{
  PyObject *value = NULL;

#if PY_VERSION_HEX >= 0x030D0000
  *failed = PyObject_GetOptionalAttr (obj, name, &value) < 0;
#else
  *failed = _PyObject_LookupAttr (obj, name, &value) < 0;
#endif
  return value;
}

static int
stream_from_int (PyObject *value, MemresStream *stream)
{
  unsigned long long handle;

  if (!PyLong_Check (value) || PyBool_Check (value))
    {
      PyErr_Format (PyExc_TypeError, "a stream handle must be an int, not %.100s",
                    Py_TYPE (value)->tp_name);
      return -1;
    }
  handle = PyLong_AsUnsignedLongLong (value);
  if (handle == (unsigned long long) -1 && PyErr_Occurred ())
    {
      PyErr_Clear ();
      pymemres_raise_range ("a stream handle must be an int from 0 to 2**64-1");
      return -1;
    }
  *stream = (MemresStream) (guintptr) handle;
  return 0;
}

int
pymemres_stream_from_object_slow (PyObject *obj, MemresStream *stream)
{
  PyObject *value, *method;
  int ret, failed;

  if (PyLong_CheckExact (obj))
    {
      if (stream_from_int (obj, stream) < 0)
        return -1;
#ifndef Py_GIL_DISABLED
      /* the next call with this very int skips the conversion */
      Py_XSETREF (pymemres_last_stream_int, Py_NewRef (obj));
      pymemres_last_stream = *stream;
#endif
      return 0;
    }
  method = optional_attr (obj, name_cuda_stream, &failed);
  if (failed)
    return -1;
  if (method != NULL)
    {
      PyObject *pair = PyObject_CallNoArgs (method);

      Py_DECREF (method);
      if (pair == NULL)
        return -1;
      if (!PyTuple_Check (pair) || PyTuple_GET_SIZE (pair) != 2)
        {
          Py_DECREF (pair);
          PyErr_SetString (PyExc_TypeError,
                           "__cuda_stream__() must return a (version, handle) tuple");
          return -1;
        }
      /* version 0 is the one cuda.core defines: another may lay the handle out otherwise (it
       * was read as a handle, whatever the version) */
      {
        PyObject *version = PyTuple_GET_ITEM (pair, 0);
        int overflow = 0;

        if (!PyLong_Check (version) || PyLong_AsLongAndOverflow (version, &overflow) != 0
            || overflow != 0)
          {
            PyErr_Format (PyExc_ValueError,
                          "__cuda_stream__() returned protocol version %R: memres reads "
                          "version 0",
                          version);
            Py_DECREF (pair);
            return -1;
          }
      }
      ret = stream_from_int (PyTuple_GET_ITEM (pair, 1), stream);
      Py_DECREF (pair);
      return ret;
    }
  /* torch.cuda.Stream, then CuPy's Stream/ExternalStream */
  value = optional_attr (obj, name_torch, &failed);
  if (value == NULL && !failed)
    value = optional_attr (obj, name_cupy, &failed);
  if (failed)
    return -1;
  if (value == NULL)
    {
      if (PyLong_Check (obj))
        return stream_from_int (obj, stream);
      PyErr_Format (PyExc_TypeError,
                    "not a stream: %.100s (give None, an int handle, an object with "
                    "__cuda_stream__, a torch or CuPy stream)",
                    Py_TYPE (obj)->tp_name);
      return -1;
    }
  ret = stream_from_int (value, stream);
  Py_DECREF (value);
  return ret;
}
