/* note_new: MEMRES_PLUGIN_DEFINE with headers of a newer ABI minor, so its ELF note says so:
 * refused with MEMRES_PLUGIN_ERROR_ABI_MISMATCH from the note, before the module is opened.
 * Its ELF constructor sets MEMRES_TEST_CONSTRUCTOR_RAN: it must never run. */
#include "common.h"

#include <stdlib.h>

__attribute__ ((constructor)) static void
note_new_constructor (void)
{
  setenv ("MEMRES_TEST_CONSTRUCTOR_RAN", "note_new", 1);
}

static const MemresKindInfo kind = TP_KIND_INFO ("note_new");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

#undef MEMRES_PLUGIN_ABI_MINOR
#define MEMRES_PLUGIN_ABI_MINOR 99
MEMRES_PLUGIN_DEFINE (note_new, "built for plugin ABI 2.99", plugin_init)
