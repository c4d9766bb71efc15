/* memres - CUDA memory resources
 * ipc.c: a buffer between processes as one message of bytes plus file descriptors
 * (memres_buffer_export_message / memres_buffer_import_message: Buffer.export_message and
 * memres.import_message), for any transport a Python
 * program has (socket.send_fds, multiprocessing's reduction.send_handle). */
#include "pymemres.h"

#include <unistd.h>

PyObject *
pymemres_buffer_export_message (PyObject *self, PyObject *unused)
{
  MemresBuffer *buf;
  GError *error = NULL;
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;
  gboolean ok;
  PyObject *data = NULL, *list = NULL;
  gsize length;
  gconstpointer raw;

  if (pymemres_buffer_use ((PyMemresBuffer *) self, FALSE) < 0)
    return NULL;
  /* read once counted: a close() on another thread (free-threaded) may swap it before */
  buf = ((PyMemresBuffer *) self)->buf;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse ((PyMemresBuffer *) self, FALSE);
  if (!ok)
    return pymemres_raise (error);
  raw = g_bytes_get_data (bytes, &length);
  data = PyBytes_FromStringAndSize (raw, (Py_ssize_t) length);
  list = PyList_New (n_fds);
  for (guint i = 0; list != NULL && i < n_fds; i++)
    {
      PyObject *fd = PyLong_FromLong (fds[i]);
      if (fd == NULL)
        Py_CLEAR (list);
      else
        PyList_SET_ITEM (list, i, fd);
    }
  g_bytes_unref (bytes);
  if (data == NULL || list == NULL)
    {
      for (guint i = 0; i < n_fds; i++)
        close (fds[i]);
      g_free (fds);
      Py_XDECREF (data);
      Py_XDECREF (list);
      return NULL;
    }
  g_free (fds);
  return Py_BuildValue ("(NN)", data, list);
}

static const char *const import_names[] = { "data", "fds", "importer", "stream" };

PyObject *
pymemres_import_message (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
  MemresResource *mr = NULL;
  PyObject *argv[4], *seq = NULL;
  MemresStream stream = NULL;
  GError *error = NULL;
  Py_buffer data;
  gint *fds = NULL;
  Py_ssize_t n_fds;
  MemresBuffer *buf;

  if (pymemres_parse_args ("import_message", args, nargs, kwnames, import_names, 4, 2, argv) < 0
      || pymemres_stream_from_object (argv[3], &stream) < 0)
    return NULL;
  /* a Buffer where its message belongs (cuda.core: TypeError): it was read as the message's
   * bytes, an InvalidArgumentError for host memory, a BufferError for device memory */
  if (PyObject_TypeCheck (argv[0], &PyMemresBuffer_Type))
    {
      PyErr_SetString (PyExc_TypeError, "import_message() takes the bytes of "
                                        "Buffer.export_message(), not a Buffer");
      return NULL;
    }
  if (argv[2] != NULL && argv[2] != Py_None)
    {
      if (!PyObject_TypeCheck (argv[2], &PyMemresResource_Type))
        {
          PyErr_SetString (PyExc_TypeError, "importer must be a memres.Resource or None");
          return NULL;
        }
      /* a reference of ours: the GIL is released below, and what reads the fds and the data
       * may run Python code */
      if ((mr = pymemres_resource_ref (argv[2])) == NULL)
        return NULL;
    }
  seq = PySequence_Fast (argv[1], "fds must be a sequence of ints");
  if (seq == NULL)
    goto fail;
  n_fds = PySequence_Fast_GET_SIZE (seq);
  fds = g_new0 (gint, MAX (n_fds, 1));
  for (Py_ssize_t i = 0; i < n_fds; i++)
    {
      int overflow = 0;
      PyObject *item = PyNumber_Index (PySequence_Fast_GET_ITEM (seq, i));
      long fd = item != NULL ? PyLong_AsLongAndOverflow (item, &overflow) : -1;

      Py_XDECREF (item);
      if (fd == -1 && PyErr_Occurred ())
        {
          Py_DECREF (seq);
          goto fail;
        }
      /* past a C int it was cut to one (2**32 + 5 read as fd 5, another file of the
       * process); below 0 memres refuses it itself */
      if (overflow != 0 || fd > G_MAXINT || fd < G_MININT)
        {
          Py_DECREF (seq);
          pymemres_raise_range ("fds[%zd] is not a file descriptor: an int from 0 to 2**31-1", i);
          goto fail;
        }
      fds[i] = (gint) fd;
    }
  Py_DECREF (seq);
  if (PyObject_GetBuffer (argv[0], &data, PyBUF_SIMPLE) < 0)
    goto fail;
  Py_BEGIN_ALLOW_THREADS;
  buf = memres_buffer_import_message (mr, data.buf, (gsize) data.len, fds, (guint) n_fds, stream,
                                      &error);
  if (mr != NULL)
    memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  PyBuffer_Release (&data);
  g_free (fds);
  if (buf == NULL)
    return pymemres_raise (error);
  return pymemres_buffer_wrap (buf);

fail:
  g_free (fds);
  if (mr != NULL)
    memres_resource_unref (mr);
  return NULL;
}
