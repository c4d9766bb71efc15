/* memres - CUDA memory resources
 * buffer-transfer.c: memres.Buffer's transfers, each with the GIL released: copy_to (with the
 * destination it allocates when none is given), copy_from, fill (an int or a bytes-like
 * pattern), read and write, and the parsing of their arguments. buffer.c's method table takes
 * them (PYMEMRES_BUFFER_TRANSFER_METHODS, pymemres.h). */
#include "pymemres.h"

#include <string.h>

/* cuda.core's names: copy_to(dst=None, *, stream), copy_from(src, *, stream) (they were
 * "other", which the docs never named) */
static const char *const copy_to_names[] = { "dst", "stream" };
static const char *const copy_from_names[] = { "src", "stream" };

/* copy_to() without dst: a new Buffer of @self's size from the Resource that allocated @self
 * (or, for a buffer made without one, its C resource: memres.from_dlpack() of memres memory),
 * ordered on @stream, as cuda.core's copy_to() allocates from the buffer's memory resource;
 * NULL with ClosedError (the buffer or that Resource closed), ValueError (memory of no memres
 * resource: wrapped memory, another producer's DLPack) or the allocation's error. */
static PyObject *
new_destination (PyMemresBuffer *self, MemresStream stream)
{
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  PyObject *resource, *made;

  if (memres_buffer_is_closed (self->buf))
    return pymemres_raise_closed ();
  if (self->resource != NULL)
    resource = Py_NewRef (self->resource);
  else if ((mr = memres_buffer_get_resource (self->buf)) != NULL)
    resource = pymemres_resource_wrap (memres_resource_ref (mr));
  else
    {
      PyErr_SetString (PyExc_ValueError,
                       "copy_to(): give dst: this buffer's memory has no memres resource to "
                       "allocate one from (wrapped memory: Buffer.from_handle(), or "
                       "memres.from_dlpack() of another library's tensor)");
      return NULL;
    }
  if (resource == NULL)
    return NULL;
  if ((mr = pymemres_resource_hold (resource)) == NULL)
    {
      Py_DECREF (resource);
      return NULL;
    }
  buf = memres_resource_allocate (mr, memres_buffer_get_size (self->buf), stream, &error);
  pymemres_resource_release (mr);
  if (buf == NULL)
    {
      Py_DECREF (resource);
      return pymemres_raise (error);
    }
  made
      = pymemres_buffer_wrap_known (buf, ((PyMemresResource *) resource)->close_may_wait, resource);
  Py_DECREF (resource);
  return made;
}

/* copy_to(dst=None, stream=None) -> dst and copy_from(src, stream=None) */
static PyObject *
buffer_copy (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
             gboolean to)
{
  PyObject *argv[2] = { NULL, NULL };
  PyObject *made = NULL; /* the dst copy_to() allocated */
  MemresStream stream = NULL;
  GError *error = NULL;
  MemresBuffer *other;
  gboolean ok;

  if (pymemres_parse_args (to ? "copy_to" : "copy_from", args, nargs, kwnames,
                           to ? copy_to_names : copy_from_names, 2, to ? 0 : 1, argv)
          < 0
      || pymemres_stream_from_object (argv[1], &stream) < 0)
    return NULL;
  if (to && (argv[0] == NULL || argv[0] == Py_None))
    {
      if ((made = new_destination (self, stream)) == NULL)
        return NULL;
      argv[0] = made;
    }
  if (!PyObject_TypeCheck (argv[0], &PyMemresBuffer_Type))
    {
      PyErr_Format (PyExc_TypeError, "%s() needs a memres.Buffer, not %.100s",
                    to ? "copy_to" : "copy_from", Py_TYPE (argv[0])->tp_name);
      return NULL;
    }
  if (pymemres_buffer_use (self, FALSE) < 0)
    {
      Py_XDECREF (made);
      return NULL;
    }
  if (pymemres_buffer_use ((PyMemresBuffer *) argv[0], FALSE) < 0)
    {
      pymemres_buffer_unuse (self, FALSE);
      Py_XDECREF (made);
      return NULL;
    }
  /* read once counted: a close() on another thread (free-threaded) may swap it before */
  other = ((PyMemresBuffer *) argv[0])->buf;
  Py_BEGIN_ALLOW_THREADS;
  ok = to ? memres_buffer_copy_to (self->buf, other, stream, &error)
          : memres_buffer_copy_from (self->buf, other, stream, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse ((PyMemresBuffer *) argv[0], FALSE);
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    {
      Py_XDECREF (made); /* closed by its last reference */
      return pymemres_raise (error);
    }
  if (!to)
    Py_RETURN_NONE;
  return made != NULL ? made : Py_NewRef (argv[0]);
}

PyObject *
pymemres_buffer_copy_to (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
  return buffer_copy (self, args, nargs, kwnames, TRUE);
}

PyObject *
pymemres_buffer_copy_from (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
  return buffer_copy (self, args, nargs, kwnames, FALSE);
}

/* @obj as an int from 0 to G_MAXUINT32 in *@out; -1 with TypeError for what is not an int (a
 * bool included), memres.OutOfRangeError (a ValueError) naming @what for an int out of that range
 * (the "k" and "I" formats would have taken it modulo 2**64 or 2**32: fill(2**64 + 0xab) filled
 * with 0xab) */
static int
uint32_arg (PyObject *obj, const char *what, guint32 *out)
{
  unsigned long long v;
  PyObject *index = pymemres_index_not_bool (obj, "fill %s must be an int, not a bool", what);

  if (index == NULL)
    return -1;
  v = PyLong_AsUnsignedLongLong (index);
  Py_DECREF (index);
  if ((v == (unsigned long long) -1 && PyErr_Occurred ()) || v > G_MAXUINT32)
    {
      PyErr_Clear ();
      pymemres_raise_range ("fill %s must be an int from 0 to 2**32-1", what);
      return -1;
    }
  *out = (guint32) v;
  return 0;
}

/* A bytes-like fill pattern @obj (cuda.core's fill(value: bytes)): 1, 2 or 4 bytes, repeated as
 * they are in memory, in *@value and its length in *@width (which, when @width_given, must be
 * that length already); -1 with InvalidArgumentError otherwise. */
static int
pattern_arg (PyObject *obj, gboolean width_given, guint32 *value, guint32 *width)
{
  Py_buffer view;
  gsize len;

  if (PyObject_GetBuffer (obj, &view, PyBUF_SIMPLE) < 0)
    return -1;
  len = (gsize) view.len;
  *value = 0;
  if (len == 1 || len == 2 || len == 4)
    memcpy (value, view.buf, len);
  PyBuffer_Release (&view);
  if (len != 1 && len != 2 && len != 4)
    {
      pymemres_raise (
          g_error_new (MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "a fill pattern must be 1, 2 or 4 bytes long, not %" G_GSIZE_FORMAT, len));
      return -1;
    }
  if (width_given && *width != len)
    {
      pymemres_raise (g_error_new (
          MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
          "fill width %u differs from the %" G_GSIZE_FORMAT " bytes of the pattern", *width, len));
      return -1;
    }
  *width = (guint32) len;
  return 0;
}

PyObject *
pymemres_buffer_fill (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "value", "width", "stream", NULL };
  PyObject *value_obj, *width_obj = NULL;
  guint32 value, width = 1;
  PyObject *stream_obj = NULL;
  MemresStream stream = NULL;
  GError *error = NULL;
  gboolean ok;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|OO:fill", keywords, &value_obj, &width_obj,
                                    &stream_obj)
      || (width_obj != NULL && uint32_arg (width_obj, "width", &width) < 0)
      || pymemres_stream_from_object (stream_obj, &stream) < 0)
    return NULL;
  if (!PyLong_Check (value_obj) && PyObject_CheckBuffer (value_obj))
    {
      /* cuda.core's fill(b"\x01\x02"): the pattern's bytes as they are, its length the width */
      if (pattern_arg (value_obj, width_obj != NULL, &value, &width) < 0)
        return NULL;
    }
  else if (uint32_arg (value_obj, "value", &value) < 0)
    return NULL;
  else if ((width == 1 || width == 2) && value >> (8 * width) != 0)
    /* an int that does not fit the width: out of its range (OutOfRangeError: the OverflowError
     * cuda.core raises for fill(256), a ValueError as its older fill(value, width) raised;
     * it was an InvalidArgumentError alone); another width is the core's refusal */
    return pymemres_raise_range ("fill value %u is out of range for width %u: value must be in "
                                 "range [0, %u]",
                                 value, width, (1u << (8 * width)) - 1);
  if (pymemres_buffer_use (self, FALSE) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_buffer_fill (self->buf, value, width, stream, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

/* An int (or __index__; not a bool) from 0 to 2**64-1 in *@out; -1 with TypeError, or
 * memres.OutOfRangeError (a ValueError and an OverflowError) worded @negative for a negative
 * one, @too_big for one past 2**64-1 (one past the buffer's end is memres's own refusal,
 * later). */
static int
unsigned_arg (PyObject *obj, gsize *out, const char *negative, const char *too_big,
              const char *not_bool)
{
  /* a bool is no offset or size (read(True) read from offset 1): TypeError @not_bool */
  PyObject *index = pymemres_index_not_bool (obj, "%s", not_bool);

  if (index == NULL)
    return -1;
  *out = PyLong_AsSize_t (index);
  if (*out == (gsize) -1 && PyErr_Occurred ())
    {
      PyObject *zero;
      int below = -1;

      if (PyErr_ExceptionMatches (PyExc_OverflowError))
        {
          PyErr_Clear ();
          zero = PyLong_FromLong (0);
          below = zero != NULL ? PyObject_RichCompareBool (index, zero, Py_LT) : -1;
          Py_XDECREF (zero);
        }
      Py_DECREF (index);
      if (below >= 0)
        pymemres_raise_range ("%s", below ? negative : too_big);
      return -1;
    }
  Py_DECREF (index);
  return 0;
}

/* read()'s and write()'s offset */
static int
offset_arg (PyObject *obj, gsize *out)
{
  return unsigned_arg (obj, out, "offset must be >= 0", "offset must be an int from 0 to 2**64-1",
                       "offset must be an int, not bool");
}

/* read()'s size (None, to the end, is the caller's) */
static int
count_arg (PyObject *obj, gsize *out)
{
  return unsigned_arg (obj, out, "size must be None (to the end) or an int of 0 or more",
                       "size must be None (to the end) or an int from 0 to 2**64-1",
                       "size must be None (to the end) or an int, not bool");
}

PyObject *
pymemres_buffer_read (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "offset", "size", "stream", NULL };
  gsize offset = 0, n = 0;
  PyObject *offset_obj = NULL, *size_obj = Py_None, *stream_obj = NULL, *bytes;
  MemresStream stream = NULL;
  GError *error = NULL;
  gsize size = memres_buffer_get_size (self->buf);
  gboolean ok;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|OOO:read", keywords, &offset_obj, &size_obj,
                                    &stream_obj)
      || (offset_obj != NULL && offset_arg (offset_obj, &offset) < 0))
    return NULL;
  /* size: None (the default: to the end) or a count of bytes */
  if (size_obj != Py_None && count_arg (size_obj, &n) < 0)
    return NULL;
  if (pymemres_stream_from_object (stream_obj, &stream) < 0)
    return NULL;
  if (memres_buffer_is_closed (self->buf))
    return pymemres_raise_closed ();
  /* past the end: memres's own refusal (InvalidArgumentError, as write() gives; an offset past
   * the end was a plain ValueError), before any bytes object of that size is made (read(0,
   * 2**62) was a MemoryError, a large one a long wait); the message names the size asked, 0
   * for None (read(17, 2) said "range of 0 bytes") */
  if (offset > size || (size_obj != Py_None && n > size - offset))
    {
      char nothing;

      if (!memres_buffer_read (self->buf, offset, &nothing, n, NULL, &error))
        return pymemres_raise (error);
      PyErr_SetString (PyExc_ValueError, "offset or size out of the buffer");
      return NULL;
    }
  if (size_obj == Py_None)
    n = size - offset;
  bytes = PyBytes_FromStringAndSize (NULL, (Py_ssize_t) n);
  if (bytes == NULL)
    return NULL;
  if (pymemres_buffer_use (self, FALSE) < 0)
    {
      Py_DECREF (bytes);
      return NULL;
    }
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_buffer_read (self->buf, offset, PyBytes_AS_STRING (bytes), n, stream, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    {
      Py_DECREF (bytes);
      return pymemres_raise (error);
    }
  return bytes;
}

PyObject *
pymemres_buffer_write (PyMemresBuffer *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "data", "offset", "stream", NULL };
  Py_buffer data;
  gsize offset = 0;
  PyObject *offset_obj = NULL, *stream_obj = NULL;
  MemresStream stream = NULL;
  GError *error = NULL;
  gboolean ok;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "y*|OO:write", keywords, &data, &offset_obj,
                                    &stream_obj))
    return NULL;
  if ((offset_obj != NULL && offset_arg (offset_obj, &offset) < 0)
      || pymemres_stream_from_object (stream_obj, &stream) < 0)
    {
      PyBuffer_Release (&data);
      return NULL;
    }
  if (pymemres_buffer_use (self, FALSE) < 0)
    {
      PyBuffer_Release (&data);
      return NULL;
    }
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_buffer_write (self->buf, (gsize) offset, data.buf, (gsize) data.len, stream, &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  PyBuffer_Release (&data);
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}
