/* memres - CUDA memory resources
 * fabric.h: handle_type=fabric, the same for every kind that offers it (`vmm`, `arena`, `ipc`):
 * the option `fabric_fallback`, the probe at creation of kinds that create physical memory
 * (fabric_probe_memory(): one allocation created with CU_MEM_HANDLE_TYPE_FABRIC, exported,
 * released; `ipc` probes so too before it creates its pool, whose export then also counts), and the verdict on a probe
 * (fabric_settle()): granted; refused with CUDA_ERROR_NOT_PERMITTED (no IMEX channel: the H200
 * machine) and fallen back to POSIX-fd handles where fabric_fallback=posix_fd; else the error,
 * which names the missing channel and the option; and the refusal of chunks of the other handle
 * type (fabric_check_handle_type()). Header-only, as alloc-error.h: no kind pastes any of it
 * (docs/distributed.md). */
#pragma once

#include <memres/memres-plugin.h>

/* The `fabric_fallback` entry of a kind's option table. */
#define FABRIC_FALLBACK_OPTION                                                                     \
  {                                                                                                \
    "fabric_fallback", MEMRES_OPTION_ENUM, "fail",                                                 \
        "handle_type=fabric where the driver refuses fabric handles (no IMEX channel): fail, or "  \
        "use posix_fd handles (one host) instead",                                                 \
        (const char *const[]){ "fail", "posix_fd", NULL }, 0, 0                                    \
  }

/* The probe of a kind that creates physical memory: one allocation of @size bytes (a multiple of
 * the granularity of @prop, whose requestedHandleTypes is CU_MEM_HANDLE_TYPE_FABRIC) created
 * (cuMemCreate), exported as a fabric handle (cuMemExportToShareableHandle) and released
 * (cuMemRelease; a failed release is a warning, as the kinds' rollbacks make it). Returns the
 * first failing call's result of the first two (*@call its name), or CUDA_SUCCESS. */
static inline CUresult
fabric_probe_memory (const MemresCudaDriver *drv, const CUmemAllocationProp *prop, gsize size,
                     const char **call)
{
  CUmemGenericAllocationHandle handle;
  CUmemFabricHandle fabric;
  CUresult res;

  *call = "cuMemCreate";
  res = drv->cuMemCreate (&handle, size, prop, 0);
  if (res != CUDA_SUCCESS)
    return res;
  *call = "cuMemExportToShareableHandle";
  res = drv->cuMemExportToShareableHandle (&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0);
  if (drv->cuMemRelease (handle) != CUDA_SUCCESS)
    g_warning ("handle_type=fabric: cuMemRelease failed after the probe of fabric handles");
  return res;
}

/* The verdict on @kind's probe of fabric handles on @device: @probe_error (transfer full) is
 * NULL where the probe succeeded (TRUE, *@fabric TRUE), else the probe's error as
 * memres_cuda_set_error() made it. Refused with CUDA_ERROR_NOT_PERMITTED and the option
 * `fabric_fallback` is `posix_fd`: TRUE, *@fabric FALSE (the kind then makes POSIX-fd handles,
 * and says so: no %MEMRES_MEMORY_FABRIC_HANDLES). Otherwise FALSE with @probe_error in @error,
 * prefixed: for CUDA_ERROR_NOT_PERMITTED with the missing IMEX channel and the option that
 * falls back, for another failure with "probing fabric handles". */
static inline gboolean
fabric_settle (const char *kind, gint device, const MemresOptions *options, GError *probe_error,
               gboolean *fabric, GError **error)
{
  gboolean refused = g_error_matches (probe_error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED);

  *fabric = probe_error == NULL;
  if (probe_error == NULL)
    return TRUE;
  if (refused
      && g_strcmp0 (memres_options_get_string (options, "fabric_fallback"), "posix_fd") == 0)
    {
      g_error_free (probe_error);
      return TRUE;
    }
  g_propagate_error (error, probe_error);
  if (refused)
    g_prefix_error (error,
                    "%s: handle_type=fabric: device %d may not share fabric handles: this process "
                    "has no IMEX channel (/dev/nvidia-caps-imex-channels/channelN, given by the "
                    "nvidia-imex service of a multi-node NVLink domain); set "
                    "fabric_fallback=posix_fd to share within this host instead: ",
                    kind, device);
  else
    g_prefix_error (error, "%s: handle_type=fabric: probing fabric handles on device %d: ", kind,
                    device);
  return FALSE;
}

/* Whether a resource of @kind whose exportable memory is made with @have handles exports and
 * imports chunks of @type handles (the export_chunks/import_chunks slots: POSIX fds; their
 * fabric pair: fabric handles); %MEMRES_ERROR_NOT_SUPPORTED naming the option otherwise (@what:
 * "export" or "import"). */
static inline gboolean
fabric_check_handle_type (const char *kind, CUmemAllocationHandleType have,
                          CUmemAllocationHandleType type, const char *what, GError **error)
{
  gboolean fabric = type == CU_MEM_HANDLE_TYPE_FABRIC;

  if (have == type)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "%s: only a resource created with handle_type=%s%s can %s buffers of other "
               "processes as %s",
               kind, fabric ? "fabric" : "posix_fd",
               fabric ? " (where the driver grants fabric handles)" : "", what,
               fabric ? "fabric handles" : "POSIX fds");
  return FALSE;
}
