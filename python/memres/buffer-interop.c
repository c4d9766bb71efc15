/* memres - CUDA memory resources
 * buffer-interop.c: a Buffer seen by other Python libraries: DLPack (__dlpack__ and
 * __dlpack_device__, versioned capsules and the legacy one, a 1-D uint8 tensor), the CUDA array
 * interface version 3, the buffer protocol for host memory; and memres.from_dlpack(), another
 * library's DLPack 1.x tensor wrapped as a Buffer. The tensors themselves are libmemres's
 * (memres-dlpack.h); only the capsules and the protocols' rules are here. */
#include "pymemres.h"

#include <memres/memres-plugin.h> /* memres_cuda_stream_synchronize() */

#include <string.h>

#define CAPSULE_VERSIONED      "dltensor_versioned"
#define CAPSULE_VERSIONED_USED "used_dltensor_versioned"
#define CAPSULE_LEGACY         "dltensor"

static const MemresDLDataType dl_uint8 = { MEMRES_DL_UINT, 8, 1 };

/* A capsule nobody consumed (its name unchanged) still owns its tensor. */
static void
capsule_versioned_destructor (PyObject *capsule)
{
  MemresDLManagedTensorVersioned *tensor;

  if (!PyCapsule_IsValid (capsule, CAPSULE_VERSIONED))
    return;
  tensor = PyCapsule_GetPointer (capsule, CAPSULE_VERSIONED);
  if (tensor != NULL && tensor->deleter != NULL)
    tensor->deleter (tensor);
}

static void
capsule_legacy_destructor (PyObject *capsule)
{
  MemresDLManagedTensor *tensor;

  if (!PyCapsule_IsValid (capsule, CAPSULE_LEGACY))
    return;
  tensor = PyCapsule_GetPointer (capsule, CAPSULE_LEGACY);
  if (tensor != NULL && tensor->deleter != NULL)
    tensor->deleter (tensor);
}

/* The major version of a max_version argument: a (major, minor) tuple of ints, or -1 for None.
 * Anything else is BufferError, as cuda.core's Buffer raises for a malformed max_version (a
 * consumer that asked for a version it cannot name; TypeError stays for what the protocol
 * calls it: a keyword the producer does not take). */
static int
max_major_of (PyObject *max_version, long *major)
{
  int overflow = 0;

  *major = -1;
  if (max_version == NULL || max_version == Py_None)
    return 0;
  if (!PyTuple_Check (max_version) || PyTuple_GET_SIZE (max_version) != 2
      || !PyLong_Check (PyTuple_GET_ITEM (max_version, 0))
      || !PyLong_Check (PyTuple_GET_ITEM (max_version, 1)))
    {
      PyErr_Format (PyExc_BufferError,
                    "max_version must be None or a (major, minor) tuple of ints, not %R",
                    max_version);
      return -1;
    }
  *major = PyLong_AsLongAndOverflow (PyTuple_GET_ITEM (max_version, 0), &overflow);
  if (*major == -1 && PyErr_Occurred ())
    return -1;
  /* a major past a long's range asks for a version later than any: the newest memres has */
  if (overflow != 0)
    *major = overflow > 0 ? G_MAXLONG : -1;
  return 0;
}

/* The consumer's stream argument, read before anything is done: None (the legacy default
 * stream) or an int (not a bool: True was taken as stream 1); -1 asks for no ordering. *@given:
 * not None; *@no_order: -1. -1 with TypeError or ValueError. */
static int
consumer_stream_arg (PyObject *stream_obj, gboolean *given, gboolean *no_order)
{
  long value;

  *given = stream_obj != NULL && stream_obj != Py_None;
  *no_order = FALSE;
  if (!*given)
    return 0;
  if (!PyLong_Check (stream_obj) || PyBool_Check (stream_obj))
    {
      PyErr_SetString (PyExc_TypeError, PyBool_Check (stream_obj)
                                            ? "stream must be an int or None, not a bool"
                                            : "stream must be an int or None");
      return -1;
    }
  value = PyLong_AsLong (stream_obj);
  if (value == -1 && PyErr_Occurred ())
    {
      PyErr_Clear ();
      /* a stream handle above LONG_MAX, up to 2**64 - 1 */
      if (PyLong_AsUnsignedLongLong (stream_obj) == (unsigned long long) -1 && PyErr_Occurred ())
        value = -2;
      else
        value = 3;
    }
  if (value < -1)
    {
      PyErr_Clear ();
      PyErr_SetString (PyExc_ValueError,
                       "stream must be -1 (no ordering), 1, 2 or a stream handle below 2**64");
      return -1;
    }
  if (value == 0)
    {
      PyErr_SetString (PyExc_ValueError, "stream 0 is ambiguous in DLPack: give 1 or 2");
      return -1;
    }
  *no_order = value == -1;
  return 0;
}

/* Orders the consumer after the buffer's work: device-accessible memory (device, pinned,
 * managed) is synchronized on the buffer's deallocation stream unless the consumer gave -1
 * (@no_order), so that the consumer's work on any stream comes after the buffer's, and a
 * consumer on the CPU (NumPy takes pinned and managed memory as it is, stream=None: the DLPack
 * spec has the producer make kDLCPU and kDLCUDAHost data ready) reads the bytes that work
 * wrote. */
static int
order_for_consumer (MemresBuffer *buf, gboolean no_order)
{
  GError *error = NULL;
  MemresStream stream;
  gboolean ok;

  if (no_order || !memres_buffer_is_device_accessible (buf))
    return 0;
  stream = memres_buffer_get_deallocation_stream (buf);
  Py_BEGIN_ALLOW_THREADS;
  ok = memres_cuda_stream_synchronize (memres_buffer_get_device (buf), stream, &error);
  Py_END_ALLOW_THREADS;
  if (!ok)
    {
      pymemres_raise (error);
      return -1;
    }
  return 0;
}

static const char *const dlpack_names[] = { "stream", "max_version", "dl_device", "copy" };

/* @buf's capsule for a consumer of DLPack major version @major (-1: none given, the legacy
 * capsule); @copied: the tensor's memory is a copy made for it (DLPack 1.x's IS_COPIED flag);
 * @as_cpu: the tensor's device is (kDLCPU, 0) whatever memory it is (host-accessible memory a
 * consumer asked for on the CPU: pinned, managed). */
static PyObject *
capsule_of (MemresBuffer *buf, long major, gboolean copied, gboolean as_cpu)
{
  const MemresDLDevice cpu = { MEMRES_DL_CPU, 0 };
  GError *error = NULL;
  gint64 shape[1] = { (gint64) memres_buffer_get_size (buf) };
  PyObject *capsule;

  if (major >= 1)
    {
      MemresDLManagedTensorVersioned *tensor
          = memres_buffer_export_dlpack (buf, dl_uint8, 1, shape, NULL, 0, &error);

      if (tensor == NULL)
        return pymemres_raise (error);
      if (copied)
        tensor->flags |= MEMRES_DLPACK_FLAG_IS_COPIED;
      if (as_cpu)
        tensor->dl_tensor.device = cpu;
      capsule = PyCapsule_New (tensor, CAPSULE_VERSIONED, capsule_versioned_destructor);
      if (capsule == NULL)
        tensor->deleter (tensor);
    }
  else
    {
      MemresDLManagedTensor *tensor
          = memres_buffer_export_dlpack_unversioned (buf, dl_uint8, 1, shape, NULL, 0, &error);

      if (tensor == NULL)
        return pymemres_raise (error);
      if (as_cpu)
        tensor->dl_tensor.device = cpu;
      capsule = PyCapsule_New (tensor, CAPSULE_LEGACY, capsule_legacy_destructor);
      if (capsule == NULL)
        tensor->deleter (tensor);
    }
  return capsule;
}

/* dl_device=(kDLCPU, 0) (or copy=True) asked of @self: a capsule of a copy of its bytes in host
 * memory of its own (a `host` buffer the tensor holds), read after the work ordered on the
 * buffer's stream (memres_buffer_read() returns when the bytes are there), as the array API asks
 * of a producer (DLPack's IS_COPIED flag set on a versioned capsule). */
static PyObject *
host_copy_capsule (PyMemresBuffer *self, long major)
{
  MemresBuffer *buf = self->buf;
  gsize size = memres_buffer_get_size (buf);
  GError *error = NULL;
  MemresResource *host;
  MemresBuffer *copy;
  PyObject *capsule;
  gboolean ok = TRUE;

  host = memres_resource_new ("host", &error);
  if (host == NULL)
    return pymemres_raise (error);
  copy = memres_resource_allocate (host, size, NULL, &error);
  memres_resource_unref (host);
  if (copy == NULL)
    return pymemres_raise (error);
  if (pymemres_buffer_use (self, FALSE) < 0)
    {
      memres_buffer_unref (copy);
      return NULL;
    }
  Py_BEGIN_ALLOW_THREADS;
  if (size > 0)
    ok = memres_buffer_read (buf, 0, memres_buffer_get_pointer (copy), size,
                             memres_buffer_get_deallocation_stream (buf), &error);
  Py_END_ALLOW_THREADS;
  pymemres_buffer_unuse (self, FALSE);
  capsule = ok ? capsule_of (copy, major, TRUE, FALSE) : pymemres_raise (error);
  /* the tensor holds the copy: its deleter's unref closes it */
  memres_buffer_unref (copy);
  return capsule;
}

/* Whether the dl_device asked for is (kDLCPU, 0): 1, 0 or -1 with an exception. */
static int
is_cpu (PyObject *dl_device)
{
  PyObject *cpu = Py_BuildValue ("(ii)", MEMRES_DL_CPU, 0);
  int same = cpu != NULL ? PyObject_RichCompareBool (cpu, dl_device, Py_EQ) : -1;

  Py_XDECREF (cpu);
  return same;
}

/* __dlpack__ once its arguments are read (@argv: stream, max_version, dl_device, copy), with
 * @self counted as a user (the caller's), so that a close() on another thread while this one
 * waits for the buffer's stream without the GIL is refused: it freed the buffer (the object's
 * reference of an exported one) under the export. */
static PyObject *
dlpack_in_use (PyObject *self, PyObject *const *argv, long major, int copy, gboolean no_order)
{
  MemresBuffer *buf = ((PyMemresBuffer *) self)->buf;
  gboolean as_cpu = FALSE;
  PyObject *capsule;

  if (copy != -1 || (argv[2] != NULL && argv[2] != Py_None))
    {
      PyObject *mine = pymemres_buffer_dlpack_device (self, NULL);
      PyObject *wanted = argv[2] != NULL && argv[2] != Py_None ? argv[2] : mine;
      int same = mine != NULL ? PyObject_RichCompareBool (mine, wanted, Py_EQ) : -1;
      int cpu = same >= 0 ? is_cpu (wanted) : -1;

      Py_XDECREF (mine);
      if (cpu < 0)
        return NULL;
      /* the array API: a device the producer cannot give, BufferError; one it gives only by a
       * copy that copy=False forbids, BufferError too; copy=True, always a copy. memres copies
       * to host memory (kDLCPU) alone. */
      if (!cpu && (!same || copy == 1))
        {
          PyErr_SetString (PyExc_BufferError,
                           same ? "memres copies only to host memory: copy=True needs "
                                  "dl_device=(1, 0) for a buffer of another device"
                                : "the buffer is not on the dl_device asked for, and memres "
                                  "copies only to host memory (dl_device=(1, 0))");
          return NULL;
        }
      /* memory the CPU reaches (pinned, managed) is on the CPU already: no copy needed */
      as_cpu = !same && copy != 1 && memres_buffer_is_host_accessible (buf);
      if (!same && !as_cpu && copy == 0)
        {
          PyErr_SetString (PyExc_BufferError,
                           "the buffer is not in host memory (dl_device=(1, 0)): that takes a "
                           "copy, and copy=False forbids it");
          return NULL;
        }
      if ((!same && !as_cpu) || copy == 1)
        return host_copy_capsule ((PyMemresBuffer *) self, major);
    }
  if (order_for_consumer (buf, no_order) < 0)
    return NULL;
  capsule = capsule_of (buf, major, FALSE, as_cpu);
  /* the tensor holds a reference: close() now leaves the memory to it */
  if (capsule != NULL)
    pymemres_buffer_mark_exported ((PyMemresBuffer *) self);
  return capsule;
}

/* Whether the tensor asked for is on the CPU: dl_device (when given) is (kDLCPU, 0), or the
 * buffer's own device is; 1, 0 or -1 with an exception. */
static int
tensor_on_cpu (PyObject *self, PyObject *dl_device)
{
  PyObject *mine = NULL;
  int cpu;

  if (dl_device == NULL || dl_device == Py_None)
    dl_device = mine = pymemres_buffer_dlpack_device (self, NULL);
  cpu = dl_device != NULL ? is_cpu (dl_device) : -1;
  Py_XDECREF (mine);
  return cpu;
}

PyObject *
pymemres_buffer_dlpack (PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
  PyObject *argv[4];
  long major;
  int copy = -1; /* copy=None: a copy only where dl_device asks for another device */
  gboolean stream_given, no_order;
  PyObject *capsule;

  if (nargs != 0)
    {
      PyErr_SetString (PyExc_TypeError, "__dlpack__() takes keyword arguments only");
      return NULL;
    }
  if (pymemres_parse_args ("__dlpack__", args, 0, kwnames, dlpack_names, 4, 0, argv) < 0
      || max_major_of (argv[1], &major) < 0)
    return NULL;
  /* copy is a bool or None (the array API's signature), not any object's truthiness */
  if (argv[3] != NULL && argv[3] != Py_None)
    {
      if (!PyBool_Check (argv[3]))
        {
          PyErr_Format (PyExc_TypeError, "copy must be a bool or None, not %.200s",
                        Py_TYPE (argv[3])->tp_name);
          return NULL;
        }
      copy = argv[3] == Py_True;
    }
  if (consumer_stream_arg (argv[0], &stream_given, &no_order) < 0)
    return NULL;
  if (memres_buffer_is_closed (((PyMemresBuffer *) self)->buf))
    return pymemres_raise_closed ();
  /* the array API: "On CPU and other device types without streams, only None is accepted",
   * and with dl_device (kDLCPU, 0) "stream must be None" */
  if (stream_given)
    {
      int cpu = tensor_on_cpu (self, argv[2]);

      if (cpu < 0)
        return NULL;
      if (cpu)
        {
          PyErr_SetString (PyExc_BufferError,
                           "the tensor is on the CPU (kDLCPU: host memory, or dl_device=(1, 0)): "
                           "stream must be None there, as the array API asks");
          return NULL;
        }
    }
  if (pymemres_buffer_use ((PyMemresBuffer *) self, FALSE) < 0)
    return NULL;
  capsule = dlpack_in_use (self, argv, major, copy, no_order);
  pymemres_buffer_unuse ((PyMemresBuffer *) self, FALSE);
  return capsule;
}

/* The device libmemres gives the buffer's tensors (memres_buffer_export_dlpack() decides it). */
PyObject *
pymemres_buffer_dlpack_device (PyObject *self, PyObject *unused)
{
  MemresBuffer *buf = ((PyMemresBuffer *) self)->buf;
  GError *error = NULL;
  gint64 shape[1] = { 0 };
  MemresDLManagedTensorVersioned *tensor;
  MemresDLDevice device;

  tensor = memres_buffer_export_dlpack (buf, dl_uint8, 1, shape, NULL, 0, &error);
  if (tensor == NULL)
    return pymemres_raise (error);
  device = tensor->dl_tensor.device;
  tensor->deleter (tensor);
  return Py_BuildValue ("(ii)", (int) device.device_type, (int) device.device_id);
}

PyObject *
pymemres_buffer_get_cai (PyObject *self, void *closure)
{
  MemresBuffer *buf = ((PyMemresBuffer *) self)->buf;
  MemresStream stream;
  PyObject *stream_obj;

  if (memres_buffer_is_closed (buf))
    return pymemres_raise_closed ();
  if (!memres_buffer_is_device_accessible (buf))
    {
      PyErr_SetString (PyExc_AttributeError,
                       "__cuda_array_interface__: the buffer is not device-accessible");
      return NULL;
    }
  /* a sleeping buffer has no memory under its address: refused as its DLPack export is */
  if (memres_buffer_is_asleep (buf))
    return pymemres_raise (g_error_new (MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP,
                                        "__cuda_array_interface__: the buffer is asleep (tag "
                                        "\"%s\"): wake its tag first",
                                        memres_buffer_get_tag (buf)));
  stream = memres_buffer_get_deallocation_stream (buf);
  /* 0 is not allowed in the interface: the legacy default stream is 1 */
  stream_obj = PyLong_FromUnsignedLongLong (stream == NULL ? 1 : (guintptr) stream);
  if (stream_obj == NULL)
    return NULL;
  return Py_BuildValue ("{s:(n),s:s,s:(KO),s:O,s:i,s:N}", "shape",
                        (Py_ssize_t) memres_buffer_get_size (buf), "typestr", "|u1", "data",
                        (unsigned long long) memres_buffer_get_address (buf), Py_False, "strides",
                        Py_None, "version", 3, "stream", stream_obj);
}

/* The buffer protocol: host-accessible memory as writable bytes (memoryview(buf), NumPy's
 * frombuffer). */
static int
buffer_getbuffer (PyObject *self, Py_buffer *view, int flags)
{
  MemresBuffer *buf = ((PyMemresBuffer *) self)->buf;

  view->obj = NULL;
  if (memres_buffer_is_closed (buf))
    {
      pymemres_raise_closed ();
      return -1;
    }
  if (!memres_buffer_is_host_accessible (buf))
    {
      PyErr_SetString (PyExc_BufferError, "the buffer is not host-accessible");
      return -1;
    }
  /* counted before the address is read: a close() that begins later is refused */
  if (pymemres_buffer_use ((PyMemresBuffer *) self, TRUE) < 0)
    return -1;
  if (PyBuffer_FillInfo (view, self, memres_buffer_get_pointer (buf),
                         (Py_ssize_t) memres_buffer_get_size (buf), 0, flags)
      < 0)
    {
      pymemres_buffer_unuse ((PyMemresBuffer *) self, TRUE);
      return -1;
    }
  return 0;
}

static void
buffer_releasebuffer (PyObject *self, Py_buffer *view)
{
  pymemres_buffer_unuse ((PyMemresBuffer *) self, TRUE);
}

PyBufferProcs pymemres_buffer_as_buffer = {
  .bf_getbuffer = buffer_getbuffer,
  .bf_releasebuffer = buffer_releasebuffer,
};

/* A legacy (DLPack 0.x) tensor adopted as a versioned one: the wrapper's deleter calls the
 * legacy tensor's and frees the wrapper. */
static void
adopted_deleter (MemresDLManagedTensorVersioned *self)
{
  MemresDLManagedTensor *legacy = self->manager_ctx;

  if (legacy->deleter != NULL)
    legacy->deleter (legacy);
  g_free (self);
}

static MemresDLManagedTensorVersioned *
adopt_legacy (MemresDLManagedTensor *legacy)
{
  MemresDLManagedTensorVersioned *tensor = g_new0 (MemresDLManagedTensorVersioned, 1);

  tensor->version.major = MEMRES_DLPACK_MAJOR_VERSION;
  tensor->version.minor = MEMRES_DLPACK_MINOR_VERSION;
  tensor->manager_ctx = legacy;
  tensor->deleter = adopted_deleter;
  tensor->dl_tensor = legacy->dl_tensor;
  return tensor;
}

/* obj.__dlpack__(max_version=(1, 0)); a producer older than max_version (a TypeError for the
 * keyword) is asked again with stream=None, then with no argument. */
static PyObject *
capsule_of_producer (PyObject *obj)
{
  PyObject *method = PyObject_GetAttrString (obj, "__dlpack__");
  PyObject *kwargs, *empty, *capsule = NULL;

  if (method == NULL)
    {
      if (PyErr_ExceptionMatches (PyExc_AttributeError))
        {
          PyErr_Clear ();
          PyErr_Format (PyExc_TypeError, "%.100s object is not a DLPack producer (no __dlpack__)",
                        Py_TYPE (obj)->tp_name);
        }
      return NULL;
    }
  empty = PyTuple_New (0);
  kwargs = Py_BuildValue ("{s:(ii)}", "max_version", MEMRES_DLPACK_MAJOR_VERSION,
                          MEMRES_DLPACK_MINOR_VERSION);
  if (empty != NULL && kwargs != NULL)
    {
      capsule = PyObject_Call (method, empty, kwargs);
      if (capsule == NULL && PyErr_ExceptionMatches (PyExc_TypeError))
        {
          PyErr_Clear ();
          Py_DECREF (kwargs);
          kwargs = Py_BuildValue ("{s:O}", "stream", Py_None);
          capsule = kwargs != NULL ? PyObject_Call (method, empty, kwargs) : NULL;
          if (capsule == NULL && PyErr_ExceptionMatches (PyExc_TypeError))
            {
              PyErr_Clear ();
              capsule = PyObject_CallNoArgs (method);
              if (capsule == NULL && PyErr_ExceptionMatches (PyExc_TypeError))
                {
                  PyErr_Clear ();
                  PyErr_Format (PyExc_TypeError,
                                "%.100s.__dlpack__ takes neither max_version, stream nor no "
                                "argument",
                                Py_TYPE (obj)->tp_name);
                }
            }
        }
    }
  Py_XDECREF (kwargs);
  Py_XDECREF (empty);
  Py_DECREF (method);
  if (capsule != NULL && !PyCapsule_CheckExact (capsule))
    {
      PyErr_Format (PyExc_TypeError, "%.100s.__dlpack__ returned %.100s, not a capsule",
                    Py_TYPE (obj)->tp_name, Py_TYPE (capsule)->tp_name);
      Py_CLEAR (capsule);
    }
  return capsule;
}

/* memres.from_dlpack(obj): a DLPack producer (an object with __dlpack__) or a capsule, wrapped
 * as a Buffer that owns the tensor (closing it calls the tensor's deleter). A legacy tensor is
 * adopted inside a versioned one. */
PyObject *
pymemres_from_dlpack (PyObject *module, PyObject *obj)
{
  PyObject *capsule = PyCapsule_CheckExact (obj) ? Py_NewRef (obj) : capsule_of_producer (obj);
  MemresDLManagedTensorVersioned *tensor;
  const char *used;
  gboolean adopted = FALSE;
  GError *error = NULL;
  MemresBuffer *buf;

  if (capsule == NULL)
    return NULL;
  if (PyCapsule_IsValid (capsule, CAPSULE_VERSIONED))
    {
      tensor = PyCapsule_GetPointer (capsule, CAPSULE_VERSIONED);
      used = CAPSULE_VERSIONED_USED;
    }
  else if (PyCapsule_IsValid (capsule, CAPSULE_LEGACY))
    {
      tensor = adopt_legacy (PyCapsule_GetPointer (capsule, CAPSULE_LEGACY));
      used = "used_" CAPSULE_LEGACY;
      adopted = TRUE;
    }
  else
    {
      Py_DECREF (capsule);
      PyErr_SetString (PyExc_ValueError,
                       "not an unused \"dltensor_versioned\" or \"dltensor\" capsule (a "
                       "capsule is consumed once)");
      return NULL;
    }
  buf = memres_buffer_new_for_dlpack (tensor, &error);
  if (buf == NULL)
    {
      /* nothing taken: the capsule still owns the tensor (an adopted one's wrapper goes) */
      if (adopted)
        g_free (tensor);
      Py_DECREF (capsule);
      return pymemres_raise (error);
    }
  /* consumed: the buffer owns the tensor now, the capsule's destructor leaves it (renaming a
   * capsule found valid above cannot fail) */
  PyCapsule_SetName (capsule, used);
  Py_DECREF (capsule);
  return pymemres_buffer_wrap (buf);
}
