/* memres - CUDA memory resources
 * cuda-driver.c: loads the CUDA driver with dlopen() once per process, resolves the entry
 * points of MEMRES_CUDA_FOREACH_ENTRY with cuGetProcAddress() and keeps the primary contexts. */
#include "memres-private.h"

#include <dlfcn.h>
#include <string.h>

typedef CUresult (*GetProcAddressV2Func) (const char *symbol, void **pfn, int cuda_version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult *status);
typedef CUresult (*GetProcAddressV1Func) (const char *symbol, void **pfn, int cuda_version,
                                          cuuint64_t flags);

static MemresCudaDriver driver;
static GError *driver_error; /* set once when loading failed; re-reported by every call */
static gint n_devices;       /* 0 when cuInit said CUDA_ERROR_NO_DEVICE */

static GMutex context_mutex;

static void
contexts_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&context_mutex, phase);
}
static CUcontext *primary_contexts; /* n_devices entries, retained once, read atomically */

/* The CUDA version at which @name is resolved. cuGetProcAddress() returns the newest ABI of a
 * name up to that version; for the names below a newer ABI (a context argument from CUDA 13.0;
 * a green-context argument for cuStreamGetCtx from 12.5) exists while cuda.h keeps declaring
 * the old one under the plain name, so they are asked for at 12000 to get the ABI the table's
 * type describes. tests/cuda-entry-check.c checks every field against the driver's typedefs at
 * compile time. */
static int
entry_version (const char *name)
{
  static const char *const pre_13000[] = { "cuCtxGetDevice", "cuCtxSynchronize", "cuStreamGetCtx" };

  for (guint i = 0; i < G_N_ELEMENTS (pre_13000); i++)
    if (strcmp (name, pre_13000[i]) == 0)
      return MIN (MEMRES_CUDA_VERSION, 12000);
  return MEMRES_CUDA_VERSION;
}

/* The entry point @name from cuGetProcAddress_v2 (@get_proc_v2) or, when the driver lacks it,
 * cuGetProcAddress (@get_proc_v1); NULL when the driver does not have it. */
static gpointer
resolve_entry (GetProcAddressV2Func get_proc_v2, GetProcAddressV1Func get_proc_v1, const char *name)
{
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  void *pfn = NULL;
  CUresult res;

  if (get_proc_v2 != NULL)
    res = get_proc_v2 (name, &pfn, entry_version (name), CU_GET_PROC_ADDRESS_DEFAULT, &status);
  else
    res = get_proc_v1 (name, &pfn, entry_version (name), CU_GET_PROC_ADDRESS_DEFAULT);
  return res == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? pfn : NULL;
}

static gboolean
resolve_entries (gpointer handle, const char *path, GError **error)
{
  GetProcAddressV2Func get_proc_v2 = (GetProcAddressV2Func) dlsym (handle, "cuGetProcAddress_v2");
  GetProcAddressV1Func get_proc_v1 = NULL;
  const char *missing;

  if (get_proc_v2 == NULL)
    get_proc_v1 = (GetProcAddressV1Func) dlsym (handle, "cuGetProcAddress");
  if (get_proc_v2 == NULL && get_proc_v1 == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                   "%s is not a CUDA driver: it has no cuGetProcAddress entry point", path);
      return FALSE;
    }

#define RESOLVE_ENTRY_(name)                                                                       \
  driver.name = (__typeof__ (driver.name)) resolve_entry (get_proc_v2, get_proc_v1, #name);
  MEMRES_CUDA_FOREACH_ENTRY (RESOLVE_ENTRY_)
#undef RESOLVE_ENTRY_

  /* the first required entry point the driver lacks, or NULL */
#define MISSING_(name) driver.name == NULL ? #name:
  missing = MEMRES_CUDA_FOREACH_REQUIRED_ENTRY (MISSING_) NULL;
#undef MISSING_
  if (missing != NULL)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                 "The CUDA driver %s lacks the entry point %s (CUDA %d)", path, missing,
                 MEMRES_CUDA_VERSION);
  return missing == NULL;
}

/* What @get (the driver's cuGetErrorName or cuGetErrorString, or NULL) says of @result, or
 * @unknown when it says nothing. */
static const char *
describe (__typeof__ (driver.cuGetErrorName) get, CUresult result, const char *unknown)
{
  const char *text = NULL;

  return get != NULL && get (result, &text) == CUDA_SUCCESS && text != NULL ? text : unknown;
}

/* TRUE when the driver call @call returned CUDA_SUCCESS (@res); else memres_cuda_set_error(). */
static gboolean
check_call (CUresult res, const char *call, GError **error)
{
  return res == CUDA_SUCCESS || memres_cuda_set_error (error, res, call);
}

static gboolean
init_driver (const char *path, GError **error)
{
  CUresult res;

  _memres_fork_note_driver_init ();
  _memres_fork_add_part (MEMRES_FORK_CONTEXTS, contexts_fork);
  /* CUDA_ERROR_NO_DEVICE: the driver is loaded, with no devices (n_devices stays 0) */
  res = driver.cuInit (0);
  if (res != CUDA_SUCCESS && res != CUDA_ERROR_NO_DEVICE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                   "The CUDA driver %s failed to initialize: cuInit: %s: %s", path,
                   describe (driver.cuGetErrorName, res, "CUDA_ERROR_UNKNOWN"),
                   describe (driver.cuGetErrorString, res, "unknown error"));
      return FALSE;
    }
  if (res == CUDA_SUCCESS
      && !check_call (driver.cuDeviceGetCount (&n_devices), "cuDeviceGetCount", error))
    return FALSE;
  n_devices = MAX (n_devices, 0);

  if (driver.cuDriverGetVersion (&driver.driver_version) != CUDA_SUCCESS)
    driver.driver_version = 0;

  primary_contexts = g_new0 (CUcontext, MAX (n_devices, 1));
  return TRUE;
}

/* Loads the driver once; a failure is kept in driver_error. */
static gpointer
load_driver (gpointer data)
{
  const char *env = g_getenv ("MEMRES_CUDA_DRIVER");
  const char *path = (env != NULL && env[0] != '\0') ? env : "libcuda.so.1";
  /* A path (not a name the dynamic linker searches for) is looked at first: dlopen() of a FIFO
   * would block forever, and its errors for a directory or a link loop do not say so. */
  g_autofree char *problem = strchr (path, '/') != NULL ? _memres_module_file_problem (path) : NULL;
  gpointer handle;

  /* driver is zero-filled (static storage; this runs once) */
  driver.struct_size = sizeof driver;

  if (problem != NULL)
    {
      g_set_error (&driver_error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                   MEMRES_NO_DRIVER_PREFIX "%s: it is %s, not a shared library", path, problem);
      return NULL;
    }
  handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    {
      const char *why = dlerror ();
      gsize len = strlen (path);

      if (why == NULL)
        why = "dlopen failed";
      else if (strncmp (why, path, len) == 0 && strncmp (why + len, ": ", 2) == 0)
        why += len + 2; /* dlerror() starts with the path too: say it once */
      g_set_error (&driver_error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                   MEMRES_NO_DRIVER_PREFIX "%s: %s", path, why);
      return NULL;
    }

  /* Keep the library loaded: a driver that ran cuInit may have started threads. A library
   * whose cuInit never ran (not a driver, or one lacking entry points) is closed again. */
  if (!resolve_entries (handle, path, &driver_error))
    dlclose (handle);
  else if (init_driver (path, &driver_error))
    {
      driver.path = g_strdup (path);
      return NULL;
    }
  memset (&driver, 0, sizeof driver);
  return NULL;
}

static GOnce driver_once = G_ONCE_INIT;

static gboolean
ensure_driver (GError **error)
{
  g_once (&driver_once, load_driver, NULL);
  if (G_UNLIKELY (driver_error != NULL))
    {
      g_propagate_error (error, g_error_copy (driver_error));
      return FALSE;
    }
  if (G_UNLIKELY (_memres_fork_driver_lost ()))
    return _memres_fork_set_error (error, "the CUDA driver");
  return TRUE;
}

const MemresCudaDriver *
_memres_cuda_driver_if_loaded (void)
{
  if (g_atomic_int_get ((const gint *) &driver_once.status) != G_ONCE_STATUS_READY
      || driver_error != NULL || _memres_fork_driver_lost ())
    return NULL;
  return &driver;
}

/**
 * memres_cuda_get_driver:
 * @error: return location for a #GError, or %NULL
 *
 * Loads the CUDA driver on first use: `dlopen()` of the file named by the environment variable
 * `MEMRES_CUDA_DRIVER`, or `libcuda.so.1`, then `cuGetProcAddress_v2` (or `cuGetProcAddress`)
 * for every entry point of %MEMRES_CUDA_FOREACH_ENTRY at %MEMRES_CUDA_VERSION, then
 * `cuInit(0)`. This happens once per process; a failure is remembered and reported again by
 * every later call. A driver whose cuInit() returns `CUDA_ERROR_NO_DEVICE` is loaded, with no
 * devices. Thread-safe.
 *
 * In the child of a fork() made after the driver was initialized the driver cannot be used:
 * every call fails with %MEMRES_ERROR_FORKED (a child of a process that never initialized the
 * driver loads it as usual).
 *
 * Errors: %MEMRES_ERROR_FORKED (see above); %MEMRES_ERROR_NO_DRIVER when the file is missing, is
 * not a CUDA driver, lacks a required entry point (%MEMRES_CUDA_FOREACH_REQUIRED_ENTRY) or cuInit()
 * fails (the message names the CUDA error); %MEMRES_CUDA_ERROR when cuDeviceGetCount() fails.
 *
 * Returns: (transfer none) (nullable): the driver table, valid for the life of the process, or
 *   %NULL with @error set
 *
 * Since: 1.0
 */
const MemresCudaDriver *
memres_cuda_get_driver (GError **error)
{
  return ensure_driver (error) ? &driver : NULL;
}

/**
 * memres_cuda_set_error:
 * @error: return location for a #GError, or %NULL
 * @result: the `CUresult` a driver call returned
 * @call: (nullable): the name of the failing driver call, such as "cuMemPoolCreate"
 *
 * Sets @error for a failed driver call, with the message "CALL: CUDA_ERROR_NAME: description"
 * (from cuGetErrorName() and cuGetErrorString() when the driver is loaded): in the
 * %MEMRES_CUDA_ERROR domain with code @result, except for `CUDA_ERROR_OUT_OF_MEMORY`, which is
 * set as %MEMRES_ERROR_OUT_OF_MEMORY (%MEMRES_ERROR domain; the message still names the call
 * and the `CUresult`). That is the out-of-memory rule of memres (since 1.2): whichever kind,
 * adaptor or driver call ran out of memory, the application, the retry adaptor and the cache
 * match one code, the one kinds also set when they know a size cannot be had. Every driver
 * failure the core and the shipped kinds report goes through here. Thread-safe.
 *
 * Returns: %FALSE, so that `return memres_cuda_set_error (...)` reads naturally
 *
 * Since: 1.0
 */
gboolean
memres_cuda_set_error (GError **error, CUresult result, const char *call)
{
  const char *name;
  const char *text;
  gboolean oom = result == CUDA_ERROR_OUT_OF_MEMORY;
  GQuark domain = oom ? MEMRES_ERROR : MEMRES_CUDA_ERROR;
  gint code = oom ? MEMRES_ERROR_OUT_OF_MEMORY : (gint) result;

  if (error == NULL)
    return FALSE;

  name = describe (driver.cuGetErrorName, result, NULL);
  text = describe (driver.cuGetErrorString, result, "no description");
  if (name != NULL)
    g_set_error (error, domain, code, "%s: %s: %s", call != NULL ? call : "CUDA", name, text);
  else
    g_set_error (error, domain, code, "%s: CUDA error %d", call != NULL ? call : "CUDA",
                 (gint) result);
  return FALSE;
}

/**
 * memres_cuda_get_device_count:
 * @count: (out): return location for the number of CUDA devices
 * @error: return location for a #GError, or %NULL
 *
 * The number of devices the driver reported at load time (cuDeviceGetCount()); 0 when
 * cuInit() said `CUDA_ERROR_NO_DEVICE`. Thread-safe.
 *
 * Errors: those of memres_cuda_get_driver().
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_cuda_get_device_count (gint *count, GError **error)
{
  g_return_val_if_fail (count != NULL, FALSE);

  if (!ensure_driver (error))
    return FALSE;
  *count = n_devices;
  return TRUE;
}

/**
 * memres_cuda_check_device:
 * @device: a CUDA device ordinal
 * @error: return location for a #GError, or %NULL
 *
 * Checks that @device names a device of the loaded driver. Thread-safe.
 *
 * Errors: those of memres_cuda_get_driver(); %MEMRES_ERROR_NO_DEVICE when @device is negative
 * or not below the device count.
 *
 * Returns: %TRUE when the device exists
 *
 * Since: 1.0
 */
gboolean
memres_cuda_check_device (gint device, GError **error)
{
  if (!ensure_driver (error))
    return FALSE;
  if (device < 0 || device >= n_devices)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE,
                   "No CUDA device %d: the driver reports %d device%s", device, n_devices,
                   n_devices == 1 ? "" : "s");
      return FALSE;
    }
  return TRUE;
}

/**
 * memres_cuda_get_primary_context:
 * @device: a CUDA device ordinal
 * @context: (out): return location for the device's primary context
 * @error: return location for a #GError, or %NULL
 *
 * The primary context of @device, retained once per process (cuDeviceGet(),
 * cuDevicePrimaryCtxRetain()) on first use and cached; memres keeps that reference for the life
 * of the process. Thread-safe.
 *
 * Errors: those of memres_cuda_check_device(); %MEMRES_CUDA_ERROR when a driver call fails.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_cuda_get_primary_context (gint device, CUcontext *context, GError **error)
{
  CUcontext ctx;
  CUdevice dev;
  gboolean ok = TRUE;

  g_return_val_if_fail (context != NULL, FALSE);

  if (!memres_cuda_check_device (device, error))
    return FALSE;

  ctx = g_atomic_pointer_get (&primary_contexts[device]);
  if (G_UNLIKELY (ctx == NULL))
    {
      G_GNUC_UNUSED g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&context_mutex);

      ctx = g_atomic_pointer_get (&primary_contexts[device]);
      if (ctx == NULL)
        {
          ok = check_call (driver.cuDeviceGet (&dev, device), "cuDeviceGet", error)
               && check_call (driver.cuDevicePrimaryCtxRetain (&ctx, dev),
                              "cuDevicePrimaryCtxRetain", error);
          if (ok)
            g_atomic_pointer_set (&primary_contexts[device], ctx);
        }
    }

  if (ok)
    *context = ctx;
  return ok;
}

/**
 * memres_cuda_ensure_context:
 * @device: a CUDA device ordinal
 * @error: return location for a #GError, or %NULL
 *
 * Makes the primary context of @device current on the calling thread (cuCtxSetCurrent()) when
 * no context is current (cuCtxGetCurrent()); a context already current is left alone.
 * Thread-safe (it acts on the calling thread only).
 *
 * Errors: those of memres_cuda_get_primary_context(); %MEMRES_CUDA_ERROR when a driver call
 * fails.
 *
 * Returns: %TRUE when a context is current
 *
 * Since: 1.0
 */
gboolean
memres_cuda_ensure_context (gint device, GError **error)
{
  CUcontext current = NULL;
  CUcontext primary;

  if (!ensure_driver (error)
      || !check_call (driver.cuCtxGetCurrent (&current), "cuCtxGetCurrent", error))
    return FALSE;
  if (current != NULL)
    return TRUE;

  return memres_cuda_get_primary_context (device, &primary, error)
         && check_call (driver.cuCtxSetCurrent (primary), "cuCtxSetCurrent", error);
}

/**
 * memres_cuda_get_device_uuid:
 * @device: a CUDA device ordinal
 * @uuid: (out caller-allocates) (array fixed-size=16): return location for the 16-byte UUID
 * @error: return location for a #GError, or %NULL
 *
 * Reads the UUID of @device with cuDeviceGet() and cuDeviceGetUuid(). Thread-safe.
 *
 * Errors: those of memres_cuda_check_device(); %MEMRES_ERROR_NOT_SUPPORTED when the driver
 * lacks cuDeviceGetUuid; %MEMRES_CUDA_ERROR when a driver call fails.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_cuda_get_device_uuid (gint device, guint8 uuid[16], GError **error)
{
  CUdevice dev;
  CUuuid id;

  g_return_val_if_fail (uuid != NULL, FALSE);

  if (!memres_cuda_check_device (device, error))
    return FALSE;
  if (driver.cuDeviceGetUuid == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "The CUDA driver has no cuDeviceGetUuid");
      return FALSE;
    }
  if (!check_call (driver.cuDeviceGet (&dev, device), "cuDeviceGet", error)
      || !check_call (driver.cuDeviceGetUuid (&id, dev), "cuDeviceGetUuid", error))
    return FALSE;
  G_STATIC_ASSERT (sizeof id.bytes == 16);
  memcpy (uuid, id.bytes, 16);
  return TRUE;
}

/**
 * memres_cuda_find_device_by_uuid:
 * @uuid: (array fixed-size=16): a device UUID
 * @device: (out): return location for the ordinal of the device with that UUID
 * @error: return location for a #GError, or %NULL
 *
 * Finds the device whose UUID (cuDeviceGetUuid()) equals @uuid. Thread-safe.
 *
 * Errors: those of memres_cuda_get_driver(); %MEMRES_ERROR_NO_DEVICE when the driver has no
 * device at all; %MEMRES_ERROR_WRONG_DEVICE when no device of this process has that UUID;
 * %MEMRES_CUDA_ERROR when a driver call fails.
 *
 * Returns: %TRUE when found
 *
 * Since: 1.0
 */
gboolean
memres_cuda_find_device_by_uuid (const guint8 uuid[16], gint *device, GError **error)
{
  g_return_val_if_fail (uuid != NULL, FALSE);
  g_return_val_if_fail (device != NULL, FALSE);

  if (!ensure_driver (error))
    return FALSE;
  if (n_devices == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE,
                   "No CUDA device: the driver reports none");
      return FALSE;
    }
  for (gint i = 0; i < n_devices; i++)
    {
      guint8 id[16];

      if (!memres_cuda_get_device_uuid (i, id, error))
        return FALSE;
      if (memcmp (id, uuid, 16) == 0)
        {
          *device = i;
          return TRUE;
        }
    }
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
               "No CUDA device of this process has the requested UUID");
  return FALSE;
}

/* cuStreamIsCapturing() of @stream into *@status (NONE when the driver lacks it): the one place
 * memres reads a stream's capture status. */
static gboolean
capture_status (MemresStream stream, CUstreamCaptureStatus *status, GError **error)
{
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!ensure_driver (error))
    return FALSE;
  return driver.cuStreamIsCapturing == NULL
         || check_call (driver.cuStreamIsCapturing ((CUstream) stream, status),
                        "cuStreamIsCapturing", error);
}

gboolean
_memres_stream_is_capturing (MemresStream stream)
{
  CUstreamCaptureStatus status;

  return stream != NULL && stream != MEMRES_STREAM_LEGACY && capture_status (stream, &status, NULL)
         && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/**
 * memres_cuda_check_stream_not_capturing:
 * @stream: a CUDA stream
 * @error: return location for a #GError, or %NULL
 *
 * Checks with cuStreamIsCapturing() that @stream is not capturing a graph: stream-ordered pools
 * cannot allocate during graph capture. The error message points at the `graph` kind, the one
 * that allocates inside a capture. Does nothing when the driver lacks cuStreamIsCapturing.
 * Thread-safe.
 *
 * Errors: those of memres_cuda_get_driver(); %MEMRES_ERROR_NOT_SUPPORTED when the stream is
 * capturing; %MEMRES_CUDA_ERROR when cuStreamIsCapturing() fails.
 *
 * Returns: %TRUE when the stream is not capturing
 *
 * Since: 1.0
 */
gboolean
memres_cuda_check_stream_not_capturing (MemresStream stream, GError **error)
{
  CUstreamCaptureStatus status;

  if (!capture_status (stream, &status, error))
    return FALSE;
  if (status != CU_STREAM_CAPTURE_STATUS_NONE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "Stream %p is capturing a graph: this kind cannot allocate during graph "
                   "capture; allocate from the \"graph\" kind (graph:device=N) inside a capture",
                   (gpointer) stream);
      return FALSE;
    }
  return TRUE;
}

/**
 * memres_cuda_warn_release_failure:
 * @error: (nullable): why releasing failed
 * @format: printf() format of what was being released or rolled back, such as
 *   `"closing a buffer of %zu bytes"`
 * @...: the arguments of @format
 *
 * Reports a failure nobody can be told about: freeing memory on the last unref of a buffer,
 * a driver call failing while a failed operation is rolled back. Logs "WHAT: MESSAGE" with
 * `g_warning`, except when @error is the %MEMRES_CUDA_ERROR `CUDA_ERROR_DEINITIALIZED`: the
 * driver returns it for every call once it shut down at process exit (a thread still
 * allocating while another returns from main()), when whatever was being released is gone
 * with the process anyway; that is logged with `g_debug` only. Every warning of memres and its
 * plugins about a failed release goes through here, so that process exit is silent. Makes no
 * driver call. Thread-safe.
 *
 * Since: 1.2
 */
void
memres_cuda_warn_release_failure (const GError *error, const char *format, ...)
{
  g_autofree char *what = NULL;
  va_list args;

  g_return_if_fail (format != NULL);

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  if (error != NULL && g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED))
    g_debug ("%s: %s (the driver shut down: the process is exiting)", what, error->message);
  else
    g_warning ("%s: %s", what, error != NULL ? error->message : "failed without saying why");
}
