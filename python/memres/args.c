/* memres - CUDA memory resources
 * args.c: the arguments of the METH_FASTCALL | METH_KEYWORDS methods (Resource.allocate,
 * Buffer.close, ...), positional or by keyword, without building a tuple or a dict. */
#include "pymemres.h"

int
pymemres_parse_args (const char *function, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, const char *const *names, Py_ssize_t n_names,
                     Py_ssize_t n_required, PyObject **out)
{
  Py_ssize_t n_kw = kwnames != NULL ? PyTuple_GET_SIZE (kwnames) : 0;

  if (nargs > n_names)
    {
      PyErr_Format (PyExc_TypeError, "%s() takes at most %zd argument%s (%zd given)", function,
                    n_names, n_names == 1 ? "" : "s", nargs);
      return -1;
    }
  for (Py_ssize_t i = 0; i < n_names; i++)
    out[i] = i < nargs ? args[i] : NULL;
  for (Py_ssize_t k = 0; k < n_kw; k++)
    {
      PyObject *key = PyTuple_GET_ITEM (kwnames, k);
      Py_ssize_t i;

      for (i = 0; i < n_names; i++)
        if (PyUnicode_CompareWithASCIIString (key, names[i]) == 0)
          break;
      if (i == n_names)
        {
          PyErr_Format (PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function,
                        key);
          return -1;
        }
      if (out[i] != NULL)
        {
          PyErr_Format (PyExc_TypeError, "%s() got multiple values for argument '%s'", function,
                        names[i]);
          return -1;
        }
      out[i] = args[nargs + k];
    }
  for (Py_ssize_t i = 0; i < n_required; i++)
    if (out[i] == NULL)
      {
        PyErr_Format (PyExc_TypeError, "%s() missing required argument '%s'", function, names[i]);
        return -1;
      }
  return 0;
}

PyObject *
pymemres_size_overflow (const char *name, PyObject *value)
{
  PyObject *repr = PyObject_Repr (value);

  if (repr == NULL)
    return NULL;
  pymemres_raise_range ("%s must be an int from 0 to 2**64-1, not %s", name,
                        PyUnicode_AsUTF8 (repr));
  Py_DECREF (repr);
  return NULL;
}

PyObject *
pymemres_index_not_bool (PyObject *value, const char *format, const char *arg)
{
  if (PyBool_Check (value))
    {
      PyErr_Format (PyExc_TypeError, format, arg);
      return NULL;
    }
  return PyNumber_Index (value);
}

size_t
pymemres_size_from_object (const char *name, PyObject *value)
{
  PyObject *index = pymemres_index_not_bool (value, "%s must be an int, not bool", name);
  size_t size;

  if (index == NULL)
    return (size_t) -1;
  size = PyLong_AsSize_t (index);
  Py_DECREF (index);
  if (size == (size_t) -1 && PyErr_Occurred ())
    {
      if (PyErr_ExceptionMatches (PyExc_OverflowError))
        {
          PyErr_Clear ();
          pymemres_size_overflow (name, value);
        }
      return (size_t) -1;
    }
  return size;
}

int
pymemres_gint_from_object (PyObject *value, gint *out)
{
  int overflow = 0;
  PyObject *index = PyNumber_Index (value);
  long v = index != NULL ? PyLong_AsLongAndOverflow (index, &overflow) : -1;

  Py_XDECREF (index);
  if (v == -1 && PyErr_Occurred ())
    return -1;
  if (overflow < 0 || (overflow == 0 && v < G_MININT))
    return 1;
  if (overflow > 0 || v > G_MAXINT)
    return 2;
  *out = (gint) v;
  return 0;
}

int
pymemres_device_from_object (PyObject *value, gint *device)
{
  int r = pymemres_gint_from_object (value, device);

  /* a device past an int's range does not exist: memres.OutOfRangeError, a ValueError as for
   * one below -1 (it was a bare OverflowError from the int conversion) */
  if (r > 0)
    pymemres_raise_range ("device %s: a device ordinal is 0 or more, or -1 for host memory",
                          r == 1 ? "below -2**31" : "past 2**31-1");
  return r == 0 ? 0 : -1;
}
