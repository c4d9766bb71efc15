/* memres - CUDA memory resources
 * stream.c: a stream argument from Python: None (the legacy default stream, or the buffer's
 * own where a method says so), an int handle (or an __index__ int: a NumPy integer), any object
 * with __cuda_stream__ (the cuda.core protocol: a (version, handle) pair, returned by a method or,
 * as cuda.core still takes, held by an attribute), a torch.cuda.Stream (.cuda_stream), a CuPy
 * stream (.ptr) or another library's stream with an int .handle (PyCUDA, Numba). A handle itself
 * may also be an object that converts to an int (cuda.bindings' CUstream, int(handle)). */
#include "pymemres.h"

#ifndef Py_GIL_DISABLED
PyObject *pymemres_last_stream_int;
MemresStream pymemres_last_stream;
#endif

static PyObject *name_cuda_stream; /* "__cuda_stream__" */
static PyObject *name_torch;       /* "cuda_stream" */
static PyObject *name_cupy;        /* "ptr" */
static PyObject *name_handle;      /* "handle" */
static PyObject *name_dlpack;      /* "__dlpack__" */

int
pymemres_stream_init (void)
{
  name_cuda_stream = PyUnicode_InternFromString ("__cuda_stream__");
  name_torch = PyUnicode_InternFromString ("cuda_stream");
  name_cupy = PyUnicode_InternFromString ("ptr");
  name_handle = PyUnicode_InternFromString ("handle");
  name_dlpack = PyUnicode_InternFromString ("__dlpack__");
  return name_cuda_stream != NULL && name_torch != NULL && name_cupy != NULL && name_handle != NULL
                 && name_dlpack != NULL
             ? 0
             : -1;
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

/* Whether @value can be a handle: an int (not a bool), an __index__ int (a NumPy integer) or an
 * object that converts to an int by __int__ and is no number of another kind (cuda.bindings'
 * CUstream; not a float, a NumPy float, a Decimal or a Fraction: they have __float__ too) */
static gboolean
is_handle_like (PyObject *value)
{
  PyNumberMethods *nb = Py_TYPE (value)->tp_as_number;

  if (PyBool_Check (value))
    return FALSE;
  return PyLong_Check (value) || PyIndex_Check (value)
         || (nb != NULL && nb->nb_int != NULL && nb->nb_float == NULL);
}

static int
stream_from_int (PyObject *value, MemresStream *stream)
{
  unsigned long long handle;
  PyObject *as_int;

  if (!is_handle_like (value))
    {
      PyErr_Format (PyExc_TypeError, "a stream handle must be an int, not %.100s",
                    Py_TYPE (value)->tp_name);
      return -1;
    }
  as_int = PyLong_Check (value)    ? Py_NewRef (value)
           : PyIndex_Check (value) ? PyNumber_Index (value)
                                   : PyNumber_Long (value);
  if (as_int == NULL)
    return -1;
  handle = PyLong_AsUnsignedLongLong (as_int);
  Py_DECREF (as_int);
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
      /* a method, as the protocol says; an attribute holding the pair, as cuda.core still takes
       * (deprecated there) */
      PyObject *value
          = PyCallable_Check (method) ? PyObject_CallNoArgs (method) : Py_NewRef (method);
      PyObject *pair;

      Py_DECREF (method);
      if (value == NULL)
        return -1;
      /* any sequence of two (cuda.core takes a list too) */
      pair = PySequence_Check (value) && !PyUnicode_Check (value) && !PyBytes_Check (value)
                 ? PySequence_Tuple (value)
                 : NULL;
      Py_DECREF (value);
      if (pair == NULL || PyTuple_GET_SIZE (pair) != 2)
        {
          Py_XDECREF (pair);
          PyErr_Clear ();
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
  /* an int subclass, a NumPy integer */
  if (PyLong_Check (obj) || (PyIndex_Check (obj) && !PyBool_Check (obj)))
    return stream_from_int (obj, stream);
  /* torch.cuda.Stream, CuPy's Stream/ExternalStream, then a stream with a .handle (PyCUDA,
   * Numba); not memory (a memres or cuda.core Buffer: __dlpack__), whose .handle is an address
   * that would be taken for a stream */
  value = optional_attr (obj, name_torch, &failed);
  if (value == NULL && !failed)
    value = optional_attr (obj, name_cupy, &failed);
  if (value == NULL && !failed)
    {
      PyObject *dlpack = optional_attr (obj, name_dlpack, &failed);

      if (dlpack == NULL && !failed)
        value = optional_attr (obj, name_handle, &failed);
      Py_XDECREF (dlpack);
    }
  if (failed)
    return -1;
  if (value == NULL && is_handle_like (obj))
    return stream_from_int (obj, stream); /* a handle object itself: cuda.bindings' CUstream */
  if (value == NULL)
    {
      PyErr_Format (PyExc_TypeError,
                    "not a stream: %.100s (give None, an int handle, an object with "
                    "__cuda_stream__, a torch or CuPy stream, or one with an int .handle)",
                    Py_TYPE (obj)->tp_name);
      return -1;
    }
  ret = stream_from_int (value, stream);
  Py_DECREF (value);
  return ret;
}
