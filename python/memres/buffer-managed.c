/* memres - CUDA memory resources
 * buffer-managed.c: memres.Buffer's calls for managed (unified) memory (memres-managed.h,
 * cuda.core's ManagedBuffer): the advice read_mostly and preferred_location, accessed_by with
 * add_accessed_by() and remove_accessed_by(), prefetch(), discard(), discard_prefetch() and
 * last_prefetch_location; a location as cuda.core's (type, id) tuple. Each call is one of the
 * C API's, with the GIL released and the buffer counted as in use (no close meanwhile). The
 * entries buffer.c's tables take (PYMEMRES_BUFFER_MANAGED_METHODS and _GETSET, pymemres.h). */
#include "pymemres.h"

/* The location types by their Python names (cuda.core's ManagedMemoryResourceOptions'
 * preferred_location_type, and its "host_numa_current"); @has_id: the tuple's id is an int */
static const struct
{
  const char *name;
  MemresLocationType type;
  gboolean has_id;
} location_names[] = {
  { "device", MEMRES_LOCATION_DEVICE, TRUE },
  { "host", MEMRES_LOCATION_HOST, FALSE },
  { "host_numa", MEMRES_LOCATION_HOST_NUMA, TRUE },
  { "host_numa_current", MEMRES_LOCATION_HOST_NUMA_CURRENT, FALSE },
};

#define LOCATION_FORMS                                                                             \
  "a device ordinal (an int of 0 or more), -1 or \"host\" (host memory), "                         \
  "\"host_numa_current\", or a (type, id) tuple: (\"device\", N), (\"host\", None), "              \
  "(\"host_numa\", N), (\"host_numa_current\", None)"

/* An id of a (type, id) tuple: an int from G_MININT to G_MAXINT (below 0 the C API refuses
 * with InvalidArgumentError) */
static int
location_id (PyObject *obj, gint *out)
{
  int r = pymemres_gint_from_object (obj, out);

  if (r > 0)
    pymemres_raise_range ("a location's id must be an int from 0 to 2**31-1");
  return r == 0 ? 0 : -1;
}

/* @obj as a location in *@out (LOCATION_FORMS); None, where @none_ok, as no location
 * (*@out's type MEMRES_LOCATION_NONE). -1 with TypeError for another form, ValueError for an
 * unknown type name. */
static int
location_arg (PyObject *obj, gboolean none_ok, MemresLocation *out)
{
  PyObject *type = obj, *id = NULL;

  out->type = MEMRES_LOCATION_NONE;
  out->id = 0;
  if (obj == Py_None && none_ok)
    return 0;
  if (PyLong_Check (obj))
    {
      if (location_id (obj, &out->id) < 0)
        return -1;
      out->type = out->id == -1 ? MEMRES_LOCATION_HOST : MEMRES_LOCATION_DEVICE;
      out->id = out->id == -1 ? 0 : out->id;
      return 0;
    }
  if (PyTuple_Check (obj) && PyTuple_GET_SIZE (obj) == 2)
    {
      type = PyTuple_GET_ITEM (obj, 0);
      id = PyTuple_GET_ITEM (obj, 1);
    }
  if (PyUnicode_Check (type))
    for (gsize i = 0; i < G_N_ELEMENTS (location_names); i++)
      if (PyUnicode_CompareWithASCIIString (type, location_names[i].name) == 0)
        {
          out->type = location_names[i].type;
          if (location_names[i].has_id && (id == NULL || id == Py_None))
            {
              PyErr_Format (PyExc_TypeError, "a \"%s\" location needs its id: (\"%s\", N)",
                            location_names[i].name, location_names[i].name);
              return -1;
            }
          if (!location_names[i].has_id && id != NULL && id != Py_None)
            {
              PyErr_Format (PyExc_ValueError, "a \"%s\" location has no id: (\"%s\", None)",
                            location_names[i].name, location_names[i].name);
              return -1;
            }
          return location_names[i].has_id ? location_id (id, &out->id) : 0;
        }
  if (PyUnicode_Check (type))
    PyErr_Format (PyExc_ValueError, "unknown location type %R: " LOCATION_FORMS, type);
  else
    PyErr_Format (PyExc_TypeError, "a location is %s" LOCATION_FORMS ", not %.100s",
                  none_ok ? "None, " : "", Py_TYPE (obj)->tp_name);
  return -1;
}

/* A location as Python sees it: None, or a (type, id) tuple (id None for the host) */
static PyObject *
location_value (const MemresLocation *location)
{
  for (gsize i = 0; i < G_N_ELEMENTS (location_names); i++)
    if (location_names[i].type == location->type)
      return location_names[i].has_id ? Py_BuildValue ("(si)", location_names[i].name, location->id)
                                      : Py_BuildValue ("(sO)", location_names[i].name, Py_None);
  Py_RETURN_NONE;
}

/* The C call of each entry, on a buffer in use, without the GIL */
typedef enum
{
  CALL_PREFETCH,
  CALL_DISCARD,
  CALL_DISCARD_PREFETCH,
  CALL_ADD_ACCESSED_BY,
  CALL_REMOVE_ACCESSED_BY,
  CALL_SET_READ_MOSTLY,
  CALL_SET_PREFERRED,
  CALL_GET_READ_MOSTLY,
  CALL_GET_PREFERRED = PYMEMRES_GET_PREFERRED,
  CALL_GET_LAST_PREFETCH = PYMEMRES_GET_LAST_PREFETCH,
} ManagedCall;

/* Runs @call on @self's buffer with @location, @flag and @stream (what it takes); the read
 * ones fill *@location or *@flag. -1 with the exception (ClosedError for a closed buffer,
 * InvalidArgumentError for memory that is not managed). */
static int
run (PyMemresBuffer *self, ManagedCall call, MemresLocation *location, gboolean *flag,
     MemresStream stream)
{
  const MemresLocation *where
      = location != NULL && location->type != MEMRES_LOCATION_NONE ? location : NULL;
  GError *error = NULL;
  MemresBuffer *buf;
  gboolean ok = FALSE;

  if (pymemres_buffer_use (self, FALSE) < 0)
    return -1;
  /* read once counted: a close() on another thread (free-threaded) may swap it before */
  buf = self->buf;
  Py_BEGIN_ALLOW_THREADS;
  switch (call)
    {
    case CALL_PREFETCH:
      ok = memres_buffer_prefetch (buf, where, stream, &error);
      break;
    case CALL_DISCARD:
      ok = memres_buffer_discard (buf, stream, &error);
      break;
    case CALL_DISCARD_PREFETCH:
      ok = memres_buffer_discard_and_prefetch (buf, where, stream, &error);
      break;
    case CALL_ADD_ACCESSED_BY:
      ok = memres_buffer_add_accessed_by (buf, where, &error);
      break;
    case CALL_REMOVE_ACCESSED_BY:
      ok = memres_buffer_remove_accessed_by (buf, where, &error);
      break;
    case CALL_SET_READ_MOSTLY:
      ok = memres_buffer_set_read_mostly (buf, *flag, &error);
      break;
    case CALL_SET_PREFERRED:
      ok = memres_buffer_set_preferred_location (buf, where, &error);
      break;
    case CALL_GET_READ_MOSTLY:
      ok = memres_buffer_get_read_mostly (buf, flag, &error);
      break;
    case CALL_GET_PREFERRED:
      ok = memres_buffer_get_preferred_location (buf, location, &error);
      break;
    case CALL_GET_LAST_PREFETCH:
      ok = memres_buffer_get_last_prefetch_location (buf, location, &error);
      break;
    }
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    {
      pymemres_raise (error);
      return -1;
    }
  return 0;
}

/* prefetch(location, stream=None), discard_prefetch(location, stream=None), discard(stream=None) */
static PyObject *
stream_call (PyMemresBuffer *self, PyObject *args, PyObject *kwargs, ManagedCall call)
{
  static char *with_location[] = { "location", "stream", NULL };
  static char *stream_only[] = { "stream", NULL };
  PyObject *location_obj = NULL, *stream_obj = NULL;
  MemresLocation location = { MEMRES_LOCATION_NONE, 0 };
  MemresStream stream = NULL;

  if (call == CALL_DISCARD
          ? !PyArg_ParseTupleAndKeywords (args, kwargs, "|O:discard", stream_only, &stream_obj)
          : !PyArg_ParseTupleAndKeywords (
              args, kwargs, call == CALL_PREFETCH ? "O|O:prefetch" : "O|O:discard_prefetch",
              with_location, &location_obj, &stream_obj))
    return NULL;
  if ((location_obj != NULL && location_arg (location_obj, FALSE, &location) < 0)
      || pymemres_stream_from_object (stream_obj, &stream) < 0
      || run (self, call, &location, NULL, stream) < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *
pymemres_buffer_prefetch (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  return stream_call (self, args, kwargs, CALL_PREFETCH);
}

PyObject *
pymemres_buffer_discard (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  return stream_call (self, args, kwargs, CALL_DISCARD);
}

PyObject *
pymemres_buffer_discard_prefetch (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  return stream_call (self, args, kwargs, CALL_DISCARD_PREFETCH);
}

/* add_accessed_by(location), remove_accessed_by(location) */
static PyObject *
accessed_by_call (PyMemresBuffer *self, PyObject *obj, ManagedCall call)
{
  MemresLocation location;

  if (location_arg (obj, FALSE, &location) < 0 || run (self, call, &location, NULL, NULL) < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *
pymemres_buffer_add_accessed_by (PyMemresBuffer *self, PyObject *location)
{
  return accessed_by_call (self, location, CALL_ADD_ACCESSED_BY);
}

PyObject *
pymemres_buffer_remove_accessed_by (PyMemresBuffer *self, PyObject *location)
{
  return accessed_by_call (self, location, CALL_REMOVE_ACCESSED_BY);
}

PyObject *
pymemres_buffer_get_read_mostly (PyMemresBuffer *self, void *closure)
{
  gboolean value = FALSE;

  if (run (self, CALL_GET_READ_MOSTLY, NULL, &value, NULL) < 0)
    return NULL;
  return PyBool_FromLong (value);
}

int
pymemres_buffer_set_read_mostly (PyMemresBuffer *self, PyObject *value, void *closure)
{
  gboolean flag;
  int truth;

  if (value == NULL)
    {
      PyErr_SetString (PyExc_TypeError, "read_mostly cannot be deleted: set it to False");
      return -1;
    }
  if ((truth = PyObject_IsTrue (value)) < 0)
    return -1;
  flag = truth != 0;
  return run (self, CALL_SET_READ_MOSTLY, NULL, &flag, NULL);
}

/* preferred_location and last_prefetch_location (@closure the call) */
PyObject *
pymemres_buffer_get_location (PyMemresBuffer *self, void *closure)
{
  MemresLocation location = { MEMRES_LOCATION_NONE, 0 };

  if (run (self, (ManagedCall) GPOINTER_TO_INT (closure), &location, NULL, NULL) < 0)
    return NULL;
  return location_value (&location);
}

int
pymemres_buffer_set_preferred_location (PyMemresBuffer *self, PyObject *value, void *closure)
{
  MemresLocation location;

  if (value == NULL)
    {
      PyErr_SetString (PyExc_TypeError,
                       "preferred_location cannot be deleted: set it to None to unset it");
      return -1;
    }
  if (location_arg (value, TRUE, &location) < 0)
    return -1;
  return run (self, CALL_SET_PREFERRED, &location, NULL, NULL);
}

PyObject *
pymemres_buffer_get_accessed_by (PyMemresBuffer *self, void *closure)
{
  GError *error = NULL;
  MemresLocation *locations = NULL;
  guint n = 0;
  gboolean ok;
  PyObject *tuple;

  if (pymemres_buffer_use (self, FALSE) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_buffer_get_accessed_by (self->buf, &locations, &n, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    return pymemres_raise (error);
  tuple = PyTuple_New (n);
  for (guint i = 0; tuple != NULL && i < n; i++)
    {
      PyObject *item = location_value (&locations[i]);

      if (item == NULL)
        Py_CLEAR (tuple);
      else
        PyTuple_SET_ITEM (tuple, i, item);
    }
  g_free (locations);
  return tuple;
}
