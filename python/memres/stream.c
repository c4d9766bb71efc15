/* memres - CUDA memory resources
 * stream.c: a stream argument from Python: None (the legacy default stream, or the buffer's
 * own where a method says so), an int handle, any object with __cuda_stream__ (the cuda.core
 * protocol: a (version, handle) tuple), a torch.cuda.Stream (.cuda_stream) or a CuPy stream
 * (.ptr). */
#include "pymemres.h"

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
      PyErr_SetString (PyExc_ValueError, "a stream handle must be an int from 0 to 2**64-1");
      return -1;
    }
  *stream = (MemresStream) (guintptr) handle;
  return 0;
}

int
pymemres_stream_from_object (PyObject *obj, MemresStream *stream)
{
  PyObject *value;
  int ret;

  if (obj == NULL || obj == Py_None)
    {
      *stream = NULL;
      return 0;
    }
  if (PyLong_CheckExact (obj))
    return stream_from_int (obj, stream);
  if (PyObject_HasAttrString (obj, "__cuda_stream__"))
    {
      PyObject *pair = PyObject_CallMethod (obj, "__cuda_stream__", NULL);

      if (pair == NULL)
        return -1;
      if (!PyTuple_Check (pair) || PyTuple_GET_SIZE (pair) != 2)
        {
          Py_DECREF (pair);
          PyErr_SetString (PyExc_TypeError,
                           "__cuda_stream__() must return a (version, handle) tuple");
          return -1;
        }
      ret = stream_from_int (PyTuple_GET_ITEM (pair, 1), stream);
      Py_DECREF (pair);
      return ret;
    }
  /* torch.cuda.Stream, then CuPy's Stream/ExternalStream */
  value = PyObject_GetAttrString (obj, "cuda_stream");
  if (value == NULL && PyErr_ExceptionMatches (PyExc_AttributeError))
    {
      PyErr_Clear ();
      value = PyObject_GetAttrString (obj, "ptr");
    }
  if (value == NULL)
    {
      if (PyErr_ExceptionMatches (PyExc_AttributeError))
        {
          PyErr_Clear ();
          if (PyLong_Check (obj))
            return stream_from_int (obj, stream);
          PyErr_Format (PyExc_TypeError,
                        "not a stream: %.100s (give None, an int handle, an object with "
                        "__cuda_stream__, a torch or CuPy stream)",
                        Py_TYPE (obj)->tp_name);
        }
      return -1;
    }
  ret = stream_from_int (value, stream);
  Py_DECREF (value);
  return ret;
}
