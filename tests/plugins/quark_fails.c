/* quark_fails: makes a GQuark from one of its static strings (GLib keeps the pointer for the
 * life of the process), then fails its init. The module must stay mapped: a later
 * g_quark_to_string() of that quark reads the plugin's string. */
#include "common.h"

static const char quark_name[] = "memres-test-quark-of-a-failed-plugin";

static gboolean
plugin_init (MemresPlugin *plugin G_GNUC_UNUSED, GError **error)
{
  g_quark_from_static_string (quark_name);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "quark_fails fails on purpose");
  return FALSE;
}

MEMRES_PLUGIN_DEFINE (quark_fails, "a plugin that leaves a quark behind and fails", plugin_init)
