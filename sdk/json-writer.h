/* memres - CUDA memory resources
 * json-writer.h: a small JSON writer, values appended to a GString with indentation. One copy
 * for the two programs that write JSON: libmemres (snapshots, core/snapshot.c) and the `memres`
 * command (tools/), each compiling json-writer.c into itself (libmemres does not export it). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  GString *str;
  guint depth;
  gboolean first; /* no value yet at the current depth */
} MemresJson;

void memres_json_init (MemresJson *json);
char *memres_json_finish (MemresJson *json); /* transfer full, ends with a newline */
void memres_json_begin_object (MemresJson *json, const char *key);
void memres_json_end_object (MemresJson *json);
void memres_json_begin_array (MemresJson *json, const char *key);
void memres_json_end_array (MemresJson *json);
void memres_json_string (MemresJson *json, const char *key, const char *value); /* NULL: null */
void memres_json_int (MemresJson *json, const char *key, gint64 value);
void memres_json_uint (MemresJson *json, const char *key, guint64 value);
void memres_json_bool (MemresJson *json, const char *key, gboolean value);
/* a finite @value with 6 significant digits; NaN and infinities as null */
void memres_json_double (MemresJson *json, const char *key, double value);
/* "0x" and @value in lower-case hex, as a string (addresses: JSON numbers lose bits past 2^53) */
void memres_json_hex (MemresJson *json, const char *key, guint64 value);
/* @text as a JSON string, quoted, appended to @str (invalid UTF-8 as \\xNN): for a document
 * written without the writer (memres trace's, one event a line). */
void memres_json_append_string (GString *str, const char *text);

G_END_DECLS
