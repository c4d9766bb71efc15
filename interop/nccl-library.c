/* memres - CUDA memory resources
 * nccl-library.c: NCCL opened at run time, as the core opens the CUDA driver: dlopen() of the
 * file named by MEMRES_NCCL_LIBRARY, else libnccl.so.2, once per process, its entry points
 * resolved by name; and the GError of a failed NCCL call (MEMRES_NCCL_ERROR). Part of libmemres
 * on the public API only (public_api_sources), beside the rest of memres-nccl.h (nccl.c). */
#include "nccl-private.h"

#include <dlfcn.h>

static NcclLibrary library;
static GError *library_error; /* set once, when NCCL cannot be used */

/**
 * memres_nccl_error_quark:
 *
 * The quark of the %MEMRES_NCCL_ERROR domain (codes: `ncclResult_t` values). Thread-safe.
 *
 * Returns: the quark
 *
 * Since: 2.0
 */
G_DEFINE_QUARK (memres - nccl - error - quark, memres_nccl_error)

static gpointer
load_library (gpointer unused)
{
  const char *env = g_getenv ("MEMRES_NCCL_LIBRARY");
  const char *path = env != NULL && env[0] != '\0' ? env : "libnccl.so.2";
  gpointer handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  int (*get_version) (int *) = NULL;
  const char *missing = NULL;

  if (handle == NULL)
    {
      const char *why = dlerror ();

      g_set_error (&library_error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "NCCL is not available: cannot open %s: %s (install NCCL, or set "
                   "MEMRES_NCCL_LIBRARY to the path of libnccl.so.2)",
                   path, why != NULL ? why : "dlopen failed");
      return NULL;
    }
#define RESOLVE(field, name)                                                                       \
  do                                                                                               \
    {                                                                                              \
      *(gpointer *) &library.field = dlsym (handle, name);                                         \
      if (library.field == NULL && missing == NULL)                                                \
        missing = name;                                                                            \
    }                                                                                              \
  while (0)
  RESOLVE (CommRegister, "ncclCommRegister");
  RESOLVE (CommDeregister, "ncclCommDeregister");
  RESOLVE (GetErrorString, "ncclGetErrorString");
#undef RESOLVE
  if (missing != NULL)
    {
      g_set_error (&library_error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "NCCL is not available: %s has no %s (NCCL 2.19 or later registers buffers)",
                   path, missing);
      memset (&library, 0, sizeof library);
      dlclose (handle);
      return NULL;
    }
  /* optional: windows came with NCCL 2.27, ncclGetLastError with 2.13 */
  *(gpointer *) &library.CommWindowRegister = dlsym (handle, "ncclCommWindowRegister");
  *(gpointer *) &library.CommWindowDeregister = dlsym (handle, "ncclCommWindowDeregister");
  if (library.CommWindowRegister == NULL || library.CommWindowDeregister == NULL)
    library.CommWindowRegister = NULL, library.CommWindowDeregister = NULL;
  *(gpointer *) &library.GetLastError = dlsym (handle, "ncclGetLastError");
  *(gpointer *) &get_version = dlsym (handle, "ncclGetVersion");
  if (get_version == NULL || get_version (&library.version) != 0)
    library.version = 0;
  return NULL; /* kept loaded for the process */
}

/* NCCL's entry points, loaded at the first call; NULL and @error set when NCCL cannot be used. */
const NcclLibrary *
_memres_nccl_library (GError **error)
{
  static GOnce once = G_ONCE_INIT;

  g_once (&once, load_library, NULL);
  if (library_error != NULL)
    {
      g_propagate_error (error, g_error_copy (library_error));
      return NULL;
    }
  return &library;
}

/* The error of NCCL @call that returned @r, on the range [@base, +@length) (@length 0: none). */
void
_memres_nccl_set_error (GError **error, const NcclLibrary *nccl, NcclResult r, gpointer comm,
                        const char *call, gconstpointer base, gsize length)
{
  const char *what = nccl->GetErrorString != NULL ? nccl->GetErrorString (r) : NULL;
  const char *last = nccl->GetLastError != NULL ? nccl->GetLastError (comm) : NULL;
  g_autofree char *range
      = length > 0 ? g_strdup_printf (" of [%p, +%" G_GSIZE_FORMAT ")", base, length) : NULL;

  g_set_error (error, MEMRES_NCCL_ERROR, r, "%s%s failed: %s (ncclResult_t %d)%s%s", call,
               range != NULL ? range : "", what != NULL ? what : "unknown error", r,
               last != NULL && last[0] != '\0' ? ": " : "",
               last != NULL && last[0] != '\0' ? last : "");
}

/**
 * memres_nccl_is_available:
 * @error: return location for a #GError
 *
 * Loads NCCL if this process has not yet: `dlopen()` of the file named by the environment
 * variable `MEMRES_NCCL_LIBRARY`, else of `libnccl.so.2` from the dynamic linker's search path
 * (PyTorch's wheel carries one in `site-packages/nvidia/nccl/lib`), once per process; later
 * calls answer from the first. memres has no build dependency on NCCL. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when the library cannot be opened or lacks
 * `ncclCommRegister`, `ncclCommDeregister` or `ncclGetErrorString` (the message names the file
 * and why).
 *
 * Returns: %TRUE when NCCL is loaded and registers buffers
 *
 * Since: 2.0
 */
gboolean
memres_nccl_is_available (GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
  return _memres_nccl_library (error) != NULL;
}
