/* memres - CUDA memory resources
 * spec.h: from a spec to its layers: one layer's grammar and the value parsers (spec.c), options
 * checked against a schema (options.c), stacks of layers (stack.c) and named ones from the
 * config file (config.c). Included through memres-private.h. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "spec.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* spec.c: kind names and option keys */
gboolean _memres_kind_name_is_valid (const char *name);
gboolean _memres_kind_name_check (const char *name, GError **error);
gboolean _memres_key_is_valid (const char *name);
/* stack.c: stacks of layers, `a>b>c`, at most MEMRES_STACK_MAX_LAYERS, and `@name` layers
 * from the config file (config.c).
 * _memres_stack_split(): @spec split at every `>` not escaped by a backslash, `@name` layers
 *   replaced by their definitions (@expand_names; else kept), into @layers (strings as
 *   written, escapes kept; in order, the first what the application calls), and into @origins
 *   (when not NULL) for each layer the `@name` it came from, with its definition and file
 *   (NULL for a layer the application wrote), for errors. Errors:
 *   MEMRES_ERROR_INVALID_ARGUMENT (an empty layer, `>>`, a trailing `>`, a lone trailing `\`,
 *   too many layers, a cycle of names), those of _memres_config_lookup().
 * _memres_stack_check_layer(): the rule of @kind at @position (0-based) of @n_layers layers:
 *   every layer but the last an adaptor, the last not. MEMRES_ERROR_INVALID_ARGUMENT.
 * memres_resource_new() is stack.c's too. */
#define MEMRES_STACK_MAX_LAYERS 16
gboolean _memres_stack_split (const char *spec, gboolean expand_names, GPtrArray **layers,
                              GPtrArray **origins, GError **error);
gboolean _memres_stack_check_layer (MemresKind *kind, guint position, guint n_layers,
                                    GError **error);

/* config.c: named resources. _memres_config_lookup(): the spec of @name (without the `@`),
 * transfer full, with where it was defined in @origin (transfer full, may be NULL). Errors:
 * MEMRES_ERROR_INVALID_ARGUMENT (@name is not [A-Za-z0-9_.-]+: the file is not read),
 * MEMRES_ERROR_NOT_FOUND (no such name: the message lists the defined ones), those of reading
 * the file (MEMRES_ERROR_INVALID_ARGUMENT naming file, line and key for a malformed one;
 * G_FILE_ERROR with g_file_error_from_errno()'s code for one that cannot be opened or read, a
 * MEMRES_CONFIG that does not exist among them, or that is not a regular file). */
char *_memres_config_lookup (const char *name, char **origin, GError **error);

/* spec.c */
gboolean _memres_set_spec_error (GError **error, const char *spec, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
gboolean _memres_spec_parse (const char *spec, char **kind, GPtrArray **keys, GPtrArray **values,
                             GError **error);
GStrv _memres_split (const char *text, char separator, gboolean escapes);
/* @text with `\`, `,` and `>` escaped by a backslash, as values are written in specs;
 * _memres_unescape(): the reverse on the first @len bytes of @text (a lone trailing backslash is
 * kept). */
char *_memres_escape_value (const char *text);
char *_memres_unescape (const char *text, gsize len);
gboolean _memres_parse_size (const char *text, guint64 *bytes, GError **error);
gboolean _memres_parse_bool (const char *text, gboolean *value, GError **error);
gboolean _memres_parse_int (const char *text, gint64 min, gint64 max, gint64 *value,
                            GError **error);
gboolean _memres_parse_option_value (const MemresOptionSpec *spec, const char *text,
                                     GError **error);

/* options.c: validate key/values against @kind's schema; errors name the key and list what is
 * valid. */
MemresOptions *_memres_options_new (MemresKind *kind, GPtrArray *keys, GPtrArray *values,
                                    GError **error);
void _memres_options_free (MemresOptions *options);
char *_memres_options_to_string (const MemresOptions *options);

G_END_DECLS
