/* memres - CUDA memory resources
 * buffer.c: memres.Buffer, memory allocated from a Resource: its address, size and device,
 * close() on the METH_FASTCALL path (the GIL released only when the close may wait), its getters
 * and method table (the transfers are buffer-transfer.c's). Objects come from a small free list:
 * an allocate+close pair from Python makes no call to the object allocator. */
#include "pymemres.h"

/* Freed Buffer objects kept for reuse (under the GIL; not with the free-threaded build). */
#ifndef Py_GIL_DISABLED
#define FREE_LIST_MAX 64
static PyMemresBuffer *free_list[FREE_LIST_MAX];
static int n_free;
#endif

PyObject *
pymemres_buffer_wrap (MemresBuffer *buf)
{
  return pymemres_buffer_wrap_known (buf, pymemres_close_may_wait (buf), NULL);
}

PyObject *
pymemres_buffer_wrap_known (MemresBuffer *buf, gboolean may_wait, PyObject *resource)
{
  PyMemresBuffer *self;

#ifndef Py_GIL_DISABLED
  if (n_free > 0)
    {
      self = free_list[--n_free];
      PyObject_Init ((PyObject *) self, &PyMemresBuffer_Type);
    }
  else
#endif
    {
      self = PyObject_New (PyMemresBuffer, &PyMemresBuffer_Type);
      if (self == NULL)
        {
          memres_buffer_unref (buf);
          return NULL;
        }
    }
  pymemres_buffer_init (self, buf, may_wait, resource);
  return (PyObject *) self;
}

int
pymemres_buffer_use (PyMemresBuffer *self, gboolean view)
{
  gint state;

  do
    {
      state = PYMEMRES_STATE_GET (&self->state);
      if (state & PYMEMRES_CLOSING)
        {
          pymemres_raise_closed ();
          return -1;
        }
    }
  while (!PYMEMRES_STATE_CAS (&self->state, state, state + PYMEMRES_USER));
  if (view)
    PYMEMRES_STATE_ADD (&self->n_views, 1);
  return 0;
}

static PyObject *
buffer_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  PyErr_SetString (PyExc_TypeError,
                   "memres.Buffer cannot be created directly: use Resource.allocate(), "
                   "Buffer.from_handle() or memres.from_dlpack()");
  return NULL;
}

static void
buffer_dealloc (PyMemresBuffer *self)
{
  MemresBuffer *buf = self->buf;

  if (self->weakrefs != NULL)
    PyObject_ClearWeakRefs ((PyObject *) self);
  self->buf = NULL;
  if (buf != NULL)
    {
      /* the last reference to an open buffer closes it, which may wait (a closed buffer's
       * flags are 0: it does not) */
      if (!(self->state & PYMEMRES_CLOSED) && self->may_wait)
        {
          Py_BEGIN_ALLOW_THREADS;
          memres_buffer_unref (buf);
          Py_END_ALLOW_THREADS;
        }
      else
        memres_buffer_unref (buf);
    }
  Py_CLEAR (self->resource);
#ifndef Py_GIL_DISABLED
  if (Py_IS_TYPE (self, &PyMemresBuffer_Type) && n_free < FREE_LIST_MAX)
    {
      free_list[n_free++] = self;
      return;
    }
#endif
  Py_TYPE (self)->tp_free ((PyObject *) self);
}

/* Why close() cannot begin now: None for a buffer closed already, BufferError while it has
 * users or another thread closes it; NULL with the state free again (the caller tries again). */
static PyObject *
close_refused (PyMemresBuffer *self)
{
  gint state = PYMEMRES_STATE_GET (&self->state);
  gint n_views;

  if (state & PYMEMRES_CLOSED)
    Py_RETURN_NONE;
  if (state & PYMEMRES_CLOSING)
    {
      PyErr_SetString (PyExc_BufferError, "cannot close the buffer: another thread is closing it");
      return NULL;
    }
  if (state == 0 || state == PYMEMRES_EXPORTED)
    return NULL;
  n_views = PYMEMRES_STATE_GET (&self->n_views);
  if (n_views > 0)
    /* a memoryview would read freed memory: bytearray's and mmap's rule */
    PyErr_Format (PyExc_BufferError,
                  "cannot close the buffer: %d memoryview(s) of it are still in use "
                  "(release them first)",
                  n_views);
  else
    /* another thread copies, fills, reads, writes or exports it (__dlpack__) with the GIL
     * released */
    PyErr_Format (PyExc_BufferError,
                  "cannot close the buffer: %d call(s) on other threads are using it",
                  state / PYMEMRES_USER);
  return NULL;
}

MemresBuffer *
pymemres_closed_buffer (void)
{
  static gsize closed; /* the buffer, or 1 when it could not be made */

  if (g_once_init_enter (&closed))
    {
      static char nothing;
      MemresBuffer *buf = memres_buffer_new_for_pointer (
          &nothing, 0, -1, MEMRES_MEMORY_HOST_ACCESSIBLE, NULL, NULL, NULL);

      if (buf != NULL)
        memres_buffer_close (buf, NULL, NULL);
      g_once_init_leave (&closed, buf != NULL ? (gsize) buf : 1);
    }
  if (closed == 1)
    {
      PyErr_NoMemory ();
      return NULL;
    }
  return memres_buffer_ref ((MemresBuffer *) closed);
}

/* close() of a buffer exported through DLPack (@self's state CLOSING): the object lets go of
 * the memory, which its consumers' tensors keep; the last reference (the object's, when every
 * tensor is gone already) frees it on @stream when one was given, else on its deallocation
 * stream. A failure of that free is memres_buffer_unref()'s: logged, not raised. */
static PyObject *
close_exported (PyMemresBuffer *self, MemresStream stream)
{
  MemresBuffer *buf = self->buf, *closed;
  GError *error = NULL;

  if ((stream != NULL && !memres_buffer_set_deallocation_stream (buf, stream, &error))
      || (closed = pymemres_closed_buffer ()) == NULL)
    {
      PYMEMRES_STATE_SET (&self->state, memres_buffer_is_closed (buf)
                                            ? PYMEMRES_CLOSING | PYMEMRES_CLOSED
                                            : PYMEMRES_EXPORTED);
      return error != NULL ? pymemres_raise (error) : NULL;
    }
  self->buf = closed;
  PYMEMRES_STATE_SET (&self->state, PYMEMRES_CLOSING | PYMEMRES_CLOSED);
  Py_CLEAR (self->resource);
  if (self->may_wait)
    {
      Py_BEGIN_ALLOW_THREADS;
      memres_buffer_unref (buf);
      Py_END_ALLOW_THREADS;
    }
  else
    memres_buffer_unref (buf);
  Py_RETURN_NONE;
}

static const char *const stream_names[] = { "stream" };

void
pymemres_buffer_mark_exported (PyMemresBuffer *self)
{
  gint state;

  do
    state = PYMEMRES_STATE_GET (&self->state);
  while (!PYMEMRES_STATE_CAS (&self->state, state, state | PYMEMRES_EXPORTED));
}

/* close(stream), inline in close() itself */
G_ALWAYS_INLINE static inline PyObject *
close_on (PyMemresBuffer *self, MemresStream stream)
{
  GError *error = NULL;
  gboolean ok;

  /* no user may begin while the state says CLOSING */
  while (G_UNLIKELY (!PYMEMRES_STATE_CAS (&self->state, 0, PYMEMRES_CLOSING)))
    {
      PyObject *refused;

      if (PYMEMRES_STATE_CAS (&self->state, PYMEMRES_EXPORTED,
                              PYMEMRES_EXPORTED | PYMEMRES_CLOSING))
        return close_exported (self, stream);
      refused = close_refused (self);
      if (refused != NULL || PyErr_Occurred ())
        return refused;
    }
  if (self->may_wait)
    {
      Py_BEGIN_ALLOW_THREADS;
      ok = memres_buffer_close (self->buf, stream, &error);
      Py_END_ALLOW_THREADS;
    }
  else
    ok = memres_buffer_close (self->buf, stream, &error);
  if (G_LIKELY (ok))
    {
      PYMEMRES_STATE_SET (&self->state, PYMEMRES_CLOSING | PYMEMRES_CLOSED);
      /* memory_resource is None now: the Resource object is not needed any more */
      Py_CLEAR (self->resource);
      Py_RETURN_NONE;
    }
  /* a failed close leaves the buffer open, unless the kind broke its contract */
  PYMEMRES_STATE_SET (&self->state,
                      memres_buffer_is_closed (self->buf) ? PYMEMRES_CLOSING | PYMEMRES_CLOSED : 0);
  return pymemres_raise (error);
}

PyObject *
pymemres_buffer_close_on (PyMemresBuffer *self, MemresStream stream)
{
  return close_on (self, stream);
}

static PyObject *
buffer_close (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
  PyObject *argv[1] = { NULL };
  MemresStream stream = NULL;

  if (G_UNLIKELY (nargs != 0 || kwnames != NULL)
      && (pymemres_parse_args ("close", args, nargs, kwnames, stream_names, 1, 0, argv) < 0
          || pymemres_stream_from_object (argv[0], &stream) < 0))
    return NULL;
  return close_on (self, stream);
}

PyObject *
pymemres_buffer_set_deallocation_stream (PyMemresBuffer *self, PyObject *const *args,
                                         Py_ssize_t nargs, PyObject *kwnames, MemresStream *stream)
{
  PyObject *argv[1] = { NULL };
  GError *error = NULL;
  gboolean ok;

  if (pymemres_parse_args ("set_deallocation_stream", args, nargs, kwnames, stream_names, 1, 1,
                           argv)
          < 0
      || pymemres_stream_from_object (argv[0], stream) < 0)
    return NULL;
  /* no close meanwhile (the C call is not to race one): ClosedError once one began */
  if (pymemres_buffer_use (self, FALSE) < 0)
    return NULL;
  ok = memres_buffer_set_deallocation_stream (self->buf, *stream, &error);
  pymemres_buffer_unuse (self, FALSE);
  if (!ok)
    return pymemres_raise (error);
  return Py_NewRef (argv[0]);
}

static PyObject *
buffer_set_deallocation_stream (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
  MemresStream stream;
  PyObject *set = pymemres_buffer_set_deallocation_stream (self, args, nargs, kwnames, &stream);

  if (set == NULL)
    return NULL;
  Py_DECREF (set);
  Py_RETURN_NONE;
}

static PyObject *
buffer_get_size (PyMemresBuffer *self, void *closure)
{
  return PyLong_FromSize_t (memres_buffer_get_size (self->buf));
}

static PyObject *
buffer_get_handle (PyMemresBuffer *self, void *closure)
{
  return PyLong_FromUnsignedLongLong (memres_buffer_get_address (self->buf));
}

static PyObject *
buffer_get_device_id (PyMemresBuffer *self, void *closure)
{
  return PyLong_FromLong (memres_buffer_get_device (self->buf));
}

static PyObject *
buffer_get_device_accessible (PyMemresBuffer *self, void *closure)
{
  return PyBool_FromLong (memres_buffer_is_device_accessible (self->buf));
}

static PyObject *
buffer_get_host_accessible (PyMemresBuffer *self, void *closure)
{
  return PyBool_FromLong (memres_buffer_is_host_accessible (self->buf));
}

static PyObject *
buffer_get_closed (PyMemresBuffer *self, void *closure)
{
  return PyBool_FromLong (memres_buffer_is_closed (self->buf));
}

static PyObject *
buffer_get_owner (PyMemresBuffer *self, void *closure)
{
  Py_RETURN_NONE;
}

static PyObject *
buffer_get_flags (PyMemresBuffer *self, void *closure)
{
  return PyLong_FromUnsignedLong (memres_buffer_get_flags (self->buf));
}

/* is_managed and is_mapped (cuda.core's names): one flag each, @closure the bit */
static PyObject *
buffer_get_flag (PyMemresBuffer *self, void *closure)
{
  return PyBool_FromLong ((memres_buffer_get_flags (self->buf) & GPOINTER_TO_UINT (closure)) != 0);
}

static PyObject *
buffer_get_resource (PyMemresBuffer *self, void *closure)
{
  MemresResource *mr = memres_buffer_get_resource (self->buf);

  if (mr == NULL)
    Py_RETURN_NONE;
  /* the object that allocated it (closed or not), whose reference keeps the resource's */
  if (self->resource != NULL)
    return Py_NewRef (self->resource);
  return pymemres_resource_wrap (memres_resource_ref (mr));
}

static PyObject *
buffer_repr (PyMemresBuffer *self)
{
  /* the type's own name: memres.Buffer, memres.ForeignBuffer (Buffer.from_handle()) */
  const char *type = Py_TYPE (self)->tp_name;

  if (memres_buffer_is_closed (self->buf))
    return PyUnicode_FromFormat ("<%s closed>", type);
  g_autofree char *text = g_strdup_printf (
      "<%s %" G_GSIZE_FORMAT " bytes at 0x%" G_GINT64_MODIFIER "x on device %d>", type,
      memres_buffer_get_size (self->buf), memres_buffer_get_address (self->buf),
      memres_buffer_get_device (self->buf));

  return PyUnicode_FromString (text);
}

/* cuda.core's Buffer equality: two open Buffers over the same memory (the same address and
 * size: Buffer.from_handle(buf.handle, buf.size) == buf) are equal. A closed one, and one of
 * address 0 (0 bytes), is equal to itself alone: its memory may be another's now. */
static PyObject *
buffer_richcompare (PyObject *a, PyObject *b, int op)
{
  MemresBuffer *x, *y;
  gboolean same;

  if (!PyObject_TypeCheck (b, &PyMemresBuffer_Type) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  x = ((PyMemresBuffer *) a)->buf;
  y = ((PyMemresBuffer *) b)->buf;
  if (a == b || memres_buffer_is_closed (x) || memres_buffer_is_closed (y)
      || memres_buffer_get_address (x) == 0)
    same = a == b;
  else
    same = memres_buffer_get_address (x) == memres_buffer_get_address (y)
           && memres_buffer_get_size (x) == memres_buffer_get_size (y);
  if (op == Py_NE)
    same = !same;
  return PyBool_FromLong (same);
}

/* hash() agrees with ==: of the address and size while the buffer is open, the object's own
 * once closed (or of address 0); the first answer is kept, so that it never changes */
static Py_hash_t
buffer_hash (PyMemresBuffer *self)
{
  Py_hash_t hash = (Py_hash_t) (gintptr) g_atomic_pointer_get (&self->hash);
  guint64 address;

  if (hash != 0)
    return hash;
  address = memres_buffer_get_address (self->buf);
  if (address == 0 || memres_buffer_is_closed (self->buf))
    hash = (Py_hash_t) ((guintptr) self >> 4);
  else
    hash = (Py_hash_t) (address
                        ^ ((guint64) memres_buffer_get_size (self->buf)
                           * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)));
  if (hash == 0 || hash == -1)
    hash = -2;
  /* a free-threaded build: the first hash stored is every caller's */
  if (!g_atomic_pointer_compare_and_exchange (&self->hash, NULL, (gpointer) (gintptr) hash))
    hash = (Py_hash_t) (gintptr) g_atomic_pointer_get (&self->hash);
  return hash;
}

#define FASTCALL(f) (PyCFunction) (void (*) (void)) (f)

/* pickle and copy: a Buffer is memory of this process, held once; TypeError naming what to
 * send instead (pickle's own message named neither) */
static PyObject *
buffer_reduce_ex (PyObject *self, PyObject *protocol)
{
  PyErr_Format (PyExc_TypeError,
                "cannot pickle or copy '%.100s': a Buffer is memory of this process, freed once; "
                "send its bytes (read()), or for device memory an IPC message "
                "(export_message(), memres.import_message() in the other process)",
                Py_TYPE (self)->tp_name);
  return NULL;
}

static PyMethodDef buffer_methods[] = {
  { "__reduce_ex__", buffer_reduce_ex, METH_O,
    "__reduce_ex__(protocol)\n\nRaises TypeError: a Buffer cannot be pickled or copied (send\n"
    "read()'s bytes, or export_message())." },
  { "close", FASTCALL (buffer_close), METH_FASTCALL | METH_KEYWORDS,
    "close(stream=None)\n\n"
    "Frees the memory, ordered on stream (None: the buffer's deallocation stream, the one it\n"
    "was allocated on). A close on another stream is ordered after the buffer's stream's work.\n"
    "Closing a closed buffer does nothing. Afterwards size, handle are 0 and device_id -1;\n"
    "other calls raise ClosedError. Releases the GIL when the close may wait for a stream\n"
    "(device memory that is not stream-ordered). Raises Error when the driver fails; the\n"
    "buffer stays open then.\n\n"
    "A buffer exported through DLPack (__dlpack__) is closed at once here too, but its\n"
    "memory stays allocated while a consumer's tensor lives: the last tensor's deleter\n"
    "frees it, on stream when one was given (cuda.core's and CuPy's rule). A failure of\n"
    "that free is logged, not raised." },
  { "set_deallocation_stream", FASTCALL (buffer_set_deallocation_stream),
    METH_FASTCALL | METH_KEYWORDS,
    "set_deallocation_stream(stream)\n\n"
    "Records stream as the one the buffer's memory is freed on by a close() without a stream\n"
    "and when the buffer is dropped open (cuda.core's Buffer.set_deallocation_stream); None is\n"
    "the legacy default stream. Adds no synchronization: order the buffer's uses before stream.\n"
    "ClosedError on a closed buffer." },
  PYMEMRES_BUFFER_TRANSFER_METHODS,
  { "export_message", pymemres_buffer_export_message, METH_NOARGS,
    "export_message() -> (bytes, list of int)\n\n"
    "The buffer as one message for another process: bytes plus file descriptors (yours to\n"
    "send, e.g. with socket.send_fds(), and to close). The receiver imports it with\n"
    "memres.import_message(). Needs memory that can be shared (kinds ipc, pinned with\n"
    "ipc=true, vmm with handle_type=posix_fd); NotSupportedError (a RuntimeError, as\n"
    "cuda.core raises) otherwise." },
  PYMEMRES_BUFFER_INTEROP_METHODS,
  PYMEMRES_BUFFER_MANAGED_METHODS,
  { "from_handle", FASTCALL (pymemres_buffer_from_handle),
    METH_CLASS | METH_FASTCALL | METH_KEYWORDS,
    "Buffer.from_handle(ptr, size, mr=None, owner=None, *, stream=None) -> Buffer\n\n"
    "Memory memres did not allocate, as a Buffer (cuda.core's classmethod): size bytes at\n"
    "the address ptr (an int). Who frees it:\n"
    "- neither mr nor owner: nobody; the buffer is a view and closing it frees nothing (the\n"
    "  memory must outlive it);\n"
    "- owner: an object kept alive until the buffer is closed, then let go; memres frees\n"
    "  nothing;\n"
    "- mr: the memory's owner, an object with deallocate(ptr, size, *, stream) (a cuda.core\n"
    "  MemoryResource, or your own): the close calls mr.deallocate(ptr, size, stream=S), S\n"
    "  the stream given to close(), else stream (None when neither was given); once only,\n"
    "  also for a buffer dropped open or closed under a DLPack consumer, when the last\n"
    "  tensor goes (an exception then is reported by sys.unraisablehook; from close() it is\n"
    "  raised). mr's is_device_accessible, is_host_accessible, is_managed and device_id\n"
    "  say what the memory is; otherwise (and without mr) the driver is asked\n"
    "  (cuPointerGetAttributes), and with no driver it is taken for host memory.\n"
    "A memres.Resource is no mr here: it frees only the Buffers it allocated.\n"
    "Raises ValueError for mr and owner together, stream without mr, or an mr whose memory\n"
    "is neither device- nor host-accessible; TypeError for an mr without deallocate;\n"
    "OutOfRangeError (an OverflowError and a ValueError) for a negative ptr or size;\n"
    "InvalidArgumentError for a 0 ptr of a non-zero size or a range past the end of\n"
    "memory. memres cannot tell that\n"
    "mr allocated ptr (its deallocate raises at the close). Where the driver knows ptr as\n"
    "device or managed memory (cuPointerGetAttributes), size is checked against the extent\n"
    "of its allocation: past its end raises InvalidArgumentError (code INVALID_ARGUMENT);\n"
    "elsewhere (host memory) size is trusted, as cuda.core trusts it (past the allocation,\n"
    "fill, write and copies write into memory that is not the buffer's). What mr says the\n"
    "memory is is checked against the driver: device memory mr calls host-accessible raises\n"
    "InvalidArgumentError, memory on another device than mr.device_id the same (WRONG_DEVICE).\n"
    "Thread-safe without the GIL: deallocate runs once, on the thread of the close that frees\n"
    "the memory." },
  { NULL },
};

static PyGetSetDef buffer_getset[] = {
  { "size", (getter) buffer_get_size, NULL, "The size in bytes (0 once closed)." },
  { "handle", (getter) buffer_get_handle, NULL,
    "The address as an int: a host pointer or a CUdeviceptr (0 once closed)." },
  { "device_id", (getter) buffer_get_device_id, NULL,
    "The device the memory lives on; -1 for host and page-locked memory, and once closed." },
  { "is_device_accessible", (getter) buffer_get_device_accessible, NULL,
    "True when device code can access the memory." },
  { "is_host_accessible", (getter) buffer_get_host_accessible, NULL,
    "True when host code can dereference the memory." },
  { "closed", (getter) buffer_get_closed, NULL, "True once close() succeeded." },
  { "is_closed", (getter) buffer_get_closed, NULL, "closed, by cuda.core's name." },
  { "owner", (getter) buffer_get_owner, NULL,
    "The object that keeps foreign memory alive (Buffer.from_handle(owner=...)): None for\n"
    "memory a Resource allocated, as cuda.core's Buffer.owner." },
  { "tag", (getter) pymemres_buffer_get_tag, NULL,
    "The tag the buffer was allocated under (memres.tag()), or None." },
  { "flags", (getter) buffer_get_flags, NULL, "The MemresMemoryFlags bits as an int." },
  { "is_managed", (getter) buffer_get_flag, NULL,
    "True for managed (unified) memory (MemoryFlags.MANAGED), as cuda.core's Buffer.is_managed;\n"
    "False once closed.",
    GUINT_TO_POINTER (MEMRES_MEMORY_MANAGED) },
  { "is_mapped", (getter) buffer_get_flag, NULL,
    "True for memory imported from another process (MemoryFlags.IMPORTED:\n"
    "memres.import_message()), as cuda.core's Buffer.is_mapped; False once closed.",
    GUINT_TO_POINTER (MEMRES_MEMORY_IMPORTED) },
  { "memory_resource", (getter) buffer_get_resource, NULL,
    "The Resource the buffer came from (the object whose allocate() made it, even once\n"
    "that object was closed); for memory it did not allocate, a Resource of the stack that\n"
    "did (memres.import_message()), else None (memres.from_dlpack());\n"
    "a ForeignBuffer's is its mr. None once the buffer is closed." },
  PYMEMRES_BUFFER_INTEROP_GETSET,
  PYMEMRES_BUFFER_MANAGED_GETSET,
  { NULL },
};

PyTypeObject PyMemresBuffer_Type = {
  PyVarObject_HEAD_INIT (NULL, 0).tp_name = "memres.Buffer",
  .tp_basicsize = sizeof (PyMemresBuffer),
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "Memory allocated from a Resource (Resource.allocate()), imported from another\n"
            "process (memres.import_message()), or wrapped: another library's tensor\n"
            "(memres.from_dlpack()), an address (Buffer.from_handle()). cuda.core's Buffer.\n\n"
            "Close it with close() or a with block; a Buffer that is dropped open is closed on\n"
            "its deallocation stream. A buffer keeps its resource alive. It exports itself as a\n"
            "1-D uint8 array of its size through DLPack (__dlpack__), the CUDA array interface\n"
            "(device memory) and the buffer protocol (host memory: memoryview(buf)).\n\n"
            "As cuda.core's: two open Buffers over the same memory (address and size) are ==\n"
            "and hash alike; a closed one equals itself alone. Calls on a closed Buffer raise\n"
            "ClosedError (a ValueError and a RuntimeError).",
  .tp_new = buffer_new,
  .tp_dealloc = (destructor) buffer_dealloc,
  .tp_repr = (reprfunc) buffer_repr,
  .tp_hash = (hashfunc) buffer_hash,
  .tp_richcompare = buffer_richcompare,
  .tp_weaklistoffset = offsetof (PyMemresBuffer, weakrefs),
  .tp_as_buffer = &pymemres_buffer_as_buffer,
  .tp_methods = buffer_methods,
  .tp_getset = buffer_getset,
};
