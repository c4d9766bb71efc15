/* note_name: the file is libmemres-note_name.so, but MEMRES_PLUGIN_DEFINE names it
 * "something_else": refused with MEMRES_PLUGIN_ERROR_NAME_MISMATCH from its ELF note, before the
 * module is opened. Its ELF constructor sets MEMRES_TEST_CONSTRUCTOR_RAN: it must never run. */
#include "common.h"

#include <stdlib.h>

__attribute__ ((constructor)) static void
note_name_constructor (void)
{
  setenv ("MEMRES_TEST_CONSTRUCTOR_RAN", "note_name", 1);
}

static const MemresKindInfo kind = TP_KIND_INFO ("note_name");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_DEFINE (something_else, "names itself something_else", plugin_init)
