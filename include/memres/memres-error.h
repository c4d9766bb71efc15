/* memres - CUDA memory resources
 * memres-error.h: the three error domains, and the quoting of user input in messages. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <glib.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-error
 * @title: Errors
 * @short_description: the error domains of memres, and the quoting of user input in messages
 * @section_id: memres-memres-error
 *
 * Every function of memres that can fail takes a `GError **error` as its last argument (which may
 * be %NULL) and returns %FALSE, %NULL, 0 or -1 with @error set; what each function can set is
 * listed in its entry. The codes of a domain are only ever appended.
 *
 * - %MEMRES_ERROR (#MemresError): memres's own errors: bad arguments and spec strings, unknown
 *   kinds, unsupported operations, closed objects, no driver or no device, and
 *   %MEMRES_ERROR_OUT_OF_MEMORY, the one code every kind reports when memory cannot be had.
 * - %MEMRES_PLUGIN_ERROR (#MemresPluginError): the plugin loader.
 * - %MEMRES_CUDA_ERROR: a failed CUDA driver call; the code is the driver's `CUresult`.
 * - The domains of the other headers: %MEMRES_TAG_ERROR (memres-tags), %MEMRES_SLEEP_ERROR
 *   (memres-sleep) and %MEMRES_NCCL_ERROR (memres-nccl).
 *
 * memres_error_is_driver_absent() tells a machine without a CUDA driver from a driver that
 * cannot be used, so that a program can fall back to host memory:
 *
 * |[<!-- language="C" -->
 * g_autoptr (GError) error = NULL;
 * g_autoptr (MemresResource) mr = memres_resource_new ("dmr:device=0", &error);
 *
 * if (mr == NULL && memres_error_is_driver_absent (error))
 *   mr = memres_resource_new ("host", NULL);  // no CUDA driver here: host memory
 * ]|
 *
 * Error messages quote user input through memres_printable(), at most %MEMRES_INPUT_SHOWN_MAX
 * bytes of it. Everything here is thread-safe.
 */

/**
 * MEMRES_ERROR:
 *
 * Error domain of memres itself: bad arguments, unsupported operations, state errors.
 * Codes are #MemresError values.
 *
 * Since: 1.0
 */
#define MEMRES_ERROR (memres_error_quark ())

/**
 * MemresError:
 * @MEMRES_ERROR_FAILED: anything not covered below
 * @MEMRES_ERROR_INVALID_ARGUMENT: a bad spec string, option value, size or pattern
 * @MEMRES_ERROR_NOT_FOUND: no such kind, plugin or device
 * @MEMRES_ERROR_EXISTS: a kind of that name is already registered
 * @MEMRES_ERROR_NOT_SUPPORTED: the kind or the device cannot do this
 * @MEMRES_ERROR_OUT_OF_MEMORY: the allocation cannot be satisfied: the kind knows the size cannot
 *   be had, or the driver said `CUDA_ERROR_OUT_OF_MEMORY` (every kind and the core report that
 *   as this code, never as a %MEMRES_CUDA_ERROR, since 1.2: see memres_cuda_set_error())
 * @MEMRES_ERROR_CLOSED: the buffer (or resource) was closed
 * @MEMRES_ERROR_NO_DRIVER: no usable CUDA driver could be loaded
 * @MEMRES_ERROR_NO_DEVICE: the CUDA device does not exist
 * @MEMRES_ERROR_WRONG_DEVICE: the object belongs to another device
 * @MEMRES_ERROR_INVALID_DESCRIPTOR: an IPC handle or buffer descriptor failed validation
 * @MEMRES_ERROR_PERMISSION_DENIED: the peer process may not use this resource
 * @MEMRES_ERROR_FORKED: this process is the child of a fork() made after the CUDA driver was
 *   initialized: the driver, and every resource made before the fork that uses it, cannot be
 *   used here (host memory can). Since: 1.2
 *
 * The codes of the %MEMRES_ERROR domain: memres's own errors, as opposed to the plugin
 * loader's (%MEMRES_PLUGIN_ERROR) and the driver's (%MEMRES_CUDA_ERROR). Values are only
 * appended.
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_ERROR_FAILED,
  MEMRES_ERROR_INVALID_ARGUMENT,
  MEMRES_ERROR_NOT_FOUND,
  MEMRES_ERROR_EXISTS,
  MEMRES_ERROR_NOT_SUPPORTED,
  MEMRES_ERROR_OUT_OF_MEMORY,
  MEMRES_ERROR_CLOSED,
  MEMRES_ERROR_NO_DRIVER,
  MEMRES_ERROR_NO_DEVICE,
  MEMRES_ERROR_WRONG_DEVICE,
  MEMRES_ERROR_INVALID_DESCRIPTOR,
  MEMRES_ERROR_PERMISSION_DENIED,
  MEMRES_ERROR_FORKED,
} MemresError;

/**
 * MEMRES_PLUGIN_ERROR:
 *
 * Error domain of the plugin loader. Codes are #MemresPluginError values.
 *
 * Since: 1.0
 */
#define MEMRES_PLUGIN_ERROR (memres_plugin_error_quark ())

/**
 * MemresPluginError:
 * @MEMRES_PLUGIN_ERROR_MODULE: the shared module could not be opened
 * @MEMRES_PLUGIN_ERROR_SYMBOL: the module has no `memres_plugin_<name>_get_desc` entry point
 * @MEMRES_PLUGIN_ERROR_ABI_MISMATCH: the descriptor's ABI version is not one this core accepts
 * @MEMRES_PLUGIN_ERROR_NAME_MISMATCH: file name, symbol and descriptor name disagree
 * @MEMRES_PLUGIN_ERROR_INIT_FAILED: the plugin's init function failed
 *
 * The codes of the %MEMRES_PLUGIN_ERROR domain: why a plugin could not be loaded, reported by
 * the lookup of one of its kinds (memres_registry_lookup(), memres_resource_new()) and listed by
 * memres_registry_list_kinds_full(). Values are only appended.
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_PLUGIN_ERROR_MODULE,
  MEMRES_PLUGIN_ERROR_SYMBOL,
  MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
  MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
  MEMRES_PLUGIN_ERROR_INIT_FAILED,
} MemresPluginError;

/**
 * MEMRES_CUDA_ERROR:
 *
 * Error domain of CUDA driver failures. The error code is the `CUresult` value itself; the
 * message names the failing driver call, then cuGetErrorName() and cuGetErrorString().
 * `CUDA_ERROR_OUT_OF_MEMORY` is the one `CUresult` never reported in this domain: it is
 * %MEMRES_ERROR_OUT_OF_MEMORY, with the same message (since 1.2).
 *
 * Since: 1.0
 */
#define MEMRES_CUDA_ERROR (memres_cuda_error_quark ())

GQuark memres_error_quark (void);
GQuark memres_plugin_error_quark (void);
GQuark memres_cuda_error_quark (void);

/**
 * MEMRES_INPUT_SHOWN_MAX:
 *
 * The most bytes of one piece of user input (a spec, a kind name, an option value) that an
 * error message of memres quotes, through memres_printable().
 *
 * Since: 1.2
 */
#define MEMRES_INPUT_SHOWN_MAX 64

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-error. Since: 1.2 */
gboolean memres_error_is_driver_absent (const GError *error);
char *memres_printable (const char *text, gsize max_bytes);

G_END_DECLS
