/* memres - CUDA memory resources
 * module.c: the extension module memres._memres: its functions (default_resource, from_dlpack,
 * kinds, the plugin directory, where libmemres is), its constants and the types it holds.
 * memres/__init__.py is the package's face; this module is its C half. */
#include "pymemres.h"

#include <memres/memres-plugin.h> /* the driver table, for the current device */

#include <dlfcn.h>

/* The device of the current context, or 0 when there is none or no driver. */
static gint
current_device (void)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUcontext ctx = NULL;
  CUdevice device = 0;

  if (drv == NULL || drv->cuCtxGetCurrent (&ctx) != CUDA_SUCCESS || ctx == NULL
      || drv->cuCtxGetDevice (&device) != CUDA_SUCCESS)
    return 0;
  return (gint) device;
}

/* default_resource()'s objects, one per device ordinal (an int key; -1 host memory), for the
 * process's life: made at the module's init, never freed. Read and written under the GIL, or in
 * the dict's critical section on a free-threaded build. */
static PyObject *default_resources;

/* The open default of @key in the dict (a new reference), or NULL (no error) when there is none
 * or it was closed; the caller is in the dict's critical section. */
static PyObject *
default_lookup (PyObject *key)
{
  PyObject *found = PyDict_GetItemWithError (default_resources, key);
  MemresResource *mr;

  if (found == NULL)
    return NULL;
  mr = pymemres_resource_peek (found);
  if (mr == NULL)
    return NULL;
  pymemres_resource_release (mr);
  return Py_NewRef (found);
}

static PyObject *
module_default_resource (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = { "device", NULL };
  PyObject *device_obj = Py_None;
  GError *error = NULL;
  MemresResource *mr;
  PyObject *key, *made, *found;
  gint device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:default_resource", keywords, &device_obj))
    return NULL;
  if (device_obj == Py_None)
    device = current_device ();
  else if (pymemres_device_from_object (device_obj, &device) < 0)
    return NULL;
  key = PyLong_FromLong (device);
  if (key == NULL)
    return NULL;
  PYMEMRES_BEGIN_CRITICAL_SECTION (default_resources);
  found = default_lookup (key);
  PYMEMRES_END_CRITICAL_SECTION ();
  if (found != NULL || PyErr_Occurred ())
    {
      Py_DECREF (key);
      return found;
    }
  Py_BEGIN_ALLOW_THREADS;
  mr = memres_resource_get_default (device, &error);
  Py_END_ALLOW_THREADS;
  made = mr != NULL ? pymemres_resource_wrap (mr) : pymemres_raise (error);
  if (made == NULL)
    {
      Py_DECREF (key);
      return NULL;
    }
  /* another thread may have made one meanwhile (the creation ran without the GIL): the first
   * stored stays, ours is dropped; a closed one is replaced */
  PYMEMRES_BEGIN_CRITICAL_SECTION (default_resources);
  found = default_lookup (key);
  if (found == NULL && !PyErr_Occurred ())
    {
      if (PyDict_SetItem (default_resources, key, made) == 0)
        found = Py_NewRef (made);
    }
  PYMEMRES_END_CRITICAL_SECTION ();
  Py_DECREF (key);
  Py_DECREF (made);
  return found;
}

static PyObject *
module_set_plugin_dir (PyObject *module, PyObject *arg)
{
  PyObject *bytes = NULL;

  if (arg != Py_None && !PyUnicode_FSConverter (arg, &bytes))
    return NULL;
  /* a directory that is not there would be searched for nothing, silently: refused, the
   * search path unchanged */
  if (bytes != NULL && !g_file_test (PyBytes_AS_STRING (bytes), G_FILE_TEST_IS_DIR))
    {
      const char *path = PyBytes_AS_STRING (bytes);
      gboolean exists = g_file_test (path, G_FILE_TEST_EXISTS);
      g_autofree char *shown = g_filename_display_name (path);
      GError *error = g_error_new (G_FILE_ERROR, exists ? G_FILE_ERROR_NOTDIR : G_FILE_ERROR_NOENT,
                                   "plugin directory '%s': %s", shown,
                                   exists ? "not a directory" : "no such directory");

      Py_DECREF (bytes);
      return pymemres_raise (error);
    }
  memres_registry_set_plugin_dir (bytes != NULL ? PyBytes_AS_STRING (bytes) : NULL);
  Py_XDECREF (bytes);
  Py_RETURN_NONE;
}

static PyObject *
module_plugin_search_path (PyObject *module, PyObject *unused)
{
  g_auto (GStrv) dirs = memres_registry_get_search_path ();
  PyObject *list = PyList_New (0);

  for (guint i = 0; list != NULL && dirs[i] != NULL; i++)
    {
      PyObject *dir = PyUnicode_DecodeFSDefault (dirs[i]);
      if (dir == NULL || PyList_Append (list, dir) < 0)
        Py_CLEAR (list);
      Py_XDECREF (dir);
    }
  return list;
}

static PyObject *
module_kinds (PyObject *module, PyObject *unused)
{
  GError *error = NULL;
  GPtrArray *kinds;
  PyObject *list;

  Py_BEGIN_ALLOW_THREADS;
  kinds = memres_registry_list_kinds (&error);
  Py_END_ALLOW_THREADS;
  if (kinds == NULL)
    return pymemres_raise (error);
  list = PyList_New (0);
  for (guint i = 0; list != NULL && i < kinds->len; i++)
    {
      PyObject *name = PyUnicode_FromString (memres_kind_get_name (kinds->pdata[i]));
      if (name == NULL || PyList_Append (list, name) < 0)
        Py_CLEAR (list);
      Py_XDECREF (name);
    }
  g_ptr_array_unref (kinds);
  return list;
}

/* The file libmemres was loaded from: memres.torch and memres.cupy find libmemres-allocator
 * beside it. */
static PyObject *
module_library_path (PyObject *module, PyObject *unused)
{
  Dl_info info;

  if (dladdr ((void *) memres_resource_new, &info) == 0 || info.dli_fname == NULL)
    Py_RETURN_NONE;
  return PyUnicode_DecodeFSDefault (info.dli_fname);
}

/* A new Resource over the MemresResource at @arg (an int): libmemres-allocator's per-device
 * resources (memres.torch, memres.cupy), for their statistics. Internal. */
static PyObject *
module_resource_from_address (PyObject *module, PyObject *arg)
{
  void *ptr = PyLong_AsVoidPtr (arg);

  if (ptr == NULL)
    {
      if (!PyErr_Occurred ())
        PyErr_SetString (PyExc_ValueError, "no resource at address 0");
      return NULL;
    }
  return pymemres_resource_wrap (memres_resource_ref (ptr));
}

/* _stream_handle(stream): the handle of a stream argument as every method reads one (stream.c),
 * as an int, 0 for None: memres.cupy.use()'s stream for CuPy, which takes an int only.
 * Internal. */
static PyObject *
module_stream_handle (PyObject *module, PyObject *obj)
{
  MemresStream stream = NULL;

  if (pymemres_stream_from_object (obj, &stream) < 0)
    return NULL;
  return PyLong_FromUnsignedLongLong ((unsigned long long) (guintptr) stream);
}

/* A device argument as default_resource() takes it (an int of a C int's range, -1 host memory):
 * the frameworks' allocator object passes it to the shim through ctypes, whose c_int kept the
 * low 32 bits of a larger one (2**40 was device 0) */
static PyObject *
module_device_index (PyObject *module, PyObject *obj)
{
  gint device;

  if (pymemres_device_from_object (obj, &device) < 0)
    return NULL;
  return PyLong_FromLong (device);
}

static PyObject *
module_from_dlpack (PyObject *module, PyObject *obj)
{
  return pymemres_from_dlpack (module, obj);
}

static PyMethodDef module_methods[] = {
  { "default_resource", (PyCFunction) (void (*) (void)) module_default_resource,
    METH_VARARGS | METH_KEYWORDS,
    "default_resource(device=None) -> Resource\n\n"
    "The resource an application gets when it names none: the device's memory pool\n"
    "(\"dmr:device=N\") when a CUDA driver loads and the device exists, host memory when\n"
    "device is -1 or no driver or device is there. device None: the current context's device\n"
    "(0 without one). One Resource per device for the process's life, as cuda.core's\n"
    "Device(n).memory_resource: every call for a device returns the same object (thread-safe;\n"
    "threads racing for the first get the one stored first). Closing it (close(), a with\n"
    "block) ends that object, its open buffers living on: the next call makes a new default,\n"
    "which is then the one returned. Raises NoDeviceError for a device that does not exist,\n"
    "InvalidArgumentError for one below -1 (nothing stored)." },
  { "from_dlpack", module_from_dlpack, METH_O,
    "from_dlpack(obj) -> Buffer\n\n"
    "Another library's memory as a Buffer: obj has __dlpack__ (called with max_version=(1, 0);\n"
    "a producer older than that is asked again without it) or is a DLPack capsule. The Buffer\n"
    "owns the tensor: closing it returns the tensor to its producer (the memory is the\n"
    "producer's; it is not freed). A capsule is consumed once: a second use raises\n"
    "ValueError. TypeError for an object that is no producer; InvalidArgumentError for a\n"
    "tensor memres refuses." },
  { "import_message", (PyCFunction) (void (*) (void)) pymemres_import_message,
    METH_FASTCALL | METH_KEYWORDS,
    "import_message(data, fds, importer=None, stream=None) -> Buffer\n\n"
    "The buffer another process exported with Buffer.export_message(): data the bytes, fds\n"
    "the file descriptors received with them (borrowed: close them yourself). importer: None\n"
    "for a pool buffer (its pool is imported, once per process), or the Resource to map\n"
    "chunked (vmm) memory through. Releases the GIL. Raises InvalidArgumentError for a\n"
    "message that does not validate." },
  { "kinds", module_kinds, METH_NOARGS,
    "kinds() -> list of str\n\nThe names of every kind registered, loading every plugin on the "
    "search path." },
  { "set_plugin_dir", module_set_plugin_dir, METH_O,
    "set_plugin_dir(path)\n\n"
    "Searches path for plugins after MEMRES_PLUGIN_PATH and before the installed directory\n"
    "(memres_registry_set_plugin_dir); None removes it. The package calls it at import with\n"
    "the plugins it carries. Raises memres.FileError (an OSError; domain g-file-error-quark,\n"
    "code NOENT or NOTDIR) for a path that is not a directory, the search path unchanged." },
  { "plugin_search_path", module_plugin_search_path, METH_NOARGS,
    "plugin_search_path() -> list of str\n\nThe directories searched for plugins, in order." },
  { "_resource_from_address", module_resource_from_address, METH_O,
    "_resource_from_address(address) -> Resource\n\nInternal: libmemres-allocator's resources." },
  { "_stream_handle", module_stream_handle, METH_O,
    "_stream_handle(stream) -> int\n\nInternal: a stream argument's handle (memres.cupy.use())." },
  { "_device_index", module_device_index, METH_O,
    "_device_index(device) -> int\n\nInternal: a device argument checked as default_resource()\n"
    "checks it (TypeError, memres.OutOfRangeError), for the frameworks' allocator object." },
  { "_tag_push", pymemres_tag_push, METH_O,
    "_tag_push(name)\n\nInternal: memres.tag() (memres_tag_push on the calling thread)." },
  { "_tag_pop", pymemres_tag_pop, METH_O,
    "_tag_pop(name)\n\nInternal: memres.tag() (memres_tag_pop; None pops whichever)." },
  { "current_tag", pymemres_tag_current, METH_NOARGS,
    "current_tag() -> str or None\n\nThe calling thread's innermost tag (memres.tag())." },
  { "tags", pymemres_tag_list, METH_NOARGS,
    "tags() -> list of str\n\nEvery tag the process has used, in the order of first use." },
  { "set_stream_default_tag", pymemres_tag_set_stream_default, METH_VARARGS,
    "set_stream_default_tag(stream, name)\n\n"
    "The tag of allocations on stream made by threads without a memres.tag() scope (a\n"
    "framework's worker threads); None clears it. A thread's scope wins over it, and it wins\n"
    "over the device's default." },
  { "set_device_default_tag", pymemres_tag_set_device_default, METH_VARARGS,
    "set_device_default_tag(device, name)\n\n"
    "The tag of allocations from resources of device (-1: host memory) made without a scope on\n"
    "a stream without a default; None clears it." },
  { "library_path", module_library_path, METH_NOARGS,
    "library_path() -> str\n\nThe file libmemres was loaded from." },
  { NULL },
};

static struct PyModuleDef module_def = {
  PyModuleDef_HEAD_INIT,
  .m_name = "memres._memres",
  .m_doc = "The C half of the memres package (import memres instead).",
  .m_size = -1,
  .m_methods = module_methods,
};

static const struct
{
  const char *name;
  long value;
} constants[] = {
  { "ERROR_FAILED", MEMRES_ERROR_FAILED },
  { "TAG_ERROR_INVALID", MEMRES_TAG_ERROR_INVALID },
  { "TAG_ERROR_TOO_MANY", MEMRES_TAG_ERROR_TOO_MANY },
  { "TAG_ERROR_TOO_DEEP", MEMRES_TAG_ERROR_TOO_DEEP },
  { "TAG_ERROR_EMPTY", MEMRES_TAG_ERROR_EMPTY },
  { "TAG_ERROR_MISMATCH", MEMRES_TAG_ERROR_MISMATCH },
  { "TAG_ERROR_UNKNOWN", MEMRES_TAG_ERROR_UNKNOWN },
  { "SLEEP_ERROR_ASLEEP", MEMRES_SLEEP_ERROR_ASLEEP },
  { "SLEEP_ERROR_TAG_ASLEEP", MEMRES_SLEEP_ERROR_TAG_ASLEEP },
  { "SLEEP_ERROR_ALREADY_ASLEEP", MEMRES_SLEEP_ERROR_ALREADY_ASLEEP },
  { "SLEEP_ERROR_NOT_ASLEEP", MEMRES_SLEEP_ERROR_NOT_ASLEEP },
  { "SLEEP_ERROR_SHARED", MEMRES_SLEEP_ERROR_SHARED },
  { "SLEEP_ERROR_FILE", MEMRES_SLEEP_ERROR_FILE },
  { "SLEEP_ERROR_BUSY", MEMRES_SLEEP_ERROR_BUSY },
  { "ERROR_INVALID_ARGUMENT", MEMRES_ERROR_INVALID_ARGUMENT },
  { "ERROR_NOT_FOUND", MEMRES_ERROR_NOT_FOUND },
  { "ERROR_EXISTS", MEMRES_ERROR_EXISTS },
  { "ERROR_NOT_SUPPORTED", MEMRES_ERROR_NOT_SUPPORTED },
  { "ERROR_OUT_OF_MEMORY", MEMRES_ERROR_OUT_OF_MEMORY },
  { "ERROR_CLOSED", MEMRES_ERROR_CLOSED },
  { "ERROR_NO_DRIVER", MEMRES_ERROR_NO_DRIVER },
  { "ERROR_NO_DEVICE", MEMRES_ERROR_NO_DEVICE },
  { "ERROR_WRONG_DEVICE", MEMRES_ERROR_WRONG_DEVICE },
  { "ERROR_INVALID_DESCRIPTOR", MEMRES_ERROR_INVALID_DESCRIPTOR },
  { "ERROR_PERMISSION_DENIED", MEMRES_ERROR_PERMISSION_DENIED },
  { "ERROR_FORKED", MEMRES_ERROR_FORKED },
  { "MEMORY_DEVICE_ACCESSIBLE", MEMRES_MEMORY_DEVICE_ACCESSIBLE },
  { "MEMORY_HOST_ACCESSIBLE", MEMRES_MEMORY_HOST_ACCESSIBLE },
  { "MEMORY_IPC_ENABLED", MEMRES_MEMORY_IPC_ENABLED },
  { "MEMORY_IMPORTED", MEMRES_MEMORY_IMPORTED },
  { "MEMORY_RESIZABLE", MEMRES_MEMORY_RESIZABLE },
  { "MEMORY_STREAM_ORDERED", MEMRES_MEMORY_STREAM_ORDERED },
  { "MEMORY_MANAGED", MEMRES_MEMORY_MANAGED },
  { "MEMORY_GRAPH", MEMRES_MEMORY_GRAPH },
  { "MEMORY_FABRIC_HANDLES", MEMRES_MEMORY_FABRIC_HANDLES },
};

PyMODINIT_FUNC PyInit__memres (void);

PyMODINIT_FUNC
PyInit__memres (void)
{
  PyObject *module;

  if (PyType_Ready (&PyMemresResource_Type) < 0 || PyType_Ready (&PyMemresBuffer_Type) < 0
      || pymemres_buffer_context_init () < 0 || pymemres_foreign_buffer_init () < 0)
    return NULL;
  if (default_resources == NULL && (default_resources = PyDict_New ()) == NULL)
    return NULL;
  module = PyModule_Create (&module_def);
  if (module == NULL)
    return NULL;
  if (PyModule_AddObjectRef (module, "Resource", (PyObject *) &PyMemresResource_Type) < 0
      || PyModule_AddObjectRef (module, "Buffer", (PyObject *) &PyMemresBuffer_Type) < 0
      || PyModule_AddObjectRef (module, "ForeignBuffer", (PyObject *) &PyMemresForeignBuffer_Type)
             < 0
      || pymemres_errors_init (module) < 0 || pymemres_stream_init () < 0
      || PyModule_AddStringConstant (module, "version", memres_get_version ()) < 0
#ifdef PYMEMRES_ATOMIC_STATE
      || PyModule_AddIntConstant (module, "_atomic_state", 1) < 0
#else
      || PyModule_AddIntConstant (module, "_atomic_state", 0) < 0
#endif
  )
    goto fail;
  for (gsize i = 0; i < G_N_ELEMENTS (constants); i++)
    if (PyModule_AddIntConstant (module, constants[i].name, constants[i].value) < 0)
      goto fail;
#ifdef Py_GIL_DISABLED
  /* no state shared without a lock: the free lists and the stream cache are GIL builds' only */
  if (PyUnstable_Module_SetGIL (module, Py_MOD_GIL_NOT_USED) < 0)
    goto fail;
#endif
  return module;

fail:
  Py_DECREF (module);
  return NULL;
}
