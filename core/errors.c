/* memres - CUDA memory resources
 * errors.c: the three error domains, and what an error of the driver's load says. */
#include "memres-private.h"

/* clang-format off: the quark names contain dashes, which it would space out */
// clang-format off

/**
 * memres_error_quark:
 *
 * The quark of the %MEMRES_ERROR domain (codes: #MemresError). Thread-safe.
 *
 * Returns: the quark
 *
 * Since: 1.0
 */
G_DEFINE_QUARK (memres-error-quark, memres_error)

/**
 * memres_plugin_error_quark:
 *
 * The quark of the %MEMRES_PLUGIN_ERROR domain (codes: #MemresPluginError). Thread-safe.
 *
 * Returns: the quark
 *
 * Since: 1.0
 */
G_DEFINE_QUARK (memres-plugin-error-quark, memres_plugin_error)

/**
 * memres_cuda_error_quark:
 *
 * The quark of the %MEMRES_CUDA_ERROR domain (codes: `CUresult` values). Thread-safe.
 *
 * Returns: the quark
 *
 * Since: 1.0
 */
G_DEFINE_QUARK (memres-cuda-error-quark, memres_cuda_error)
// clang-format on

/**
 * memres_error_is_driver_absent:
 * @error: (nullable): a #GError, such as one set by memres_cuda_get_driver()
 *
 * Tells a CUDA driver that is not there from one that is there but cannot be used: %TRUE when
 * @error is %MEMRES_ERROR_NO_DRIVER because no driver library could be opened at all (none is
 * installed, or `MEMRES_CUDA_DRIVER` names a file that is missing, not a shared library, a
 * FIFO, a directory, a dangling link); %FALSE for the %MEMRES_ERROR_NO_DRIVER of a library
 * that opened but is not a CUDA driver, lacks an entry point or whose cuInit() failed, for
 * every other error, and for %NULL. Makes no driver call. Thread-safe.
 *
 * Returns: whether @error says that no CUDA driver library is present
 *
 * Since: 1.2
 */
gboolean
memres_error_is_driver_absent (const GError *error)
{
  return g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER)
         && g_str_has_prefix (error->message, MEMRES_NO_DRIVER_PREFIX);
}
