/* memres - CUDA memory resources
 * errors.c: the three error domains. */
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
