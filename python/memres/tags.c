/* memres - CUDA memory resources
 * tags.c: tags (memres-tags.h) in the Python package: the calling thread's scope (push and pop,
 * which memres.tag() wraps in a context manager), the defaults of streams and devices, the list
 * of tags, a Buffer's tag, and a counted Resource's counts per tag. Public API only. */
#include "pymemres.h"

#include <string.h>

int
pymemres_tag_name (PyObject *obj, gboolean none_ok, const char **name)
{
  Py_ssize_t length;

  if (none_ok && obj == Py_None)
    {
      *name = NULL;
      return 0;
    }
  if (!PyUnicode_Check (obj))
    {
      PyErr_SetString (PyExc_TypeError, none_ok ? "a tag is a str (or None)" : "a tag is a str");
      return -1;
    }
  if ((*name = PyUnicode_AsUTF8AndSize (obj, &length)) == NULL)
    return -1;
  /* C would see the name up to the NUL: "kv\0x" would be the tag "kv"; a control character,
   * refused as memres_tag_validate() refuses the others */
  if (strlen (*name) != (size_t) length)
    {
      GError *error = NULL;

      g_set_error (&error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID,
                   "a tag cannot contain the control character U+0000 (at byte %zu)",
                   strlen (*name));
      pymemres_raise (error);
      return -1;
    }
  return 0;
}

PyObject *
pymemres_tag_push (PyObject *module, PyObject *arg)
{
  GError *error = NULL;
  const char *name;

  if (pymemres_tag_name (arg, FALSE, &name) < 0)
    return NULL;
  if (!memres_tag_push (name, &error))
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

PyObject *
pymemres_tag_pop (PyObject *module, PyObject *arg)
{
  GError *error = NULL;
  const char *name;

  if (pymemres_tag_name (arg, TRUE, &name) < 0)
    return NULL;
  if (!memres_tag_pop (name, &error))
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

PyObject *
pymemres_tag_current (PyObject *module, PyObject *unused)
{
  const char *name = memres_tag_get_current ();

  if (name == NULL)
    Py_RETURN_NONE;
  return PyUnicode_FromString (name);
}

static PyObject *
strv_to_list (GStrv names)
{
  PyObject *list = PyList_New (0);

  for (guint i = 0; list != NULL && names[i] != NULL; i++)
    {
      PyObject *s = PyUnicode_FromString (names[i]);

      if (s == NULL || PyList_Append (list, s) < 0)
        Py_CLEAR (list);
      Py_XDECREF (s);
    }
  g_strfreev (names);
  return list;
}

PyObject *
pymemres_tag_list (PyObject *module, PyObject *unused)
{
  return strv_to_list (memres_tag_list ());
}

PyObject *
pymemres_tag_set_stream_default (PyObject *module, PyObject *args)
{
  GError *error = NULL;
  PyObject *stream_obj, *tag_obj;
  MemresStream stream;
  const char *name;

  if (!PyArg_ParseTuple (args, "OO:set_stream_default_tag", &stream_obj, &tag_obj))
    return NULL;
  if (pymemres_stream_from_object (stream_obj, &stream) < 0
      || pymemres_tag_name (tag_obj, TRUE, &name) < 0)
    return NULL;
  if (!memres_tag_set_stream_default (stream, name, &error))
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

PyObject *
pymemres_tag_set_device_default (PyObject *module, PyObject *args)
{
  GError *error = NULL;
  PyObject *device_obj, *tag_obj;
  gint device;
  const char *name;

  if (!PyArg_ParseTuple (args, "OO:set_device_default_tag", &device_obj, &tag_obj)
      || pymemres_device_from_object (device_obj, &device) < 0)
    return NULL;
  if (pymemres_tag_name (tag_obj, TRUE, &name) < 0)
    return NULL;
  if (!memres_tag_set_device_default (device, name, &error))
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

PyObject *
pymemres_buffer_get_tag (PyMemresBuffer *self, void *closure)
{
  const char *name = memres_buffer_get_tag (self->buf);

  if (name == NULL)
    Py_RETURN_NONE;
  return PyUnicode_FromString (name);
}

PyObject *
pymemres_resource_tag_counts (PyMemresResource *self, PyObject *arg)
{
  GError *error = NULL;
  MemresTagCounts c;
  MemresResource *mr;
  const char *name;
  gboolean ok;

  if (pymemres_tag_name (arg, FALSE, &name) < 0
      || (mr = pymemres_resource_hold ((PyObject *) self)) == NULL)
    return NULL;
  ok = memres_resource_get_tag_counts (mr, name, &c, &error);
  pymemres_resource_release (mr);
  if (!ok)
    return pymemres_raise (error);
  return Py_BuildValue (
      "{s:K,s:K,s:K,s:K,s:K,s:K}", "bytes_current", (unsigned long long) c.bytes_current,
      "bytes_peak", (unsigned long long) c.bytes_peak, "bytes_total",
      (unsigned long long) c.bytes_total, "count_current", (unsigned long long) c.count_current,
      "count_peak", (unsigned long long) c.count_peak, "count_total",
      (unsigned long long) c.count_total);
}

PyObject *
pymemres_resource_tags (PyMemresResource *self, PyObject *unused)
{
  MemresResource *mr = pymemres_resource_hold ((PyObject *) self);
  GError *error = NULL;
  GStrv names;

  if (mr == NULL)
    return NULL;
  names = memres_resource_list_tags (mr, &error);
  pymemres_resource_release (mr);
  if (names == NULL)
    return pymemres_raise (error);
  return strv_to_list (names);
}

PyObject *
pymemres_resource_reset_tag_peak (PyMemresResource *self, PyObject *arg)
{
  GError *error = NULL;
  MemresResource *mr;
  const char *name;
  gboolean ok;

  if (pymemres_tag_name (arg, FALSE, &name) < 0
      || (mr = pymemres_resource_hold ((PyObject *) self)) == NULL)
    return NULL;
  ok = memres_resource_reset_tag_peak (mr, name, &error);
  pymemres_resource_release (mr);
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}
