/* memres - CUDA memory resources
 * buffer-handle.c: Buffer.from_handle(ptr, size, mr=None, owner=None, *, stream=None), memory
 * memres did not allocate as a Buffer (cuda.core's classmethod): a view that frees nothing, a
 * view that keeps an owner object alive until it is closed, or memory an mr owns, given back
 * through mr.deallocate(ptr, size, stream=...) when it is closed. The buffers are of a subtype
 * of Buffer (memres.ForeignBuffer) that carries what the close needs, so that Buffer's own
 * allocate+close pair tests nothing for them. The memory is wrapped with
 * memres_buffer_new_for_pointer(), whose release function calls back into Python. */
#include "pymemres.h"

#include <memres/memres-plugin.h> /* memres_cuda_get_driver() */

/* What a foreign buffer's release needs, shared by the object (which may change @stream:
 * close(stream)) and the release function (which may run after the object is gone: a DLPack
 * tensor holds the buffer, on whichever thread drops the last reference): freed with the last of
 * the two references (@refs, atomic).
 *
 * Without the GIL (the package declares Py_MOD_GIL_NOT_USED on a free-threaded CPython) a
 * close(), the getters and a release on another thread may run at once, so what they share is
 * read and changed under @lock: @owner, @stream, @released. @lock is held only for those loads
 * and stores, never across a call into Python or memres (a reference dropped is dropped after
 * the unlock), so that it cannot deadlock with the GIL or a stop-the-world pause. @mr is set at
 * creation and dropped with the last reference: it needs no lock. Which close() an exception of
 * mr.deallocate() goes to is per thread (`closing`, below), not in the shared state: the close
 * that runs the release on its own thread raises it, whatever closes run at once elsewhere. */
typedef struct
{
  gint refs;
  GMutex lock;
  PyObject *mr;     /* the owner of the memory (its deallocate is called), or NULL */
  PyObject *owner;  /* kept alive until the close, or NULL (@lock) */
  PyObject *stream; /* the stream object deallocate gets (None: none was given) (@lock) */
  guint64 ptr;
  gsize size;
  gboolean released; /* the release ran: the getters answer None (@lock) */
} Foreign;

/* The close() this thread is in (a foreign buffer's, with the stream it was given, NULL for
 * none) and the exception of mr.deallocate() taken for it by the release, when the close runs
 * the release on this thread. A close inside a deallocate (another buffer's) saves and restores
 * them. */
typedef struct
{
  Foreign *f;
  PyObject *stream; /* borrowed from the close's arguments */
  PyObject *exc;
} Closing;

static __thread Closing closing;

typedef struct
{
  PyMemresBuffer base;
  Foreign *foreign;
} PyMemresForeignBuffer;

#if PY_VERSION_HEX >= 0x030D0000
#define interpreter_finalizing() Py_IsFinalizing ()
#else
#define interpreter_finalizing() _Py_IsFinalizing ()
#endif

/* The exception being raised, taken (a new reference; its traceback in it), and raised again:
 * PyErr_GetRaisedException() and PyErr_SetRaisedException() of CPython 3.12 */
static PyObject *
take_exception (void)
{
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException ();
#else
  PyObject *type, *value, *tb;

  PyErr_Fetch (&type, &value, &tb);
  PyErr_NormalizeException (&type, &value, &tb);
  if (tb != NULL && value != NULL)
    PyException_SetTraceback (value, tb);
  Py_XDECREF (type);
  Py_XDECREF (tb);
  return value;
#endif
}

static void
raise_exception (PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException (exc);
#else
  PyErr_Restore (Py_NewRef ((PyObject *) Py_TYPE (exc)), exc, PyException_GetTraceback (exc));
#endif
}

/* @obj.@name in *@value, NULL when @obj has no such attribute; -1 with another exception
 * (PyObject_GetOptionalAttrString() of CPython 3.13) */
static int
optional_attr (PyObject *obj, const char *name, PyObject **value)
{
  *value = PyObject_GetAttrString (obj, name);
  if (*value != NULL)
    return 1;
  if (!PyErr_ExceptionMatches (PyExc_AttributeError))
    return -1;
  PyErr_Clear ();
  return 0;
}

/* Drops a reference (the GIL held, or the thread attached on a free-threaded build). */
static void
foreign_unref (Foreign *f)
{
  if (!g_atomic_int_dec_and_test (&f->refs))
    return;
  Py_XDECREF (f->mr);
  Py_XDECREF (f->owner);
  Py_XDECREF (f->stream);
  g_mutex_clear (&f->lock);
  g_free (f);
}

/* mr.deallocate(ptr, size, stream=stream); FALSE with the exception set */
static gboolean
call_deallocate (Foreign *f, PyObject *stream)
{
  PyObject *name = PyUnicode_FromString ("deallocate");
  PyObject *kwnames = Py_BuildValue ("(s)", "stream");
  PyObject *ptr = PyLong_FromUnsignedLongLong (f->ptr);
  PyObject *size = PyLong_FromSize_t (f->size);
  PyObject *result = NULL;

  if (name != NULL && kwnames != NULL && ptr != NULL && size != NULL)
    {
      /* a free slot before the arguments, which PY_VECTORCALL_ARGUMENTS_OFFSET lets the
       * callee use */
      PyObject *args[] = { NULL, f->mr, ptr, size, stream };

      result
          = PyObject_VectorcallMethod (name, args + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    }
  Py_XDECREF (name);
  Py_XDECREF (kwnames);
  Py_XDECREF (ptr);
  Py_XDECREF (size);
  Py_XDECREF (result);
  return result != NULL;
}

/* The buffer's release (memres_buffer_new_for_pointer()): on any thread, with or without the
 * GIL; nothing once the interpreter is finalizing (the memory is left to the process's end).
 * memres runs it once, on the thread that drops the buffer's last reference. */
static void
foreign_release (gpointer data)
{
  Foreign *f = data;
  gboolean in_close = closing.f == f;
  PyGILState_STATE gil;
  PyObject *owner, *stream;

  if (interpreter_finalizing ())
    return;
  gil = PyGILState_Ensure ();
  g_mutex_lock (&f->lock);
  f->released = TRUE;
  owner = g_steal_pointer (&f->owner);
  /* the stream of the close that runs the release, else the last one given */
  stream = Py_NewRef (in_close && closing.stream != NULL ? closing.stream : f->stream);
  g_mutex_unlock (&f->lock);
  if (f->mr != NULL && !call_deallocate (f, stream))
    {
      /* raised by the object's close() that runs this; in a garbage collection, a DLPack
       * consumer's deleter or another thread's close nobody can catch it: reported as CPython
       * reports an exception in __del__ */
      if (in_close && closing.exc == NULL)
        closing.exc = take_exception ();
      else
        PyErr_WriteUnraisable (f->mr);
    }
  Py_DECREF (stream);
  Py_XDECREF (owner);
  foreign_unref (f);
  PyGILState_Release (gil);
}

static const char *const from_handle_names[] = { "ptr", "size", "mr", "owner", "stream" };

/* The flags and device of memory @mr owns, from its cuda.core properties (is_device_accessible,
 * is_host_accessible, is_managed, device_id): 1 when @mr has them, 0 when it has not (the
 * driver is asked), -1 with an exception. */
static int
flags_of_mr (PyObject *mr, MemresMemoryFlags *flags, gint *device)
{
  static const char *const names[] = { "is_device_accessible", "is_host_accessible", "is_managed" };
  static const MemresMemoryFlags bits[]
      = { MEMRES_MEMORY_DEVICE_ACCESSIBLE, MEMRES_MEMORY_HOST_ACCESSIBLE, MEMRES_MEMORY_MANAGED };
  PyObject *id;

  *flags = 0;
  *device = -1;
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      PyObject *value;
      int truth;

      if (optional_attr (mr, names[i], &value) < 0)
        return -1;
      if (value == NULL)
        {
          if (i < 2)
            return 0; /* not a cuda.core resource: the driver says what the memory is */
          continue;
        }
      truth = PyObject_IsTrue (value);
      Py_DECREF (value);
      if (truth < 0)
        return -1;
      if (truth)
        *flags |= bits[i];
    }
  if (*flags == 0)
    {
      PyErr_SetString (PyExc_ValueError,
                       "mr says its memory is neither device- nor host-accessible");
      return -1;
    }
  /* memres's rule: host memory (page-locked included) is of device -1; device-only and
   * managed memory of mr.device_id */
  if ((*flags & MEMRES_MEMORY_HOST_ACCESSIBLE) && !(*flags & MEMRES_MEMORY_MANAGED))
    return 1;
  if (optional_attr (mr, "device_id", &id) < 0)
    return -1;
  if (id != NULL)
    {
      long value = PyLong_AsLong (id);

      Py_DECREF (id);
      if (value == -1 && PyErr_Occurred ())
        return -1;
      if (value < G_MININT || value > G_MAXINT)
        {
          PyErr_SetString (PyExc_ValueError, "mr.device_id is out of range");
          return -1;
        }
      *device = (gint) value;
    }
  return 1;
}

PyObject *
pymemres_buffer_from_handle (PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
  PyObject *argv[5] = { NULL };
  PyObject *mr, *owner, *stream_obj, *deallocate;
  MemresStream stream = NULL;
  MemresMemoryFlags flags = 0;
  gint device = -1;
  unsigned long long ptr;
  size_t size;
  GError *error = NULL;
  MemresBuffer *buf;
  PyMemresForeignBuffer *self;
  Foreign *f;

  if (pymemres_parse_args ("from_handle", args, nargs, kwnames, from_handle_names, 5, 2, argv) < 0)
    return NULL;
  if (nargs > 4)
    {
      PyErr_SetString (PyExc_TypeError, "from_handle(): stream is keyword-only");
      return NULL;
    }
  mr = argv[2] != Py_None ? argv[2] : NULL;
  owner = argv[3] != Py_None ? argv[3] : NULL;
  stream_obj = argv[4] != Py_None ? argv[4] : NULL;
  /* cuda.core's rules: an address and a size of 0 or more (negative: OverflowError, as its
   * size_t conversion gives; memres.OutOfRangeError is one), one owner at most, a stream only for
   * memory an mr frees */
  if (!PyLong_Check (argv[0]) || !PyLong_Check (argv[1]))
    {
      PyErr_Format (PyExc_TypeError,
                    "from_handle(): ptr and size must be ints, not %.100s and "
                    "%.100s",
                    Py_TYPE (argv[0])->tp_name, Py_TYPE (argv[1])->tp_name);
      return NULL;
    }
  /* out of range: memres.OutOfRangeError, an OverflowError as cuda.core's and a ValueError */
  if ((ptr = pymemres_size_from_object ("ptr", argv[0])) == (size_t) -1 && PyErr_Occurred ())
    return NULL;
  if ((size = pymemres_size_from_object ("size", argv[1])) == (size_t) -1 && PyErr_Occurred ())
    return NULL;
  if (mr != NULL && owner != NULL)
    {
      PyErr_SetString (PyExc_ValueError,
                       "from_handle(): give mr (memory it frees) or owner (an object kept "
                       "alive), not both");
      return NULL;
    }
  if (stream_obj != NULL && mr == NULL)
    {
      PyErr_SetString (PyExc_ValueError,
                       "from_handle(): stream is the stream mr.deallocate() frees on: it needs "
                       "mr");
      return NULL;
    }
  if (mr != NULL)
    {
      if (optional_attr (mr, "deallocate", &deallocate) < 0)
        return NULL;
      if (deallocate == NULL || !PyCallable_Check (deallocate))
        {
          Py_XDECREF (deallocate);
          PyErr_Format (PyExc_TypeError,
                        "from_handle(): mr must have a deallocate(ptr, size, *, stream) method "
                        "(a cuda.core MemoryResource, or your own), not %.100s; a memres.Resource "
                        "frees only the Buffers it allocated",
                        Py_TYPE (mr)->tp_name);
          return NULL;
        }
      Py_DECREF (deallocate);
      if (flags_of_mr (mr, &flags, &device) < 0)
        return NULL;
      /* an mr owns driver memory (cuda.core's): the driver, in use in this process already, is
       * loaded here too, so that the wrap checks mr's word against its own (device memory said
       * to be host-accessible is refused); without one, nothing changes */
      if (flags != 0)
        (void) memres_cuda_get_driver (NULL);
    }
  if (pymemres_stream_from_object (stream_obj, &stream) < 0)
    return NULL;

  /* the object first: once the memory is wrapped, nothing fails (a failure after it would give
   * memory back that the caller still owns) */
  self = PyObject_GC_New (PyMemresForeignBuffer, &PyMemresForeignBuffer_Type);
  if (self == NULL)
    return NULL;
  f = g_new0 (Foreign, 1);
  g_mutex_init (&f->lock);
  f->refs = 2; /* the object's and the release's */
  f->mr = Py_XNewRef (mr);
  f->owner = Py_XNewRef (owner);
  f->stream = Py_NewRef (stream_obj != NULL ? stream_obj : Py_None);
  f->ptr = ptr;
  f->size = size;
  buf = memres_buffer_new_for_pointer ((gpointer) (guintptr) ptr, size, device, flags,
                                       foreign_release, f, &error);
  if (buf == NULL)
    {
      f->refs = 1;
      foreign_unref (f);
      PyObject_GC_Del (self); /* never initialized (nor tracked): not through its dealloc */
      return pymemres_raise (error);
    }
  /* what a close with no stream of its own, and DLPack's ordering, use (an open buffer: no
   * error) */
  (void) memres_buffer_set_deallocation_stream (buf, stream, NULL);
  pymemres_buffer_init (&self->base, buf, pymemres_close_may_wait (buf), NULL);
  self->foreign = f;
  PyObject_GC_Track ((PyObject *) self);
  return (PyObject *) self;
}

static PyObject *foreign_close_with (PyMemresForeignBuffer *self, PyObject *stream_obj,
                                     MemresStream stream);

static void
foreign_dealloc (PyMemresForeignBuffer *self)
{
  Foreign *f = self->foreign;

  PyObject_GC_UnTrack ((PyObject *) self);
  /* the base's dealloc closes an open buffer (the release runs, taking the GIL it holds) and
   * frees the object (tp_free: PyObject_GC_Del) */
  PyMemresBuffer_Type.tp_dealloc ((PyObject *) self);
  foreign_unref (f);
}

/* The garbage collector's view: the mr, owner and stream objects are the object's to visit
 * when it is their only way in, that is when no DLPack tensor holds the buffer (the release,
 * which uses them, would run when the tensor goes) or when the release ran already. An mr that
 * keeps its buffers (a list of them, as a pool does) and a buffer whose owner holds it were
 * cycles nothing collected: the objects, and the memory never given back, lived until exit. */
static gboolean
foreign_refs_are_ours (PyMemresForeignBuffer *self)
{
  Foreign *f = self->foreign;

  return g_atomic_int_get (&f->released)
         || !(PYMEMRES_STATE_GET (&self->base.state) & PYMEMRES_EXPORTED);
}

/* No lock here: the collector runs with the GIL held (or the world stopped), and @lock is never
 * held across a point where that can happen. */
static int
foreign_traverse (PyMemresForeignBuffer *self, visitproc visit, void *arg)
{
  Foreign *f = self->foreign;

  if (f != NULL && foreign_refs_are_ours (self))
    {
      Py_VISIT (f->mr);
      Py_VISIT (f->owner);
      Py_VISIT (f->stream);
    }
  return 0;
}

/* A foreign buffer in garbage (a cycle) is closed before any object of the cycle is cleared,
 * so that mr.deallocate() runs, once, with its mr whole (PEP 442); an exception of it is
 * reported as one in __del__ is. */
static void
foreign_finalize (PyMemresForeignBuffer *self)
{
  PyObject *exc = take_exception (), *result;

  if (!(PYMEMRES_STATE_GET (&self->base.state) & PYMEMRES_CLOSED))
    {
      result = foreign_close_with (self, NULL, NULL);
      if (result == NULL)
        PyErr_WriteUnraisable ((PyObject *) self);
      Py_XDECREF (result);
    }
  if (exc != NULL)
    raise_exception (exc);
}

/* After foreign_finalize(): the release ran (the buffer was not exported), so the references
 * are the object's alone; dropping them breaks the cycle. */
static int
foreign_clear (PyMemresForeignBuffer *self)
{
  Foreign *f = self->foreign;
  PyObject *mr = NULL, *owner = NULL, *stream = NULL;

  if (f == NULL || !foreign_refs_are_ours (self))
    return 0;
  g_mutex_lock (&f->lock);
  if (f->released)
    {
      mr = g_steal_pointer (&f->mr);
      owner = g_steal_pointer (&f->owner);
      stream = g_steal_pointer (&f->stream);
    }
  g_mutex_unlock (&f->lock);
  Py_XDECREF (mr);
  Py_XDECREF (owner);
  Py_XDECREF (stream);
  return 0;
}

/* close() with @stream_obj (NULL: none given) as the stream deallocate gets; an exception of
 * deallocate is raised here, the buffer closed all the same */
static PyObject *
foreign_close_with (PyMemresForeignBuffer *self, PyObject *stream_obj, MemresStream stream)
{
  Foreign *f = self->foreign;
  PyObject *result, *exc, *old = NULL;
  Closing outer = closing;

  /* kept for a release that runs later (a DLPack tensor holds the buffer) */
  if (stream_obj != NULL)
    {
      g_mutex_lock (&f->lock);
      if (!f->released)
        {
          old = f->stream;
          f->stream = Py_NewRef (stream_obj);
        }
      g_mutex_unlock (&f->lock);
      Py_XDECREF (old);
    }
  closing.f = f;
  closing.stream = stream_obj;
  closing.exc = NULL;
  result = pymemres_buffer_close_on (&self->base, stream);
  exc = closing.exc;
  closing = outer;
  if (exc != NULL)
    {
      Py_XDECREF (result);
      raise_exception (exc);
      return NULL;
    }
  return result;
}

static const char *const close_names[] = { "stream" };

static PyObject *
foreign_close (PyMemresForeignBuffer *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
  PyObject *argv[1] = { NULL };
  MemresStream stream = NULL;

  if (pymemres_parse_args ("close", args, nargs, kwnames, close_names, 1, 0, argv) < 0
      || pymemres_stream_from_object (argv[0], &stream) < 0)
    return NULL;
  return foreign_close_with (self, argv[0] != Py_None ? argv[0] : NULL, stream);
}

/* set_deallocation_stream(stream): also the stream mr.deallocate() gets at a close without one */
static PyObject *
foreign_set_deallocation_stream (PyMemresForeignBuffer *self, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames)
{
  Foreign *f = self->foreign;
  PyObject *old = NULL;
  MemresStream stream;
  PyObject *stream_obj
      = pymemres_buffer_set_deallocation_stream (&self->base, args, nargs, kwnames, &stream);

  if (stream_obj == NULL)
    return NULL;
  g_mutex_lock (&f->lock);
  if (!f->released && f->mr != NULL)
    {
      old = f->stream;
      f->stream = stream_obj;
      stream_obj = NULL;
    }
  g_mutex_unlock (&f->lock);
  Py_XDECREF (old);
  Py_XDECREF (stream_obj);
  Py_RETURN_NONE;
}

static PyObject *
foreign_exit (PyMemresForeignBuffer *self, PyObject *const *args, Py_ssize_t nargs)
{
  return foreign_close_with (self, NULL, NULL);
}

static PyObject *
foreign_get_mr (PyMemresForeignBuffer *self, void *closure)
{
  Foreign *f = self->foreign;
  PyObject *value = NULL;

  /* the state word, not the MemresBuffer: a close of an exported buffer swaps it */
  if (PYMEMRES_STATE_GET (&self->base.state) & PYMEMRES_CLOSED)
    Py_RETURN_NONE;
  g_mutex_lock (&f->lock);
  if (!f->released)
    value = Py_XNewRef (closure != NULL ? f->owner : f->mr);
  g_mutex_unlock (&f->lock);
  return value != NULL ? value : Py_NewRef (Py_None);
}

static PyMethodDef foreign_methods[] = {
  { "close", (PyCFunction) (void (*) (void)) foreign_close, METH_FASTCALL | METH_KEYWORDS,
    "close(stream=None)\n\n"
    "Closes the buffer. Memory an mr owns is given back by mr.deallocate(ptr, size,\n"
    "stream=S), S the stream given here, else the one given to from_handle(), else None; an\n"
    "exception it raises is raised here (the buffer is closed all the same). An owner is let\n"
    "go; a view frees nothing. Closing a closed buffer does nothing." },
  { "set_deallocation_stream", (PyCFunction) (void (*) (void)) foreign_set_deallocation_stream,
    METH_FASTCALL | METH_KEYWORDS,
    "set_deallocation_stream(stream)\n\n"
    "Records stream as the one a close() without a stream (and a buffer dropped open) frees\n"
    "on: the stream mr.deallocate() gets. ClosedError on a closed buffer." },
  { "__exit__", (PyCFunction) (void (*) (void)) foreign_exit, METH_FASTCALL,
    "__exit__(*exc) -> None\n\nclose()." },
  { NULL },
};

static PyGetSetDef foreign_getset[] = {
  { "memory_resource", (getter) foreign_get_mr, NULL,
    "The mr given to from_handle() (None without one, and once the buffer is closed).", NULL },
  { "owner", (getter) foreign_get_mr, NULL,
    "The owner given to from_handle() (None without one, and once the buffer is closed).",
    (void *) 1 },
  { NULL },
};

PyTypeObject PyMemresForeignBuffer_Type = {
  PyVarObject_HEAD_INIT (NULL, 0).tp_name = "memres.ForeignBuffer",
  .tp_basicsize = sizeof (PyMemresForeignBuffer),
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
  .tp_doc = "A Buffer over memory memres did not allocate: Buffer.from_handle().",
  .tp_new = NULL,
  .tp_dealloc = (destructor) foreign_dealloc,
  .tp_traverse = (traverseproc) foreign_traverse,
  .tp_clear = (inquiry) foreign_clear,
  .tp_finalize = (destructor) foreign_finalize,
  .tp_free = PyObject_GC_Del,
  .tp_methods = foreign_methods,
  .tp_getset = foreign_getset,
};

int
pymemres_foreign_buffer_init (void)
{
  PyMemresForeignBuffer_Type.tp_base = &PyMemresBuffer_Type;
  return PyType_Ready (&PyMemresForeignBuffer_Type);
}
