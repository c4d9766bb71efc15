/* snapshot-check.c: whether a JSON text `memres view` is given is a snapshot it can show: format
 * 1 (docs/snapshot.md) with its "layers" array, or the allocator shim's file of such snapshots
 * per device; then the members docs/snapshot.schema.json requires, each present once and of its
 * type, down to every layer, block, segment, hole and import (a layer {"kind": 5} is refused
 * here, not drawn as nonsense by the page's script), and every index a stack holds into "frames"
 * and a block into "stacks" inside them (the page's tooltip read past them). Members the schema
 * does not name are let through: format 1 grows without a new format. The first wrong value is
 * named by its JSON path ("layers[0].kind"). A walk over the text as json-check.c scans it;
 * nothing is built. */
#include "memres-tool.h"

#include <string.h>

/* ---- the schema's types ---------------------------------------------------------------------- */

typedef enum
{
  T_BYTES,            /* an integer from 0 to 2^64 - 1 */
  T_BYTES_OR_NULL,    /* the same, or null */
  T_DEVICE,           /* an integer >= -1 */
  T_FRACTION_OR_NULL, /* a number in [0, 1], or null */
  T_BOOL,
  T_STRING,
  T_STRING_OR_NULL,
  T_KIND,    /* a string [a-z][a-z0-9_]* */
  T_ADDRESS, /* a string 0x[0-9a-f]{1,16}: 64 bits */
  T_STREAM,  /* default, legacy, per-thread or an address */
  T_STATE,   /* used, free, pending, withheld or unused */
  T_DRIVER,  /* null or {free, total} */
  T_SUMMARY,
  T_LAYERS,   /* an array of at least one layer */
  T_SEGMENTS, /* arrays of objects */
  T_BLOCKS,
  T_RANGES,
  T_FIGURES,     /* an object of bytes */
  T_FRAMES,      /* an array of strings */
  T_STACKS,      /* an array of arrays of at least two integers >= 0 */
  T_FRAME_INDEX, /* a stack's element after its count: an index into "frames" */
  T_STACK_INDEX, /* a block's "stack": an index into "stacks" */
  /* the elements of those arrays */
  T_LAYER,
  T_SEGMENT,
  T_BLOCK,
  T_RANGE,
  T_STACK,
} Type;

typedef struct
{
  const char *name;
  Type type;
  gboolean required;
} Field;

static const Field document_fields[] = {
  { "memres_snapshot", T_BYTES, TRUE }, /* its value 1 is checked before */
  { "spec", T_STRING, TRUE },           { "time_us", T_BYTES, TRUE },
  { "oom_report", T_STRING, FALSE },    { "device", T_DEVICE, TRUE },
  { "driver", T_DRIVER, TRUE },         { "summary", T_SUMMARY, TRUE },
  { "layers", T_LAYERS, TRUE },         { "frames", T_FRAMES, FALSE },
  { "stacks", T_STACKS, FALSE },        { NULL },
};
static const Field driver_fields[] = {
  { "free", T_BYTES, TRUE },
  { "total", T_BYTES, TRUE },
  { NULL },
};
static const Field summary_fields[] = {
  { "reserved", T_BYTES_OR_NULL, TRUE },
  { "used", T_BYTES_OR_NULL, TRUE },
  { "cached", T_BYTES, TRUE },
  { "largest_free", T_BYTES_OR_NULL, TRUE },
  { "fragmentation", T_FRACTION_OR_NULL, TRUE },
  { NULL },
};
static const Field layer_fields[] = {
  { "position", T_BYTES, TRUE },
  { "kind", T_KIND, TRUE },
  { "spec", T_STRING, TRUE },
  { "adaptor", T_BOOL, TRUE },
  { "device", T_DEVICE, TRUE },
  { "own_stats", T_BOOL, TRUE },
  { "reserved", T_BYTES_OR_NULL, TRUE },
  { "used", T_BYTES_OR_NULL, TRUE },
  { "reserved_high", T_BYTES, FALSE },
  { "used_high", T_BYTES, FALSE },
  { "n_buffers", T_BYTES, FALSE },
  { "cached", T_BYTES, TRUE },
  { "described", T_BOOL, TRUE },
  { "complete", T_BOOL, TRUE },
  { "unseen", T_STRING_OR_NULL, TRUE },
  { "largest_free", T_BYTES_OR_NULL, TRUE },
  { "fragmentation", T_FRACTION_OR_NULL, TRUE },
  { "segments", T_SEGMENTS, TRUE },
  { "blocks", T_BLOCKS, TRUE },
  { "holes", T_RANGES, TRUE },
  { "imports", T_RANGES, TRUE },
  { "figures", T_FIGURES, TRUE },
  { NULL },
};
static const Field segment_fields[] = {
  { "address", T_ADDRESS, TRUE },
  { "size", T_BYTES, TRUE },
  { "device", T_DEVICE, TRUE },
  { "tag", T_STRING, TRUE },
  { NULL },
};
static const Field block_fields[] = {
  { "address", T_ADDRESS, TRUE },
  { "size", T_BYTES, TRUE },
  { "stream", T_STREAM, TRUE },
  { "tag", T_STRING, TRUE },
  { "state", T_STATE, TRUE },
  { "stack", T_STACK_INDEX, FALSE },
  { NULL },
};
static const Field range_fields[] = {
  { "address", T_ADDRESS, TRUE },
  { "size", T_BYTES, TRUE },
  { NULL },
};

/* ---- the walk -------------------------------------------------------------------------------- */

typedef struct
{
  const char *shown; /* the input, printable */
  GString *path;     /* the JSON path of the value being checked */
  GError **error;
  gboolean failed; /* the first error is kept, the rest of the walk does nothing */
  /* the references between the document's tables, checked once it is walked (the tables come
   * after the layers that refer to them): the count of "frames" and "stacks", and the largest
   * index into each that a stack or a block holds, with its path (NULL: none) */
  guint n_frames, n_stacks;
  guint64 frame_max, stack_max;
  char *frame_path, *stack_path;
} Walk;

static void walk_value (Walk *w, Type type, const char *value, gsize len);

static gboolean
refuse (Walk *w, const char *what, const char *value, gsize len)
{
  if (!w->failed)
    {
      g_autofree char *text = value != NULL ? g_strndup (value, MIN (len, 1024)) : NULL;
      g_autofree char *shown_value = text != NULL ? memres_tool_show_input (text) : NULL;

      g_set_error (w->error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: not a snapshot of format 1: %s%s%s%s (docs/snapshot.schema.json)", w->shown,
                   w->path->str, value != NULL ? ": " : "", value != NULL ? shown_value : "", what);
      w->failed = TRUE;
    }
  return FALSE;
}

/* A string's text between its quotes, escapes not undone; NULL for another value. */
static gboolean
string_body (const char *value, gsize len, const char **body, gsize *body_len)
{
  if (len < 2 || value[0] != '"')
    return FALSE;
  *body = value + 1;
  *body_len = len - 2;
  return TRUE;
}

static gboolean
is_integer (const char *value, gsize len, gboolean negative_one)
{
  gsize i = 0;

  if (len > 0 && value[0] == '-')
    return negative_one && len == 2 && value[1] == '1';
  for (; i < len; i++)
    if (!g_ascii_isdigit (value[i]))
      return FALSE;
  return len > 0;
}

static gboolean
is_fraction (const char *value, gsize len)
{
  g_autofree char *text = NULL;
  double d;

  if (len == 0 || !(g_ascii_isdigit (value[0])))
    return FALSE;
  text = g_strndup (value, len);
  d = g_ascii_strtod (text, NULL);
  return d >= 0 && d <= 1;
}

/* An integer of at most 64 bits (@value is_integer()'s, not negative): past 2^64 - 1 it is no
 * count of bytes memres could have written (the page's numbers would be wrong). */
static gboolean
fits_64_bits (const char *value, gsize len)
{
  g_autofree char *text = g_strndup (value, len);

  return g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT64, NULL, NULL);
}

/* 0x and 1 to 16 lowercase hex digits: a 64-bit address (a log's Pointer past 2^64 is refused
 * alike) */
static gboolean
is_address (const char *body, gsize len)
{
  if (len < 3 || len > 18 || body[0] != '0' || body[1] != 'x')
    return FALSE;
  for (gsize i = 2; i < len; i++)
    if (!g_ascii_isdigit (body[i]) && !(body[i] >= 'a' && body[i] <= 'f'))
      return FALSE;
  return TRUE;
}

static gboolean
is_kind (const char *body, gsize len)
{
  if (len == 0 || !g_ascii_islower (body[0]))
    return FALSE;
  for (gsize i = 1; i < len; i++)
    if (!g_ascii_islower (body[i]) && !g_ascii_isdigit (body[i]) && body[i] != '_')
      return FALSE;
  return TRUE;
}

static gboolean
is_word (const char *body, gsize len, const char *const *words)
{
  for (; *words != NULL; words++)
    if (strlen (*words) == len && memcmp (*words, body, len) == 0)
      return TRUE;
  return FALSE;
}

typedef struct
{
  Walk *w;
  const Field *fields;
  guint64 seen; /* a bit per field */
} ObjectWalk;

static void
on_field (const char *name, gsize name_len, const char *value, gsize value_len, gpointer data)
{
  ObjectWalk *o = data;
  gsize at = o->w->path->len;

  if (o->w->failed)
    return;
  for (guint i = 0; o->fields[i].name != NULL; i++)
    if (strlen (o->fields[i].name) == name_len && memcmp (o->fields[i].name, name, name_len) == 0)
      {
        g_string_append_printf (o->w->path, "%s%s", at > 0 ? "." : "", o->fields[i].name);
        if (o->seen & (G_GUINT64_CONSTANT (1) << i))
          refuse (o->w, " given twice", NULL, 0);
        o->seen |= G_GUINT64_CONSTANT (1) << i;
        walk_value (o->w, o->fields[i].type, value, value_len);
        g_string_truncate (o->w->path, at);
        return;
      }
}

static void
walk_object (Walk *w, const Field *fields, const char *value, gsize len)
{
  ObjectWalk o = { w, fields, 0 };
  gsize at = w->path->len;

  if (!memres_tool_json_members (value, len, on_field, &o))
    {
      refuse (w, " is not an object", value, len);
      return;
    }
  for (guint i = 0; !w->failed && fields[i].name != NULL; i++)
    if (fields[i].required && !(o.seen & (G_GUINT64_CONSTANT (1) << i)))
      {
        g_string_append_printf (w->path, "%s%s", at > 0 ? "." : "", fields[i].name);
        refuse (w, " is missing", NULL, 0);
        g_string_truncate (w->path, at);
      }
}

typedef struct
{
  Walk *w;
  Type first; /* the first element's type */
  Type type;  /* the others' */
} ArrayWalk;

static void
on_element (guint index, const char *value, gsize len, gpointer data)
{
  ArrayWalk *a = data;
  gsize at = a->w->path->len;

  if (a->w->failed)
    return;
  g_string_append_printf (a->w->path, "[%u]", index);
  walk_value (a->w, index == 0 ? a->first : a->type, value, len);
  g_string_truncate (a->w->path, at);
}

/* an array whose first element is of type @first, the others of type @element */
static void
walk_array_first (Walk *w, Type first, Type element, const char *value, gsize len)
{
  ArrayWalk a = { w, first, element };

  if (!memres_tool_json_elements (value, len, on_element, &a))
    refuse (w, " is not an array", value, len);
}

static void
walk_array (Walk *w, Type element, const char *value, gsize len)
{
  walk_array_first (w, element, element, value, len);
}

/* An index into "frames" or "stacks" (@value an integer of 64 bits, checked): the largest so
 * far kept in @max, with its path in @path. */
static void
note_index (Walk *w, const char *value, gsize len, guint64 *max, char **path)
{
  g_autofree char *text = g_strndup (value, len);
  guint64 index = g_ascii_strtoull (text, NULL, 10);

  if (*path == NULL || index > *max)
    {
      *max = index;
      g_free (*path);
      *path = g_strdup (w->path->str);
    }
}

/* The references checked against the tables once the document is walked: an index past the
 * end of "frames" or "stacks" (or into one that is absent) is refused at its path. */
static void
check_references (Walk *w)
{
  const char *table = NULL;
  guint n = 0;
  guint64 index = 0;

  if (w->failed)
    return;
  if (w->frame_path != NULL && w->frame_max >= w->n_frames)
    {
      table = "frames";
      n = w->n_frames;
      index = w->frame_max;
      g_string_assign (w->path, w->frame_path);
    }
  else if (w->stack_path != NULL && w->stack_max >= w->n_stacks)
    {
      table = "stacks";
      n = w->n_stacks;
      index = w->stack_max;
      g_string_assign (w->path, w->stack_path);
    }
  if (table != NULL)
    {
      g_autofree char *value = g_strdup_printf ("%" G_GUINT64_FORMAT, index);
      g_autofree char *what
          = g_strdup_printf (" is not an index into %s (the snapshot has %u)", table, n);

      refuse (w, what, value, strlen (value));
    }
}

/* T_FIGURES: every member bytes */
static void
on_figure (const char *name, gsize name_len, const char *value, gsize value_len, gpointer data)
{
  Walk *w = data;
  gsize at = w->path->len;

  if (w->failed)
    return;
  g_string_append_c (w->path, '.');
  g_string_append_len (w->path, name, (gssize) name_len);
  walk_value (w, T_BYTES, value, value_len);
  g_string_truncate (w->path, at);
}

/* counts an array's elements */
static void
on_count (guint index, const char *value, gsize len, gpointer data)
{
  guint *n = data;

  (void) index;
  (void) value;
  (void) len;
  (*n)++;
}

static void
walk_value (Walk *w, Type type, const char *value, gsize len)
{
  static const char *const streams[] = { "default", "legacy", "per-thread", NULL };
  static const char *const states[] = { "used", "free", "pending", "withheld", "unused", NULL };
  gboolean null = len == 4 && memcmp (value, "null", 4) == 0;
  const char *body;
  gsize body_len;

  switch (type)
    {
    case T_BYTES:
    case T_BYTES_OR_NULL:
      if (!((is_integer (value, len, FALSE) && fits_64_bits (value, len))
            || (type == T_BYTES_OR_NULL && null)))
        refuse (w,
                type == T_BYTES ? " is not an integer from 0 to 2^64 - 1"
                                : " is neither an integer from 0 to 2^64 - 1 nor null",
                value, len);
      break;
    case T_DEVICE:
      if (!is_integer (value, len, TRUE))
        refuse (w, " is not a device (an integer >= -1)", value, len);
      break;
    case T_FRACTION_OR_NULL:
      if (!null && !is_fraction (value, len))
        refuse (w, " is neither a number in [0, 1] nor null", value, len);
      break;
    case T_BOOL:
      if (!(len == 4 && memcmp (value, "true", 4) == 0)
          && !(len == 5 && memcmp (value, "false", 5) == 0))
        refuse (w, " is not true or false", value, len);
      break;
    case T_STRING:
    case T_STRING_OR_NULL:
      if (!string_body (value, len, &body, &body_len) && !(type == T_STRING_OR_NULL && null))
        refuse (w, type == T_STRING ? " is not a string" : " is neither a string nor null", value,
                len);
      break;
    case T_KIND:
      if (!string_body (value, len, &body, &body_len) || !is_kind (body, body_len))
        refuse (w, " is not a kind's name (a string [a-z][a-z0-9_]*)", value, len);
      break;
    case T_ADDRESS:
      if (!string_body (value, len, &body, &body_len) || !is_address (body, body_len))
        refuse (w, " is not an address (a string 0x and 1 to 16 lowercase hex digits)", value, len);
      break;
    case T_STREAM:
      if (!string_body (value, len, &body, &body_len)
          || !(is_word (body, body_len, streams) || is_address (body, body_len)))
        refuse (w, " is not a stream (default, legacy, per-thread or 0x and 1 to 16 hex digits)",
                value, len);
      break;
    case T_STATE:
      if (!string_body (value, len, &body, &body_len) || !is_word (body, body_len, states))
        refuse (w, " is not a block's state (used, free, pending, withheld or unused)", value, len);
      break;
    case T_DRIVER:
      if (!null)
        walk_object (w, driver_fields, value, len);
      break;
    case T_SUMMARY:
      walk_object (w, summary_fields, value, len);
      break;
    case T_LAYERS:
      {
        guint n = 0;

        if (memres_tool_json_elements (value, len, on_count, &n) && n == 0)
          refuse (w, " is empty (a snapshot has at least one layer)", NULL, 0);
        else
          walk_array (w, T_LAYER, value, len);
      }
      break;
    case T_LAYER:
      walk_object (w, layer_fields, value, len);
      break;
    case T_SEGMENTS:
      walk_array (w, T_SEGMENT, value, len);
      break;
    case T_SEGMENT:
      walk_object (w, segment_fields, value, len);
      break;
    case T_BLOCKS:
      walk_array (w, T_BLOCK, value, len);
      break;
    case T_BLOCK:
      walk_object (w, block_fields, value, len);
      break;
    case T_RANGES:
      walk_array (w, T_RANGE, value, len);
      break;
    case T_RANGE:
      walk_object (w, range_fields, value, len);
      break;
    case T_FIGURES:
      if (!memres_tool_json_members (value, len, on_figure, w))
        refuse (w, " is not an object", value, len);
      break;
    case T_FRAMES:
      w->n_frames = 0;
      memres_tool_json_elements (value, len, on_count, &w->n_frames);
      walk_array (w, T_STRING, value, len);
      break;
    case T_STACKS:
      w->n_stacks = 0;
      memres_tool_json_elements (value, len, on_count, &w->n_stacks);
      walk_array (w, T_STACK, value, len);
      break;
    case T_FRAME_INDEX:
    case T_STACK_INDEX:
      walk_value (w, T_BYTES, value, len);
      if (!w->failed && type == T_FRAME_INDEX)
        note_index (w, value, len, &w->frame_max, &w->frame_path);
      else if (!w->failed)
        note_index (w, value, len, &w->stack_max, &w->stack_path);
      break;
    case T_STACK:
      {
        guint n = 0;

        if (!memres_tool_json_elements (value, len, on_count, &n) || n < 2)
          refuse (w, " is not a stack (an array of a count and at least one frame's index)", value,
                  len);
        else
          walk_array_first (w, T_BYTES, T_FRAME_INDEX, value, len);
      }
      break;
    }
}

/* one snapshot of format 1 whose "layers" member is an array: the schema's members */
static gboolean
check_document (const char *shown, const char *path, const char *text, gsize length, GError **error)
{
  Walk w = { shown, g_string_new (path), error, FALSE, 0 };
  gboolean ok;

  walk_object (&w, document_fields, text, length);
  check_references (&w);
  ok = !w.failed;
  g_string_free (w.path, TRUE);
  g_free (w.frame_path);
  g_free (w.stack_path);
  return ok;
}

/* each member of the shim's "devices": a snapshot (its format checked before) */
static void
check_device (const char *name, gsize name_len, const char *value, gsize value_len, gpointer data)
{
  Walk *w = data;
  g_autofree char *path = NULL;

  if (w->failed)
    return;
  path = g_strdup_printf ("%s.%.*s", w->path->str, (int) name_len, name);
  w->failed = !check_document (w->shown, path, value, value_len, w->error);
}

/* ---- what a snapshot is ---------------------------------------------------------------------- */

/* The members of an object a snapshot check looks at: the values of "memres_snapshot",
 * "memres_allocator_snapshot" and "devices", as the text has them (NULL: absent). */
typedef struct
{
  char *format, *allocator_format, *devices;
  gboolean has_layers; /* a member "layers" that is an array */
  guint n_bad;         /* devices: members whose value is no snapshot of format 1 */
} Members;

static void
on_member (const char *name, gsize name_len, const char *value, gsize value_len, gpointer data)
{
  Members *m = data;
  char **slot = NULL;

  if (name_len == strlen ("layers") && memcmp (name, "layers", name_len) == 0 && value_len > 0
      && value[0] == '[')
    m->has_layers = TRUE;
  if (name_len == strlen ("memres_snapshot") && memcmp (name, "memres_snapshot", name_len) == 0)
    slot = &m->format;
  else if (name_len == strlen ("memres_allocator_snapshot")
           && memcmp (name, "memres_allocator_snapshot", name_len) == 0)
    slot = &m->allocator_format;
  else if (name_len == strlen ("devices") && memcmp (name, "devices", name_len) == 0)
    slot = &m->devices;
  if (slot != NULL && *slot == NULL)
    *slot = g_strndup (value, value_len);
}

static void
members_clear (Members *m)
{
  g_free (m->format);
  g_free (m->allocator_format);
  g_free (m->devices);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Members, members_clear)

/* each member of "devices": a snapshot of format 1 */
static void
on_device (const char *name, gsize name_len, const char *value, gsize value_len, gpointer data)
{
  Members *outer = data;
  Members m = { 0 };

  if (!memres_tool_json_members (value, value_len, on_member, &m) || g_strcmp0 (m.format, "1") != 0
      || !m.has_layers)
    outer->n_bad++;
  members_clear (&m);
}

/* A snapshot: one JSON object whose member "memres_snapshot" is 1 (format 1, docs/snapshot.md)
 * with a "layers" array,
 * or the allocator shim's file: "memres_allocator_snapshot" 1 and "devices", an object of
 * such snapshots. Any other JSON, other formats among it, is refused naming what it lacks. */
gboolean
memres_tool_check_snapshot (const char *path, const char *text, gsize length, GError **error)
{
  g_autofree char *shown = memres_tool_show_input (path);
  g_auto (Members) m = { 0 };
  const char *why;
  gsize offset;

  if (!memres_tool_json_check (text, length, &offset, &why))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: not a snapshot: invalid JSON at byte %" G_GSIZE_FORMAT ": %s", shown,
                   offset, why);
      return FALSE;
    }
  memres_tool_json_members (text, length, on_member, &m);
  if (m.format != NULL || m.allocator_format == NULL)
    {
      g_autofree char *format = m.format != NULL ? memres_tool_show_input (m.format) : NULL;

      if (g_strcmp0 (m.format, "1") == 0 && m.has_layers)
        return check_document (shown, "", text, length, error);
      if (g_strcmp0 (m.format, "1") == 0)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "%s: a snapshot without its \"layers\" array (docs/snapshot.md)", shown);
          return FALSE;
        }
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   m.format == NULL
                       ? "%s: JSON but not a snapshot (no top-level member \"memres_snapshot\": "
                         "docs/snapshot.md)%s"
                       : "%s: a snapshot of format %s: this memres reads format 1 "
                         "(\"memres_snapshot\": 1, docs/snapshot.md)",
                   shown, m.format == NULL ? "" : format);
      return FALSE;
    }
  if (strcmp (m.allocator_format, "1") != 0 || m.devices == NULL
      || !memres_tool_json_members (m.devices, strlen (m.devices), on_device, &m) || m.n_bad > 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: not a snapshot file of the allocator shim this memres reads "
                   "(\"memres_allocator_snapshot\": 1 and \"devices\", an object of snapshots of "
                   "format 1: docs/snapshot.md)",
                   shown);
      return FALSE;
    }
  {
    Walk w = { shown, g_string_new ("devices"), error, FALSE, 0 };

    memres_tool_json_members (m.devices, strlen (m.devices), check_device, &w);
    g_string_free (w.path, TRUE);
    return !w.failed;
  }
}
