/* odd_strings: a plugin whose description, option doc, default and choices hold control
 * characters, a terminal escape and bytes that are not UTF-8: `memres kinds` must show them
 * escaped, and its --json output must stay valid JSON. */
#include "common.h"

static const char *const choices[] = { "a\x1b[2J", "b\xff", NULL };

static const MemresOptionSpec options[] = {
  { "label", MEMRES_OPTION_STRING, "x\x07y\xfe", "doc with a bell\x07 and \xc3( bad UTF-8", NULL, 0,
    0 },
  { "mode", MEMRES_OPTION_ENUM, NULL, "C1 control \xc2\x9b here", choices, 0, 0 },
};

static const MemresKindInfo kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "odd_strings",
  .description = "line one\nline two \x1b[31mred\x7f \xff\xfe end",
  .options = options,
  .n_options = G_N_ELEMENTS (options),
  .ops = &tp_ops,
};

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_DEFINE (odd_strings, "odd strings \x1b]0;title\x07 \xff", plugin_init)
