/* memres - CUDA memory resources
 * pymemres.h: what the files of the Python extension module memres._memres share: the two
 * object types (Resource, Buffer), the GError-to-exception mapping (errors.c), the stream
 * arguments (stream.c) and the module state. Written against the CPython C API and memres's
 * public headers only. */
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memres/memres.h>

/* A memres.Resource: one reference to a MemresResource, NULL once close() dropped it (the
 * resource itself lives on while a Buffer of it or another Resource object holds it).
 * @identity: the MemresResource's address, kept after close() for == and hash().
 * @close_may_wait: whether closing its buffers may wait for a stream (pymemres_flags_may_wait()
 * of the resource's flags, which are its buffers' flags), read once at creation for allocate().
 * A call that uses @mr with the GIL released takes a reference of its own first
 * (pymemres_resource_ref()), and on a free-threaded build every call that uses it
 * (pymemres_resource_hold()): a close() on another thread then only drops the object's. */
typedef struct
{
  PyObject_HEAD MemresResource *mr;
  PyObject *weakrefs;
  gboolean close_may_wait;
  guintptr identity;
} PyMemresResource;

/* A memres.Buffer: one reference to a MemresBuffer, kept until the object dies (so that the
 * getters answer 0 after a close, as memres_buffer_get_size() does). @state says who may be in
 * its memory: the buffer-protocol views (memoryview) over it and the calls that use it with the
 * GIL released (copies, fill, read, write, export_message), PYMEMRES_USER each, and whether a
 * close() has begun (PYMEMRES_CLOSING) or succeeded (PYMEMRES_CLOSED). close() refuses while
 * there are users, and a user is refused once a close has begun, in one compare-and-swap on a
 * free-threaded build (a plain load and store under the GIL, which every change holds):
 * pymemres_buffer_use(), pymemres_buffer_begin_close(). @n_views (views alone) only words the
 * error. PYMEMRES_EXPORTED is set in @state once the buffer was exported through DLPack: its
 * tensors hold references of their own on @buf, so close() then drops the object's reference
 * instead of freeing the memory under a consumer (the last tensor's deleter frees it), and @buf
 * becomes pymemres_closed_buffer(); a bit of the state word, so that the close of a buffer never
 * exported tests nothing more. @may_wait is pymemres_close_may_wait() of @buf, read when the
 * object is made (from its Resource's, for allocate()). */
typedef struct
{
  PyObject_HEAD MemresBuffer *buf;
  PyObject *weakrefs;
  gint state;
  gint n_views;
  gboolean may_wait;
  /* the Resource object that allocated it (a strong reference until the buffer is closed), or
   * NULL (memres.from_dlpack(), import_message()): Buffer.memory_resource, the same object as
   * cuda.core's Buffer gives, closed or not */
  PyObject *resource;
  /* hash(), computed at its first call and kept (0: not yet): cuda.core's, of the address and
   * size, while the buffer is open; the object's own once it is closed (a Py_hash_t in a
   * pointer, for GLib's atomic operations) */
  gpointer hash;
} PyMemresBuffer;

#define PYMEMRES_CLOSING  1
#define PYMEMRES_CLOSED   2
#define PYMEMRES_EXPORTED 4
#define PYMEMRES_USER     8

/* Atomic on a free-threaded build (or with -DPYMEMRES_ATOMIC_STATE, as the threads test's own
 * build of the module does); under the GIL the plain operations are atomic already. */
#if defined(Py_GIL_DISABLED) && !defined(PYMEMRES_ATOMIC_STATE)
#define PYMEMRES_ATOMIC_STATE 1
#endif
#ifdef PYMEMRES_ATOMIC_STATE
#define PYMEMRES_STATE_GET(p)       g_atomic_int_get (p)
#define PYMEMRES_STATE_SET(p, v)    g_atomic_int_set (p, v)
#define PYMEMRES_STATE_ADD(p, v)    g_atomic_int_add (p, v)
#define PYMEMRES_STATE_CAS(p, o, n) g_atomic_int_compare_and_exchange (p, o, n)
#else
#define PYMEMRES_STATE_GET(p)       (*(p))
#define PYMEMRES_STATE_SET(p, v)    (*(p) = (v))
#define PYMEMRES_STATE_ADD(p, v)    (*(p) += (v))
#define PYMEMRES_STATE_CAS(p, o, n) (*(p) == (o) ? (*(p) = (n), TRUE) : FALSE)
#endif

/* The object's critical section on a free-threaded CPython (3.13+), around what reads or
 * clears a Resource object's @mr together with taking or dropping its reference; nothing under
 * the GIL, which every such change holds. */
#ifdef Py_GIL_DISABLED
#define PYMEMRES_BEGIN_CRITICAL_SECTION(obj) Py_BEGIN_CRITICAL_SECTION (obj)
#define PYMEMRES_END_CRITICAL_SECTION()      Py_END_CRITICAL_SECTION ()
#else
#define PYMEMRES_BEGIN_CRITICAL_SECTION(obj) {
#define PYMEMRES_END_CRITICAL_SECTION()      }
#endif

/* Counts a user of @self's memory (a view when @view) until pymemres_buffer_unuse(); 0, or -1
 * with ClosedError once a close() has begun. */
int pymemres_buffer_use (PyMemresBuffer *self, gboolean view);
static inline void
pymemres_buffer_unuse (PyMemresBuffer *self, gboolean view)
{
  if (view)
    PYMEMRES_STATE_ADD (&self->n_views, -1);
  PYMEMRES_STATE_ADD (&self->state, -PYMEMRES_USER);
}

extern PyTypeObject PyMemresResource_Type;
extern PyTypeObject PyMemresBuffer_Type;

/* errors.c */
int pymemres_errors_init (PyObject *module);
PyObject *pymemres_raise (GError *error);
PyObject *pymemres_raise_closed (void);
/* memres.OutOfRangeError (an InvalidArgumentError and an OverflowError, code
 * MEMRES_ERROR_INVALID_ARGUMENT) with the printf-formatted message, for an int argument out of
 * its range; returns NULL. */
PyObject *pymemres_raise_range (const char *format, ...) G_GNUC_PRINTF (1, 2);

/* stream.c: @obj as a stream (None, an int, __cuda_stream__, torch's .cuda_stream, CuPy's
 * .ptr); -1 with an exception set. The int converted last is kept with its handle (under the
 * GIL), so that a loop passing one handle converts it once. */
int pymemres_stream_init (void);
int pymemres_stream_from_object_slow (PyObject *obj, MemresStream *stream);
#ifndef Py_GIL_DISABLED
extern PyObject *pymemres_last_stream_int;
extern MemresStream pymemres_last_stream;
#endif
static inline int
pymemres_stream_from_object (PyObject *obj, MemresStream *stream)
{
  if (obj == NULL || obj == Py_None)
    {
      *stream = NULL;
      return 0;
    }
#ifndef Py_GIL_DISABLED
  if (obj == pymemres_last_stream_int)
    {
      *stream = pymemres_last_stream;
      return 0;
    }
#endif
  return pymemres_stream_from_object_slow (obj, stream);
}

/* resource.c, buffer.c */
PyObject *pymemres_resource_wrap (MemresResource *mr);
/* The resource of an open Resource object (borrowed; the caller holds the GIL and does not
 * release it while using it), or NULL with ClosedError set once the object was closed. */
MemresResource *pymemres_resource_get (PyObject *self);
/* The same with a reference of the caller's (memres_resource_unref() it), for a call that
 * releases the GIL. */
MemresResource *pymemres_resource_ref (PyObject *self);
/* The resource of an open Resource object for a call that keeps the GIL (stats(), the getters,
 * repr(), the tag methods): pymemres_resource_hold() gives it, or NULL with ClosedError set,
 * pymemres_resource_peek() the same without the error (NULL: closed), and
 * pymemres_resource_release() ends the use (a non-NULL result only). Under the GIL, no close()
 * runs meanwhile: a plain read of the object's, borrowed, and no release (the code is what
 * pymemres_resource_get() gives). Where the state word is atomic (PYMEMRES_ATOMIC_STATE:
 * free-threaded builds), a close() on another thread may drop the object's reference, perhaps
 * the stack's last, during the call: a reference of the caller's, taken in the object's
 * critical section (pymemres_resource_ref()), dropped by the release. */
#ifdef PYMEMRES_ATOMIC_STATE
MemresResource *pymemres_resource_take (PyObject *self);
#define pymemres_resource_hold(self)  pymemres_resource_ref (self)
#define pymemres_resource_peek(self)  pymemres_resource_take (self)
#define pymemres_resource_release(mr) memres_resource_unref (mr)
#else
#define pymemres_resource_hold(self)  pymemres_resource_get (self)
#define pymemres_resource_peek(self)  (((PyMemresResource *) (self))->mr)
#define pymemres_resource_release(mr) ((void) (mr))
#endif
PyObject *pymemres_buffer_wrap (MemresBuffer *buf);
/* A new Buffer object's fields: @buf (the object's reference), its may_wait, its Resource object
 * (a new reference; NULL: none) */
static inline void
pymemres_buffer_init (PyMemresBuffer *self, MemresBuffer *buf, gboolean may_wait,
                      PyObject *resource)
{
  self->buf = buf;
  self->weakrefs = NULL;
  self->state = 0;
  self->n_views = 0;
  self->may_wait = may_wait;
  self->resource = Py_XNewRef (resource);
  self->hash = NULL;
}
/* pymemres_buffer_wrap() of a buffer whose pymemres_close_may_wait() is @may_wait */
PyObject *pymemres_buffer_wrap_known (MemresBuffer *buf, gboolean may_wait, PyObject *resource);
/* Marks @self exported through DLPack (PYMEMRES_EXPORTED). */
void pymemres_buffer_mark_exported (PyMemresBuffer *self);
/* A closed buffer of 0 bytes, made once, that the Buffer objects whose close() gave their
 * memory to its DLPack consumers hold instead (so that their getters answer as a closed
 * buffer's); a new reference, or NULL with MemoryError (the first call failed). */
MemresBuffer *pymemres_closed_buffer (void);
/* Buffer.close(stream): None, or NULL with BufferError (users, a close on another thread) or
 * the close's error */
PyObject *pymemres_buffer_close_on (PyMemresBuffer *self, MemresStream stream);
/* Buffer.set_deallocation_stream(stream): the stream recorded on the buffer (*@stream); a new
 * reference to the stream object given, NULL with an exception set */
PyObject *pymemres_buffer_set_deallocation_stream (PyMemresBuffer *self, PyObject *const *args,
                                                   Py_ssize_t nargs, PyObject *kwnames,
                                                   MemresStream *stream);

/* buffer-transfer.c: Buffer.copy_to, copy_from, fill, read and write (the GIL released during
 * each transfer); the entries buffer.c's method table takes */
PyObject *pymemres_buffer_copy_to (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames);
PyObject *pymemres_buffer_copy_from (PyMemresBuffer *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames);
PyObject *pymemres_buffer_fill (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_buffer_read (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_buffer_write (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
#define PYMEMRES_BUFFER_TRANSFER_METHODS                                                           \
  { "copy_to", (PyCFunction) (void (*) (void)) pymemres_buffer_copy_to,                            \
    METH_FASTCALL | METH_KEYWORDS,                                                                 \
    "copy_to(dst=None, stream=None) -> Buffer\n\n"                                                 \
    "Copies all of this buffer into the Buffer dst, of the same size, ordered on stream\n"         \
    "(None: the legacy default stream), and returns dst. Without dst (cuda.core's rule), a\n"      \
    "new Buffer of this size is allocated first, on stream, from this buffer's\n"                  \
    "memory_resource (ValueError for a buffer without one). Between host-only buffers it is\n"     \
    "a memcpy done before returning; otherwise cuMemcpyAsync on stream. Releases the GIL.\n"       \
    "Raises InvalidArgumentError for sizes that differ, ClosedError for a closed buffer." },       \
      { "copy_from", (PyCFunction) (void (*) (void)) pymemres_buffer_copy_from,                    \
        METH_FASTCALL | METH_KEYWORDS,                                                             \
        "copy_from(src, stream=None)\n\nCopies the Buffer src into this one: src.copy_to(self, "   \
        "stream)." },                                                                              \
      { "fill", (PyCFunction) (void (*) (void)) pymemres_buffer_fill,                              \
        METH_VARARGS | METH_KEYWORDS,                                                              \
        "fill(value, width=1, stream=None)\n\n"                                                    \
        "Fills the buffer with value repeated, width bytes each (1, 2 or 4; the size must be a\n"  \
        "multiple of width), ordered on stream. value may also be a bytes-like pattern of 1, 2\n"  \
        "or 4 bytes, repeated as it is (cuda.core's fill(b\"\\x01\\x02\")): its length is the "    \
        "width.\n"                                                                                 \
        "Releases the GIL. Raises OutOfRangeError (an OverflowError, as cuda.core's fill(256)\n"   \
        "raises, and a ValueError) for an int that does not fit width bytes;\n"                    \
        "InvalidArgumentError for a bad width, a size that is not a multiple of it, or a\n"        \
        "pattern of another length; TypeError for a value that is neither (a bool is no\n"         \
        "int here)." },                                                                            \
      { "read", (PyCFunction) (void (*) (void)) pymemres_buffer_read,                              \
        METH_VARARGS | METH_KEYWORDS,                                                              \
        "read(offset=0, size=None, stream=None) -> bytes\n\n"                                      \
        "Copies size bytes (None: to the end) from offset into a new bytes object, waiting for\n"  \
        "stream. Releases the GIL. Raises InvalidArgumentError for a range past the end,\n"        \
        "OutOfRangeError for a negative offset or size." },                                        \
  {                                                                                                \
    "write", (PyCFunction) (void (*) (void)) pymemres_buffer_write, METH_VARARGS | METH_KEYWORDS,  \
        "write(data, offset=0, stream=None)\n\n"                                                   \
        "Copies the bytes-like data into the buffer at offset, waiting for stream. Releases the\n" \
        "GIL. Raises InvalidArgumentError for data that does not fit past offset,\n"               \
        "OutOfRangeError for a negative offset."                                                   \
  }

/* buffer-context.c: Buffer.__enter__ and __exit__, put in the type's dictionary once it is
 * ready */
int pymemres_buffer_context_init (void);
/* TRUE when closing @buf may wait for a stream (device-accessible memory that is not
 * stream-ordered: the core synchronizes before the free): the GIL is released then. */
static inline gboolean
pymemres_flags_may_wait (MemresMemoryFlags flags)
{
  return (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0
         && (flags & MEMRES_MEMORY_STREAM_ORDERED) == 0;
}
static inline gboolean
pymemres_close_may_wait (MemresBuffer *buf)
{
  return pymemres_flags_may_wait (memres_buffer_get_flags (buf));
}

/* buffer-interop.c: __dlpack__, __dlpack_device__, __cuda_array_interface__, the buffer
 * protocol and memres.from_dlpack(); the entries buffer.c's tables take */
PyObject *pymemres_buffer_dlpack (PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);
PyObject *pymemres_buffer_dlpack_device (PyObject *self, PyObject *unused);
PyObject *pymemres_buffer_get_cai (PyObject *self, void *closure);
extern PyBufferProcs pymemres_buffer_as_buffer;
#define PYMEMRES_BUFFER_INTEROP_METHODS                                                            \
  { "__dlpack__", (PyCFunction) (void (*) (void)) pymemres_buffer_dlpack,                          \
    METH_FASTCALL | METH_KEYWORDS,                                                                 \
    "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\n"       \
    "The buffer as a DLPack tensor: a 1-D uint8 array of its size. With max_version (1, x)\n"      \
    "or later, a versioned capsule (\"dltensor_versioned\", DLPack 1.0); without it, the\n"        \
    "legacy capsule (\"dltensor\") that consumers of DLPack 0.x take. stream: the consumer's\n"    \
    "stream (an int or None, not a bool: TypeError; -1: no ordering asked); a tensor on the\n"     \
    "CPU (host memory, or dl_device=(1, 0)) takes None alone (the array API's rule;\n"             \
    "BufferError otherwise). copy: a bool or None (TypeError otherwise). Unless stream is\n"       \
    "-1, device-accessible memory\n"                                                               \
    "(device, pinned, managed) is synchronized on the buffer's stream first (the GIL\n"            \
    "released; a close() on another thread meanwhile raises BufferError). dl_device: the\n"        \
    "buffer's own device gives the buffer; (1, 0) of memory on another device, or\n"               \
    "copy=True, a copy in host memory of its own (flagged IS_COPIED), read after the work on\n"    \
    "the buffer's stream (the array API's rule; cuda.core refuses both). Raises BufferError\n"     \
    "for another dl_device, for copy=False where that copy is needed, and for a max_version\n"     \
    "that is not None or a (major, minor) tuple of ints (cuda.core's rule)." },                    \
  {                                                                                                \
    "__dlpack_device__", pymemres_buffer_dlpack_device, METH_NOARGS,                               \
        "__dlpack_device__() -> (device_type, device_id)\n\n"                                      \
        "The DLPack device: (1, 0) host memory, (2, N) device N, (3, 0) page-locked, (13, N)\n"    \
        "managed."                                                                                 \
  }
#define PYMEMRES_BUFFER_INTEROP_GETSET                                                             \
  {                                                                                                \
    "__cuda_array_interface__", pymemres_buffer_get_cai, NULL,                                     \
        "The CUDA array interface, version 3, of device-accessible memory: a dict with shape\n"    \
        "(size,), typestr '|u1', data (handle, False), strides None, version 3 and stream (the\n"  \
        "buffer's stream; 1 for the legacy default stream). AttributeError for host memory."       \
  }
PyObject *pymemres_from_dlpack (PyObject *module, PyObject *obj);

/* buffer-managed.c: the calls of managed memory (cuda.core's ManagedBuffer); the entries
 * buffer.c's tables take */
PyObject *pymemres_buffer_prefetch (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_buffer_discard (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_buffer_discard_prefetch (PyMemresBuffer *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_buffer_add_accessed_by (PyMemresBuffer *self, PyObject *location);
PyObject *pymemres_buffer_remove_accessed_by (PyMemresBuffer *self, PyObject *location);
PyObject *pymemres_buffer_get_read_mostly (PyMemresBuffer *self, void *closure);
int pymemres_buffer_set_read_mostly (PyMemresBuffer *self, PyObject *value, void *closure);
PyObject *pymemres_buffer_get_location (PyMemresBuffer *self, void *closure);
int pymemres_buffer_set_preferred_location (PyMemresBuffer *self, PyObject *value, void *closure);
PyObject *pymemres_buffer_get_accessed_by (PyMemresBuffer *self, void *closure);
/* the closures of pymemres_buffer_get_location (buffer-managed.c's ManagedCall values) */
#define PYMEMRES_GET_PREFERRED     8
#define PYMEMRES_GET_LAST_PREFETCH 9
#define PYMEMRES_LOCATION_DOC                                                                      \
  "A location is a device ordinal (an int of 0 or more), -1 or \"host\" (host memory),\n"          \
  "\"host_numa_current\", or cuda.core's (type, id) tuple: (\"device\", N), (\"host\", None),\n"   \
  "(\"host_numa\", N), (\"host_numa_current\", None)."
#define PYMEMRES_BUFFER_MANAGED_METHODS                                                            \
  { "prefetch", (PyCFunction) (void (*) (void)) pymemres_buffer_prefetch,                          \
    METH_VARARGS | METH_KEYWORDS,                                                                  \
    "prefetch(location, stream=None)\n\n"                                                          \
    "Migrates the managed memory to location, ordered on stream (cuMemPrefetchAsync; "             \
    "cuda.core's\n"                                                                                \
    "ManagedBuffer.prefetch).\n" PYMEMRES_LOCATION_DOC "\n"                                        \
    "Raises InvalidArgumentError for memory that is not managed or a bad location,\n"              \
    "NoDeviceError for a device that does not exist. Releases the GIL." },                         \
      { "discard", (PyCFunction) (void (*) (void)) pymemres_buffer_discard,                        \
        METH_VARARGS | METH_KEYWORDS,                                                              \
        "discard(stream=None)\n\n"                                                                 \
        "Tells the driver the contents are not needed any more, ordered on stream (cuda.core's\n"  \
        "ManagedBuffer.discard): they are undefined afterwards. NotSupportedError where the\n"     \
        "driver cannot (before CUDA 13). Releases the GIL." },                                     \
      { "discard_prefetch", (PyCFunction) (void (*) (void)) pymemres_buffer_discard_prefetch,      \
        METH_VARARGS | METH_KEYWORDS,                                                              \
        "discard_prefetch(location, stream=None)\n\n"                                              \
        "discard() and prefetch() to location in one, ordered on stream (cuda.core's\n"            \
        "ManagedBuffer.discard_prefetch)." },                                                      \
      { "add_accessed_by", (PyCFunction) pymemres_buffer_add_accessed_by, METH_O,                  \
        "add_accessed_by(location)\n\n"                                                            \
        "Advises that location (a device, or the host) accesses the managed memory: the driver\n"  \
        "keeps it mapped there (cuMemAdvise SET_ACCESSED_BY; cuda.core's accessed_by.add)." },     \
  {                                                                                                \
    "remove_accessed_by", (PyCFunction) pymemres_buffer_remove_accessed_by, METH_O,                \
        "remove_accessed_by(location)\n\n"                                                         \
        "Withdraws add_accessed_by(location) (cuMemAdvise UNSET_ACCESSED_BY)."                     \
  }
#define PYMEMRES_BUFFER_MANAGED_GETSET                                                             \
  { "read_mostly", (getter) pymemres_buffer_get_read_mostly,                                       \
    (setter) pymemres_buffer_set_read_mostly,                                                      \
    "Whether the managed memory is advised to be mostly read (cuMemAdvise READ_MOSTLY), read\n"    \
    "from the driver; settable (cuda.core's ManagedBuffer.read_mostly). InvalidArgumentError\n"    \
    "for memory that is not managed." },                                                           \
      { "preferred_location", (getter) pymemres_buffer_get_location,                               \
        (setter) pymemres_buffer_set_preferred_location,                                           \
        "Where the managed memory is advised to live: None (no preference) or a (type, id)\n"      \
        "tuple, read from the driver; settable to a location or None (cuda.core's\n"               \
        "ManagedBuffer.preferred_location).\n" PYMEMRES_LOCATION_DOC,                              \
        GINT_TO_POINTER (PYMEMRES_GET_PREFERRED) },                                                \
      { "last_prefetch_location", (getter) pymemres_buffer_get_location, NULL,                     \
        "Where the managed memory was last prefetched to: None (never) or a (type, id) tuple.",    \
        GINT_TO_POINTER (PYMEMRES_GET_LAST_PREFETCH) },                                            \
  {                                                                                                \
    "accessed_by", (getter) pymemres_buffer_get_accessed_by, NULL,                                 \
        "The locations the managed memory is advised to be accessed by (add_accessed_by()), a\n"   \
        "tuple of (type, id) tuples: the devices in order, then the host."                         \
  }

/* buffer-handle.c: Buffer.from_handle(), memory memres did not allocate, as a Buffer of the
 * subtype memres.ForeignBuffer (its close() hands the close's stream to the mr) */
extern PyTypeObject PyMemresForeignBuffer_Type;
int pymemres_foreign_buffer_init (void);
PyObject *pymemres_buffer_from_handle (PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames);

/* ipc.c: Buffer.export_message() and memres.import_message() */
PyObject *pymemres_buffer_export_message (PyObject *self, PyObject *unused);
PyObject *pymemres_import_message (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames);

/* Keyword parsing for the METH_FASTCALL | METH_KEYWORDS methods: @names are the parameter names
 * in order, @out receives borrowed references (NULL for a parameter not given); @n_required
 * must be given. -1 with TypeError. */
int pymemres_parse_args (const char *function, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, const char *const *names, Py_ssize_t n_names,
                         Py_ssize_t n_required, PyObject **out);
/* A size argument @name (an int, or an object with __index__) as cuda.core's size_t takes it:
 * (size_t) -1 with OverflowError for a negative one or one past 2**64-1 (cuda.core's
 * allocate(-1) raises OverflowError), TypeError for another type. */
size_t pymemres_size_from_object (const char *name, PyObject *value);
/* @value's __index__ (a new reference: an int, or an object with __index__), NULL with TypeError
 * for another type; a bool, an int to Python but no size, offset, address, byte value or width
 * (allocate(True) made 1 byte, fill(True) filled with 0x01), NULL with TypeError @format
 * formatted with @arg. */
PyObject *pymemres_index_not_bool (PyObject *value, const char *format, const char *arg);
/* An int argument (an int or __index__) in *@out: 0; -1 with TypeError (no int) or the
 * conversion's error; 1 below G_MININT, 2 past G_MAXINT (no exception set: the caller names the
 * range). */
int pymemres_gint_from_object (PyObject *value, gint *out);
/* A device argument (an int or __index__) in *@device: 0, or -1 with TypeError or
 * memres.OutOfRangeError past a C int's range (memres itself checks the ordinal). */
int pymemres_device_from_object (PyObject *value, gint *device);
/* The OverflowError of a size argument @name out of range; returns NULL. */
PyObject *pymemres_size_overflow (const char *name, PyObject *value);

/* tags.c: tags (memres-tags.h) */
/* @obj: a str, or None when @none_ok: the name in *@name (UTF-8, owned by @obj); -1 with
 * TypeError for another type, memres.InvalidArgumentError (MEMRES_TAG_ERROR_INVALID) for a str
 * with a NUL character */
int pymemres_tag_name (PyObject *obj, gboolean none_ok, const char **name);
PyObject *pymemres_tag_push (PyObject *module, PyObject *arg);
PyObject *pymemres_tag_pop (PyObject *module, PyObject *arg);
PyObject *pymemres_tag_current (PyObject *module, PyObject *unused);
PyObject *pymemres_tag_list (PyObject *module, PyObject *unused);
PyObject *pymemres_tag_set_stream_default (PyObject *module, PyObject *args);
PyObject *pymemres_tag_set_device_default (PyObject *module, PyObject *args);
PyObject *pymemres_buffer_get_tag (PyMemresBuffer *self, void *closure);
PyObject *pymemres_resource_tag_counts (PyMemresResource *self, PyObject *arg);
PyObject *pymemres_resource_tags (PyMemresResource *self, PyObject *unused);
PyObject *pymemres_resource_reset_tag_peak (PyMemresResource *self, PyObject *arg);
/* counters.c: Resource.counters(), the kind's own counters as a dict */
PyObject *pymemres_resource_counters (PyMemresResource *self, PyObject *unused);
/* sleep.c */
PyObject *pymemres_resource_sleep (PyMemresResource *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_resource_wake (PyMemresResource *self, PyObject *args, PyObject *kwargs);
PyObject *pymemres_resource_is_asleep (PyMemresResource *self, PyObject *arg);
