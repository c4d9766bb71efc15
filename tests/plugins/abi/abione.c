/* libmemres-abione.so: a plugin as built against the headers of ABI 1.2, the last minor of the
 * previous major: its ELF note and its descriptor say 1.2. The loader must refuse it with
 * MEMRES_PLUGIN_ERROR_ABI_MISMATCH from the note, before the module is opened (its constructor
 * and its init never run). */
#include "abi-kind.h"

#include <stdlib.h>

__attribute__ ((constructor)) static void
abione_constructor (void)
{
  setenv ("MEMRES_TEST_CONSTRUCTOR_RAN", "abione", 1);
}

static gboolean
abione_init (MemresPlugin *plugin, GError **error)
{
  g_error ("the init of a plugin built for ABI 1.2 must not run");
  return FALSE;
}

/* What MEMRES_PLUGIN_DEFINE() of the 1.2 headers put in the file (the note's layout is the same
 * in every major). */
__attribute__ ((section (".note.memres"), used,
                aligned (4))) static const MemresPluginNote abione_note
    = {
        7, 40, MEMRES_PLUGIN_NOTE_TYPE, "memres", 1, 2, "abione",
      };

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abione_get_desc (void);

const MemresPluginDesc *
memres_plugin_abione_get_desc (void)
{
  static const MemresPluginDesc desc = {
    .abi_major = 1,
    .abi_minor = 2,
    .struct_size = sizeof (MemresPluginDesc),
    .name = "abione",
    .description = "built for plugin ABI 1.2",
    .init = abione_init,
  };

  return &desc;
}
