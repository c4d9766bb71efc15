/* abi_small: a descriptor whose struct_size is too small to hold the fields of its ABI version
 * (MEMRES_PLUGIN_ERROR_ABI_MISMATCH); the loader must read nothing past struct_size. */
#include "common.h"

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abi_small_get_desc (void);

const MemresPluginDesc *
memres_plugin_abi_small_get_desc (void)
{
  /* Only the three version fields exist: a loader reading further reads past the object. */
  static const guint32 desc[3] __attribute__ ((aligned (8)))
  = { MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MINOR, 3 * sizeof (guint32) };
  return (const MemresPluginDesc *) desc;
}
