/* memres - CUDA memory resources
 * sleep.c: sleep and wake (memres-sleep.h, docs/sleep.md) in the Python package:
 * Resource.sleep(), Resource.wake() and Resource.is_asleep(). Public API only. */
#include "pymemres.h"

#include <string.h>

/* "discard", "backup" or "file" */
static int
sleep_mode (const char *name, MemresSleepMode *mode)
{
  static const char *const names[] = { "discard", "backup", "file" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (strcmp (name, names[i]) == 0)
      {
        *mode = (MemresSleepMode) i;
        return 0;
      }
  /* memres.InvalidArgumentError (a ValueError with its domain and code; it was a bare one) */
  pymemres_raise (g_error_new (MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                               "sleep mode \"%s\": the modes are \"discard\", \"backup\" and "
                               "\"file\"",
                               name));
  return -1;
}

PyObject *
pymemres_resource_sleep (PyMemresResource *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "tag", "mode", "path", "stream", "host", NULL };
  g_autoptr (MemresSleepPolicy) policy = NULL;
  const char *tag, *mode_name = "discard", *path = NULL;
  PyObject *tag_obj, *stream_obj = Py_None, *host = Py_None, *path_obj = Py_None;
  PyObject *path_bytes = NULL, *ret = NULL;
  MemresResource *mr, *host_mr = NULL;
  MemresStream stream = NULL;
  MemresSleepMode mode;
  GError *error = NULL;
  gboolean ok;

  /* named (":sleep"): the errors said "function"; the tag read as the tag functions read it
   * (a NUL is the tag's InvalidArgumentError, not "embedded null character") */
  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|$sOOO:sleep", keywords, &tag_obj, &mode_name,
                                    &path_obj, &stream_obj, &host)
      || pymemres_tag_name (tag_obj, FALSE, &tag) < 0 || sleep_mode (mode_name, &mode) < 0
      || pymemres_stream_from_object (stream_obj, &stream) < 0)
    return NULL;
  /* path: None, or what open() takes: a str, bytes or an os.PathLike (pathlib.Path), in the
   * file system's encoding; a NUL in it is a ValueError */
  if (path_obj != Py_None)
    {
      if (!PyUnicode_FSConverter (path_obj, &path_bytes))
        return NULL;
      path = PyBytes_AS_STRING (path_bytes);
    }
  if (host != Py_None && !PyObject_TypeCheck (host, &PyMemresResource_Type))
    {
      PyErr_SetString (PyExc_TypeError, "host must be a memres.Resource (page-locked memory)");
      goto out;
    }
  if (host != Py_None && (host_mr = pymemres_resource_hold (host)) == NULL)
    goto out;
  if ((policy = memres_sleep_policy_new (mode, &error)) == NULL
      || (path != NULL && !memres_sleep_policy_set_path (policy, path, &error))
      || (host_mr != NULL && !memres_sleep_policy_set_host_resource (policy, host_mr, &error)))
    {
      pymemres_raise (error);
      goto out;
    }
  if ((mr = pymemres_resource_ref ((PyObject *) self)) == NULL)
    goto out;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_resource_sleep (mr, tag, policy, stream, &error);
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  if (!ok)
    pymemres_raise (error);
  else
    ret = Py_NewRef (Py_None);
out:
  Py_XDECREF (path_bytes);
  if (host_mr != NULL)
    pymemres_resource_release (host_mr);
  return ret;
}

PyObject *
pymemres_resource_wake (PyMemresResource *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "tag", "stream", NULL };
  PyObject *tag_obj, *stream_obj = Py_None;
  MemresStream stream = NULL;
  GError *error = NULL;
  const char *tag;
  gboolean ok;

  MemresResource *mr;

  /* as sleep()'s */
  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|$O:wake", keywords, &tag_obj, &stream_obj)
      || pymemres_tag_name (tag_obj, FALSE, &tag) < 0
      || pymemres_stream_from_object (stream_obj, &stream) < 0
      || (mr = pymemres_resource_ref ((PyObject *) self)) == NULL)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_resource_wake (mr, tag, stream, &error);
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

PyObject *
pymemres_resource_is_asleep (PyMemresResource *self, PyObject *arg)
{
  MemresResource *mr;
  const char *tag;
  gboolean asleep;

  if (pymemres_tag_name (arg, FALSE, &tag) < 0
      || (mr = pymemres_resource_hold ((PyObject *) self)) == NULL)
    return NULL;
  asleep = memres_resource_is_asleep (mr, tag);
  pymemres_resource_release (mr);
  return PyBool_FromLong (asleep);
}
