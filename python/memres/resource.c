/* memres - CUDA memory resources
 * resource.c: memres.Resource, a memory resource made from a spec string (any stack, `@name`),
 * with allocate() on the METH_FASTCALL path, statistics, trim and the stack below. */
#include "pymemres.h"

#include <string.h>

PyObject *
pymemres_resource_wrap (MemresResource *mr)
{
  PyMemresResource *self = PyObject_New (PyMemresResource, &PyMemresResource_Type);

  if (self == NULL)
    {
      memres_resource_unref (mr);
      return NULL;
    }
  self->mr = mr;
  self->weakrefs = NULL;
  self->close_may_wait = pymemres_flags_may_wait (memres_resource_get_flags (mr));
  self->identity = (guintptr) mr;
  return (PyObject *) self;
}

MemresResource *
pymemres_resource_get (PyObject *self)
{
  MemresResource *mr = ((PyMemresResource *) self)->mr;

  if (G_UNLIKELY (mr == NULL))
    pymemres_raise (
        g_error_new_literal (MEMRES_ERROR, MEMRES_ERROR_CLOSED, "the Resource is closed"));
  return mr;
}

/* The object's resource with a reference of the caller's, or NULL (no error) once it was
 * closed. On a free-threaded CPython, the reference is taken inside the object's critical
 * section, as close() clears @mr inside it: a close() on another thread cannot drop the object's
 * reference between the read of @mr and memres_resource_ref(). */
#ifndef PYMEMRES_ATOMIC_STATE
static
#endif
    MemresResource *
    pymemres_resource_take (PyObject *self)
{
  MemresResource *mr;

  PYMEMRES_BEGIN_CRITICAL_SECTION (self);
  mr = ((PyMemresResource *) self)->mr;
  if (G_LIKELY (mr != NULL))
    memres_resource_ref (mr);
  PYMEMRES_END_CRITICAL_SECTION ();
  return mr;
}

MemresResource *
pymemres_resource_ref (PyObject *self)
{
  MemresResource *mr = pymemres_resource_take (self);

  if (G_UNLIKELY (mr == NULL))
    pymemres_resource_get (self); /* ClosedError */
  return mr;
}

static PyObject *
resource_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "spec", NULL };
  const char *spec;
  GError *error = NULL;
  MemresResource *mr;
  PyMemresResource *self;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "s:Resource", keywords, &spec))
    return NULL;
  /* the creation may wait (cuInit, loading plugins, pools, the config file, a log's first
   * write): other threads run meanwhile, as during default_resource() (@spec stays the
   * argument's, which the call holds) */
  Py_BEGIN_ALLOW_THREADS;
  mr = memres_resource_new (spec, &error);
  Py_END_ALLOW_THREADS;
  if (mr == NULL)
    return pymemres_raise (error);
  self = (PyMemresResource *) type->tp_alloc (type, 0);
  if (self == NULL)
    {
      memres_resource_unref (mr);
      return NULL;
    }
  self->mr = mr;
  self->close_may_wait = pymemres_flags_may_wait (memres_resource_get_flags (mr));
  self->identity = (guintptr) mr;
  return (PyObject *) self;
}

/* close(): drops the object's reference; the stack is finalized (its memory given back to the
 * driver) once no Buffer and no other Resource object holds it, with the GIL released since a
 * finalize may wait for the device. */
static PyObject *
resource_close (PyMemresResource *self, PyObject *unused)
{
  MemresResource *mr;

  PYMEMRES_BEGIN_CRITICAL_SECTION (self);
  mr = self->mr;
  self->mr = NULL;
  PYMEMRES_END_CRITICAL_SECTION ();
  if (mr == NULL)
    Py_RETURN_NONE;
  Py_BEGIN_ALLOW_THREADS;
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  Py_RETURN_NONE;
}

static PyObject *
resource_enter (PyMemresResource *self, PyObject *unused)
{
  if (pymemres_resource_get ((PyObject *) self) == NULL)
    return NULL;
  return Py_NewRef (self);
}

static PyObject *
resource_exit (PyMemresResource *self, PyObject *const *args, Py_ssize_t nargs)
{
  PyObject *res;

  /* the three the with statement passes (exc_type, exc_value, traceback), as Buffer.__exit__
   * takes: any other number is a mistake, refused before closing anything */
  if (nargs != 3)
    {
      PyErr_Format (PyExc_TypeError, "__exit__() takes 3 arguments (%zd given)", nargs);
      return NULL;
    }
  res = resource_close (self, NULL);
  if (res == NULL)
    return NULL;
  Py_DECREF (res);
  Py_RETURN_FALSE;
}

static PyObject *
resource_get_closed (PyMemresResource *self, void *closure)
{
  return PyBool_FromLong (self->mr == NULL);
}

static void
resource_dealloc (PyMemresResource *self)
{
  if (self->weakrefs != NULL)
    PyObject_ClearWeakRefs ((PyObject *) self);
  if (self->mr != NULL)
    memres_resource_unref (self->mr);
  Py_TYPE (self)->tp_free ((PyObject *) self);
}

static const char *const allocate_names[] = { "size", "stream" };

static PyObject *
resource_allocate (PyMemresResource *self, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames)
{
  PyObject *argv[2] = { NULL, NULL };
  MemresStream stream = NULL;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  size_t size;

  /* the common calls, allocate(size) and allocate(size, stream), without the general parser */
  if (G_LIKELY (kwnames == NULL && nargs == 1))
    argv[0] = args[0];
  else if (kwnames == NULL && nargs == 2)
    {
      argv[0] = args[0];
      if (pymemres_stream_from_object (args[1], &stream) < 0)
        return NULL;
    }
  else if (pymemres_parse_args ("allocate", args, nargs, kwnames, allocate_names, 2, 1, argv) < 0
           || pymemres_stream_from_object (argv[1], &stream) < 0)
    return NULL;
#if PY_VERSION_HEX >= 0x030C0000
  /* an int that fits a machine word, read in place */
  if (G_LIKELY (PyLong_CheckExact (argv[0])
                && PyUnstable_Long_IsCompact ((PyLongObject *) argv[0])))
    {
      Py_ssize_t value = PyUnstable_Long_CompactValue ((PyLongObject *) argv[0]);

      if (value < 0)
        return pymemres_size_overflow ("size", argv[0]);
      size = (size_t) value;
    }
  else
#endif
      if ((size = pymemres_size_from_object ("size", argv[0])) == (size_t) -1 && PyErr_Occurred ())
    return NULL;
  /* without a GIL, a close() on another thread may drop the object's reference, perhaps the
   * stack's last, during the allocation: a reference of the call's own on a free-threaded
   * build; under the GIL, which the allocation keeps, the object's, borrowed */
  if (G_UNLIKELY ((mr = pymemres_resource_hold ((PyObject *) self)) == NULL))
    return NULL;
  buf = memres_resource_allocate (mr, (gsize) size, stream, &error);
  pymemres_resource_release (mr);
  if (buf == NULL)
    return pymemres_raise (error);
  /* its flags are the resource's (memres_resource_get_flags()) */
  return pymemres_buffer_wrap_known (buf, self->close_may_wait, (PyObject *) self);
}

static PyObject *
resource_stats (PyMemresResource *self, PyObject *unused)
{
  MemresStats stats;
  GError *error = NULL;

  MemresResource *mr = pymemres_resource_hold ((PyObject *) self);
  gboolean ok;

  if (mr == NULL)
    return NULL;
  ok = memres_resource_get_stats (mr, &stats, &error);
  pymemres_resource_release (mr);
  if (!ok)
    return pymemres_raise (error);
  return Py_BuildValue (
      "{s:K,s:K,s:K,s:K,s:K}", "reserved_current", (unsigned long long) stats.reserved_current,
      "reserved_high", (unsigned long long) stats.reserved_high, "used_current",
      (unsigned long long) stats.used_current, "used_high", (unsigned long long) stats.used_high,
      "n_buffers", (unsigned long long) stats.n_buffers);
}

static PyObject *
resource_reset_stats (PyMemresResource *self, PyObject *unused)
{
  GError *error = NULL;

  MemresResource *mr = pymemres_resource_hold ((PyObject *) self);
  gboolean ok;

  if (mr == NULL)
    return NULL;
  ok = memres_resource_reset_stats (mr, &error);
  pymemres_resource_release (mr);
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

static PyObject *
resource_trim (PyMemresResource *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "bytes_to_keep", NULL };
  size_t keep = 0;
  PyObject *keep_obj = NULL;
  GError *error = NULL;
  MemresResource *mr;
  gboolean ok;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:trim", keywords, &keep_obj))
    return NULL;
  /* not "K", which takes -1 as 2**64 - 1 (keep everything: nothing trimmed, no error): an int
   * or __index__ (a NumPy integer), memres.OutOfRangeError out of range */
  if (keep_obj != NULL
      && (keep = pymemres_size_from_object ("bytes_to_keep", keep_obj)) == (size_t) -1
      && PyErr_Occurred ())
    return NULL;
  if ((mr = pymemres_resource_ref ((PyObject *) self)) == NULL)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_resource_trim (mr, (gsize) keep, &error);
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  if (!ok)
    return pymemres_raise (error);
  Py_RETURN_NONE;
}

/* @text (transfer full, may be NULL for None) as a Python object: json.loads(text), or the
 * str itself when @as_text. */
static PyObject *
snapshot_object (char *text, int as_text)
{
  PyObject *str, *json, *out;

  if (text == NULL)
    Py_RETURN_NONE;
  str = PyUnicode_DecodeUTF8 (text, (Py_ssize_t) strlen (text), "replace");
  g_free (text);
  if (str == NULL || as_text)
    return str;
  json = PyImport_ImportModule ("json");
  if (json == NULL)
    {
      Py_DECREF (str);
      return NULL;
    }
  out = PyObject_CallMethod (json, "loads", "O", str);
  Py_DECREF (json);
  Py_DECREF (str);
  return out;
}

static PyObject *
resource_snapshot (PyMemresResource *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "as_text", NULL };
  int as_text = 0;
  GError *error = NULL;
  MemresResource *mr;
  char *text;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|p:snapshot", keywords, &as_text)
      || (mr = pymemres_resource_ref ((PyObject *) self)) == NULL)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  text = memres_resource_snapshot (mr, &error);
  memres_resource_unref (mr);
  Py_END_ALLOW_THREADS;
  if (text == NULL)
    return pymemres_raise (error);
  return snapshot_object (text, as_text);
}

static PyObject *
resource_oom_snapshot (PyMemresResource *self, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "as_text", NULL };
  int as_text = 0;

  MemresResource *mr;
  char *text;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|p:oom_snapshot", keywords, &as_text)
      || (mr = pymemres_resource_hold ((PyObject *) self)) == NULL)
    return NULL;
  text = memres_resource_get_oom_snapshot (mr);
  pymemres_resource_release (mr);
  return snapshot_object (text, as_text);
}

static PyObject *
resource_get_upstream (PyMemresResource *self, void *closure)
{
  MemresResource *mr = pymemres_resource_hold ((PyObject *) self), *up;

  if (mr == NULL)
    return NULL;
  up = memres_resource_get_upstream (mr);
  if (up != NULL)
    memres_resource_ref (up);
  pymemres_resource_release (mr);
  if (up == NULL)
    Py_RETURN_NONE;
  return pymemres_resource_wrap (up);
}

static PyObject *
resource_get_spec (PyMemresResource *self, void *closure)
{
  MemresResource *mr = pymemres_resource_hold ((PyObject *) self);
  g_autofree char *spec = NULL;

  if (mr == NULL)
    return NULL;
  spec = memres_resource_to_string (mr);
  pymemres_resource_release (mr);
  return spec != NULL ? PyUnicode_FromString (spec) : NULL;
}

/* What one of the plain getters reads of the resource: @closure in resource_getset */
enum
{
  GET_KIND = 1,
  GET_DEVICE_ID,
  GET_DEVICE_ACCESSIBLE,
  GET_HOST_ACCESSIBLE,
  GET_FLAGS,
  GET_MANAGED,
  GET_IPC_ENABLED,
};

/* kind, device_id, is_device_accessible, is_host_accessible, flags, is_managed and
 * is_ipc_enabled (cuda.core's names): one getter, the resource held for the read
 * (pymemres_resource_hold()) */
static PyObject *
resource_get_plain (PyMemresResource *self, void *closure)
{
  MemresResource *mr = pymemres_resource_hold ((PyObject *) self);
  PyObject *value = NULL;

  if (mr == NULL)
    return NULL;
  switch (GPOINTER_TO_INT (closure))
    {
    case GET_KIND:
      value = PyUnicode_FromString (memres_resource_get_kind_name (mr));
      break;
    case GET_DEVICE_ID:
      value = PyLong_FromLong (memres_resource_get_device (mr));
      break;
    case GET_DEVICE_ACCESSIBLE:
      value = PyBool_FromLong (memres_resource_is_device_accessible (mr));
      break;
    case GET_HOST_ACCESSIBLE:
      value = PyBool_FromLong (memres_resource_is_host_accessible (mr));
      break;
    case GET_FLAGS:
      value = PyLong_FromUnsignedLong (memres_resource_get_flags (mr));
      break;
    case GET_MANAGED:
      value = PyBool_FromLong ((memres_resource_get_flags (mr) & MEMRES_MEMORY_MANAGED) != 0);
      break;
    case GET_IPC_ENABLED:
      value = PyBool_FromLong ((memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED) != 0);
      break;
    default:
      g_assert_not_reached ();
    }
  pymemres_resource_release (mr);
  return value;
}

static PyObject *
resource_repr (PyMemresResource *self)
{
  MemresResource *mr = pymemres_resource_peek ((PyObject *) self);
  g_autofree char *spec = NULL;

  if (mr == NULL)
    return PyUnicode_FromString ("<memres.Resource closed>");
  spec = memres_resource_to_string (mr);
  pymemres_resource_release (mr);
  return PyUnicode_FromFormat ("<memres.Resource %s>", spec);
}

/* Two open Resource objects are equal when they hold the same stack (the address of a stack
 * both hold cannot be another's). A closed one no longer holds its stack, which may be gone and
 * its address taken by a new stack: it equals itself alone (it equalled every later Resource
 * made at that address). hash() stays the address's, closed or not. */
static PyObject *
resource_richcompare (PyObject *a, PyObject *b, int op)
{
  PyMemresResource *x = (PyMemresResource *) a, *y = (PyMemresResource *) b;

  if (!PyObject_TypeCheck (b, &PyMemresResource_Type) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  if (x->mr == NULL || y->mr == NULL)
    Py_RETURN_RICHCOMPARE (a, b, op);
  Py_RETURN_RICHCOMPARE (x->identity, y->identity, op);
}

static Py_hash_t
resource_hash (PyMemresResource *self)
{
  Py_hash_t hash = (Py_hash_t) (self->identity >> 4);

  return hash == -1 ? -2 : hash;
}

/* pickle and copy: TypeError naming what to send instead (the spec) */
static PyObject *
resource_reduce_ex (PyObject *self, PyObject *protocol)
{
  PyErr_SetString (PyExc_TypeError,
                   "cannot pickle or copy 'memres.Resource': it holds memory of this process; "
                   "send its spec and make one there (memres.Resource(mr.spec))");
  return NULL;
}

static PyMethodDef resource_methods[] = {
  { "__reduce_ex__", resource_reduce_ex, METH_O,
    "__reduce_ex__(protocol)\n\nRaises TypeError: a Resource cannot be pickled or copied "
    "(send its spec)." },
  { "allocate", (PyCFunction) (void (*) (void)) resource_allocate, METH_FASTCALL | METH_KEYWORDS,
    "allocate(size, stream=None) -> Buffer\n\n"
    "Allocates size bytes (an int from 0 to 2**64-1, not a bool; a kind may round up:\n"
    "Buffer.size says) ordered on stream (None: the legacy default stream; an int handle, an\n"
    "object with __cuda_stream__, a torch or CuPy stream, one with an int .handle).\n"
    "0 gives an empty Buffer (size 0, handle 0) that is open and closable, counted by\n"
    "stats()['n_buffers'] with 0 bytes but by no layer's counts (no layer allocates it). Raises\n"
    "TypeError for a size that is no int (a float, a bool), OutOfRangeError for one out of\n"
    "that range (an OverflowError, as cuda.core raises, and a ValueError), OutOfMemoryError\n"
    "when there is no memory left, InvalidArgumentError for a size the kind refuses, Error\n"
    "otherwise." },
  { "tag_counts", (PyCFunction) pymemres_resource_tag_counts, METH_O,
    "tag_counts(name) -> dict\n\n"
    "What this counted layer (a stats layer: Resource(\"stats>...\")) counted\n"
    "for the buffers allocated under tag name: bytes_current, bytes_peak, bytes_total,\n"
    "count_current, count_peak, count_total. NotSupportedError (ErrorCode.NOT_SUPPORTED)\n"
    "for a layer that does not count; Error with memres.TagErrorCode.UNKNOWN for a name never "
    "used." },
  { "tags", (PyCFunction) pymemres_resource_tags, METH_NOARGS,
    "tags() -> list of str\n\nThe tags this counted layer counted a buffer of." },
  { "reset_tag_peak", (PyCFunction) pymemres_resource_reset_tag_peak, METH_O,
    "reset_tag_peak(name)\n\nResets that tag's peaks to its current values, and nothing else." },
  { "sleep", (PyCFunction) (void (*) (void)) pymemres_resource_sleep, METH_VARARGS | METH_KEYWORDS,
    "sleep(tag, *, mode=\"discard\", path=None, stream=None, host=None)\n\n"
    "Releases the physical memory under every open buffer of tag allocated here, keeping their\n"
    "addresses (a stack over vmm: Resource(\"cache>vmm\")); mode \"discard\", the default\n"
    "(contents undefined after wake), \"backup\" (page-locked host memory; host names its\n"
    "Resource) or \"file\" (path: a str, bytes or os.PathLike such as pathlib.Path). All or\n"
    "nothing. Error with memres.SleepErrorCode for a sleeping tag, a buffer exported over\n"
    "IPC, a file that cannot be written; NotSupportedError (ErrorCode.NOT_SUPPORTED) for a\n"
    "stack that cannot sleep (docs/sleep.md)." },
  { "wake", (PyCFunction) (void (*) (void)) pymemres_resource_wake, METH_VARARGS | METH_KEYWORDS,
    "wake(tag, *, stream=None)\n\n"
    "Maps memory again under the sleeping buffers of tag, at the same addresses, and restores\n"
    "their contents by the sleep's mode. All or nothing." },
  { "is_asleep", (PyCFunction) pymemres_resource_is_asleep, METH_O,
    "is_asleep(tag) -> bool\n\nWhether tag sleeps on this resource." },
  { "stats", (PyCFunction) resource_stats, METH_NOARGS,
    "stats() -> dict\n\n"
    "The resource's statistics in bytes: reserved_current, reserved_high (held from the\n"
    "driver), used_current, used_high (in live buffers) and n_buffers. Raises\n"
    "NotSupportedError where the stack keeps none (put a stats layer on top)." },
  { "counters", (PyCFunction) pymemres_resource_counters, METH_NOARGS,
    "counters() -> dict\n\n"
    "The kind's own counters beyond stats() (memres_resource_get_counters()), the names and\n"
    "types each kind documents: the cache's hits and misses, the arena's granules_created,\n"
    "granules_remapped and settles, the log adaptor's lines_lost, and contract_breaches on\n"
    "every resource; an adaptor without counters gives its upstream's. Integers are int,\n"
    "strings str, arrays lists (of tuples for records: the cache's classes). Takes the kind's\n"
    "lock, no driver call; releases the GIL." },
  { "reset_stats", (PyCFunction) resource_reset_stats, METH_NOARGS,
    "reset_stats()\n\nSets the high-water marks to the current values." },
  { "trim", (PyCFunction) (void (*) (void)) resource_trim, METH_VARARGS | METH_KEYWORDS,
    "trim(bytes_to_keep=0)\n\n"
    "Gives memory held for reuse back to the driver, keeping at most bytes_to_keep (a pool's\n"
    "cuMemPoolTrimTo, a cache's free blocks). Releases the GIL. NotSupportedError for a\n"
    "stack that keeps nothing to trim (host memory)." },
  { "snapshot", (PyCFunction) (void (*) (void)) resource_snapshot, METH_VARARGS | METH_KEYWORDS,
    "snapshot(as_text=False) -> dict\n\n"
    "What every layer of the stack holds (memres_resource_snapshot(), docs/snapshot.md):\n"
    "per layer its kind, spec, reserved/used/cached bytes, segments, blocks (address, size,\n"
    "stream, tag, state), holes, imports, the largest free block and the fragmentation index;\n"
    "the driver's free and total bytes. The JSON text itself with as_text=True. Releases the\n"
    "GIL." },
  { "oom_snapshot", (PyCFunction) (void (*) (void)) resource_oom_snapshot,
    METH_VARARGS | METH_KEYWORDS,
    "oom_snapshot(as_text=False) -> dict or None\n\n"
    "The snapshot taken when an allocation through this resource last ran out of memory\n"
    "(memres_resource_get_oom_snapshot()), or None when none has." },
  { "close", (PyCFunction) resource_close, METH_NOARGS,
    "close()\n\n"
    "Drops this object's reference to the resource. The stack itself is finalized (what it\n"
    "holds given back to the driver) once nothing else holds it: its open Buffers, and other\n"
    "Resource objects of it (Buffer.memory_resource, upstream) keep it alive, so a buffer\n"
    "stays usable after its resource is closed. Closing a closed Resource does nothing;\n"
    "afterwards closed is True, hash() is unchanged, the object equals itself alone (its\n"
    "stack may be gone, its address another's), and every other call raises\n"
    "ClosedError. Releases the GIL (a finalize may wait for the device)." },
  { "__enter__", (PyCFunction) resource_enter, METH_NOARGS,
    "__enter__() -> Resource\n\nThe resource itself (ClosedError once closed)." },
  { "__exit__", (PyCFunction) (void (*) (void)) resource_exit, METH_FASTCALL,
    "__exit__(exc_type, exc_value, traceback) -> False\n\n"
    "close(); the exception, if any, goes on. TypeError for another number of arguments." },
  { NULL },
};

static PyGetSetDef resource_getset[] = {
  { "upstream", (getter) resource_get_upstream, NULL,
    "The resource below this layer of the stack (a Resource), or None for a base kind." },
  { "spec", (getter) resource_get_spec, NULL,
    "The resource as a spec string, every option written out (memres_resource_to_string):\n"
    "Resource(r.spec) makes the same stack again." },
  { "kind", (getter) resource_get_plain, NULL, "The name of the top layer's kind (\"cache\", ...).",
    GINT_TO_POINTER (GET_KIND) },
  { "device_id", (getter) resource_get_plain, NULL,
    "The device the memory lives on, -1 for host memory.", GINT_TO_POINTER (GET_DEVICE_ID) },
  { "is_device_accessible", (getter) resource_get_plain, NULL,
    "True when device code can access the memory.", GINT_TO_POINTER (GET_DEVICE_ACCESSIBLE) },
  { "is_host_accessible", (getter) resource_get_plain, NULL,
    "True when host code can dereference the memory.", GINT_TO_POINTER (GET_HOST_ACCESSIBLE) },
  { "flags", (getter) resource_get_plain, NULL,
    "The MemresMemoryFlags bits as an int (memres.MemoryFlags).", GINT_TO_POINTER (GET_FLAGS) },
  { "is_managed", (getter) resource_get_plain, NULL,
    "True when the memory is managed (unified) memory (MemoryFlags.MANAGED), as cuda.core's\n"
    "MemoryResource.is_managed.",
    GINT_TO_POINTER (GET_MANAGED) },
  { "is_ipc_enabled", (getter) resource_get_plain, NULL,
    "True when its buffers can be shared with another process (MemoryFlags.IPC_ENABLED:\n"
    "Buffer.export_message()), as cuda.core's DeviceMemoryResource.is_ipc_enabled.",
    GINT_TO_POINTER (GET_IPC_ENABLED) },
  { "closed", (getter) resource_get_closed, NULL, "True once close() was called." },
  { "is_closed", (getter) resource_get_closed, NULL,
    "closed, by cuda.core's name (True once close() was called)." },
  { NULL },
};

PyTypeObject PyMemresResource_Type = {
  PyVarObject_HEAD_INIT (NULL, 0).tp_name = "memres.Resource",
  .tp_basicsize = sizeof (PyMemresResource),
  .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "Resource(spec)\n\n"
            "A memory resource made from a spec: one kind with its options (\"dmr:device=0\"),\n"
            "a stack of layers (\"cache>dmr\", top first), or a named stack (\"@name\", from\n"
            "the config file). The resource lives as long as a Resource or a Buffer of it\n"
            "does. cuda.core's MemoryResource: allocate() gives a Buffer. A with block\n"
            "closes it at its end (close()).\n\n"
            "Raises InvalidArgumentError for a spec that does not parse, a kind or option\n"
            "that does not exist; FileError (an OSError, errno set: ENOENT, EISDIR, ...) for\n"
            "a config file that cannot be read or a log adaptor's path that cannot be\n"
            "opened; Error when the kind cannot start (no driver: NoDeviceError). Releases\n"
            "the GIL while the resource is created.",
  .tp_new = resource_new,
  .tp_dealloc = (destructor) resource_dealloc,
  .tp_repr = (reprfunc) resource_repr,
  .tp_hash = (hashfunc) resource_hash,
  .tp_richcompare = resource_richcompare,
  .tp_weaklistoffset = offsetof (PyMemresResource, weakrefs),
  .tp_methods = resource_methods,
  .tp_getset = resource_getset,
};
