/* memres - CUDA memory resources
 * counters.c: Resource.counters(), a kind's own counters (memres_resource_get_counters(), an
 * `a{sv}` GVariant) as a Python dict: what a Python user read before only by parsing
 * g_variant_print()'s text through ctypes (bench/interop.py's layer_counters()). Each GVariant
 * value becomes its Python counterpart: integers of every width int, a double float, a boolean
 * bool, a string (object path, signature) str, a variant its value, a maybe None or its value,
 * an array of dictionary entries a dict, any other array a list, a tuple a tuple. Public API
 * only. */
#include "pymemres.h"

static PyObject *variant_object (GVariant *v);

/* The children of the container @v: a dict of its entries (@dict: an array of dictionary
 * entries) or a list, or a tuple. */
static PyObject *
children_object (GVariant *v, gboolean dict, gboolean tuple)
{
  gsize n = g_variant_n_children (v);
  PyObject *out = dict    ? PyDict_New ()
                  : tuple ? PyTuple_New ((Py_ssize_t) n)
                          : PyList_New ((Py_ssize_t) n);

  for (gsize i = 0; out != NULL && i < n; i++)
    {
      g_autoptr (GVariant) child = g_variant_get_child_value (v, i);

      if (dict)
        {
          g_autoptr (GVariant) k = g_variant_get_child_value (child, 0);
          g_autoptr (GVariant) val = g_variant_get_child_value (child, 1);
          PyObject *key = variant_object (k), *value = key ? variant_object (val) : NULL;

          if (value == NULL || PyDict_SetItem (out, key, value) < 0)
            Py_CLEAR (out);
          Py_XDECREF (key);
          Py_XDECREF (value);
          continue;
        }
      PyObject *item = variant_object (child);

      if (item == NULL)
        Py_CLEAR (out);
      else if (tuple)
        PyTuple_SET_ITEM (out, (Py_ssize_t) i, item);
      else
        PyList_SET_ITEM (out, (Py_ssize_t) i, item);
    }
  return out;
}

/* @v (transfer none) as a new Python object, or NULL with an exception set. */
static PyObject *
variant_object (GVariant *v)
{
  switch (g_variant_classify (v))
    {
    case G_VARIANT_CLASS_BOOLEAN:
      return PyBool_FromLong (g_variant_get_boolean (v));
    case G_VARIANT_CLASS_BYTE:
      return PyLong_FromUnsignedLong (g_variant_get_byte (v));
    case G_VARIANT_CLASS_INT16:
      return PyLong_FromLong (g_variant_get_int16 (v));
    case G_VARIANT_CLASS_UINT16:
      return PyLong_FromUnsignedLong (g_variant_get_uint16 (v));
    case G_VARIANT_CLASS_INT32:
      return PyLong_FromLong (g_variant_get_int32 (v));
    case G_VARIANT_CLASS_HANDLE:
      return PyLong_FromLong (g_variant_get_handle (v));
    case G_VARIANT_CLASS_UINT32:
      return PyLong_FromUnsignedLong (g_variant_get_uint32 (v));
    case G_VARIANT_CLASS_INT64:
      return PyLong_FromLongLong (g_variant_get_int64 (v));
    case G_VARIANT_CLASS_UINT64:
      return PyLong_FromUnsignedLongLong (g_variant_get_uint64 (v));
    case G_VARIANT_CLASS_DOUBLE:
      return PyFloat_FromDouble (g_variant_get_double (v));
    case G_VARIANT_CLASS_STRING:
    case G_VARIANT_CLASS_OBJECT_PATH:
    case G_VARIANT_CLASS_SIGNATURE:
      {
        gsize length;
        const char *text = g_variant_get_string (v, &length);

        return PyUnicode_DecodeUTF8 (text, (Py_ssize_t) length, "replace");
      }
    case G_VARIANT_CLASS_VARIANT:
      {
        g_autoptr (GVariant) inner = g_variant_get_variant (v);

        return variant_object (inner);
      }
    case G_VARIANT_CLASS_MAYBE:
      {
        g_autoptr (GVariant) inner = g_variant_get_maybe (v);

        if (inner == NULL)
          Py_RETURN_NONE;
        return variant_object (inner);
      }
    case G_VARIANT_CLASS_ARRAY:
      return children_object (
          v, g_variant_type_is_dict_entry (g_variant_type_element (g_variant_get_type (v))), FALSE);
    case G_VARIANT_CLASS_TUPLE:
    case G_VARIANT_CLASS_DICT_ENTRY:
      return children_object (v, FALSE, TRUE);
    }
  PyErr_Format (PyExc_TypeError, "a counter of GVariant type '%s' has no Python form",
                g_variant_get_type_string (v));
  return NULL;
}

PyObject *
pymemres_resource_counters (PyMemresResource *self, PyObject *unused)
{
  GError *error = NULL;
  MemresResource *mr = pymemres_resource_ref ((PyObject *) self);
  GVariant *counters;
  PyObject *out;

  if (mr == NULL)
    return NULL;
  /* the log adaptor writes the lines it buffers first: file I/O, without the GIL */
  Py_BEGIN_ALLOW_THREADS;
  counters = memres_resource_get_counters (mr, &error);
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  if (counters == NULL)
    return pymemres_raise (error);
  out = variant_object (counters);
  g_variant_unref (counters);
  return out;
}
