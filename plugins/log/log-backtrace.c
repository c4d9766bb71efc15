/* memres - CUDA memory resources
 * log-backtrace.c: the `log` adaptor's Backtrace column (`backtrace=true`): the call stack of
 * the allocation a line is for, captured with glibc's backtrace(), memres's own frames left out
 * (every frame up to the outermost one in libmemres or in this plugin, sdk/frames.h: the stack
 * starts at the caller of memres_resource_allocate()), at most LOG_BACKTRACE_FRAMES frames, each
 * symbolized as glibc's backtrace_symbols() writes it ("object(function+0xoffset) [0xaddress]") and
 * cut at LOG_FRAME_MAX bytes; innermost first, separated by ';', with '%', ',', ';', '"' and the
 * control bytes of a frame written %XX (two upper-case hex digits), so that the field holds no
 * comma nor quote (a CSV reader takes it as it is: RFC 4180 quotes only the Tag) and a reader
 * splits it at every ';' (tools/log-csv.c reads it back). A frame's text is kept by its address,
 * process-wide, once symbolized (backtrace_symbols() looks each frame's symbol up in its object's
 * table: most of the cost), up to CACHE_MAX frames; the table is emptied when an object was
 * unloaded since it was filled (dl_iterate_phdr()'s count of unloads), so that no text outlives its
 * object. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "log-backtrace.h"

#include <execinfo.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "../../sdk/frames.h"

/* frames captured: memres's own (a stack of adaptors: a few each) and the caller's */
#define CAPTURE_MAX 64
#define CACHE_MAX   65536

/* the code of libmemres and of this plugin, found once */
static const MemresFrames *
own_frames (void)
{
  static MemresFrames frames;
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      /* a function of libmemres and one of this plugin: the objects they are in */
      const gconstpointer anchors[]
          = { (gconstpointer) memres_upstream_allocate, (gconstpointer) _log_backtrace };

      memres_frames_init (&frames, anchors, G_N_ELEMENTS (anchors));
      g_once_init_leave (&once, 1);
    }
  return &frames;
}

static void
append_frame (GString *out, const char *text)
{
  gsize len = strlen (text);

  if (len > LOG_FRAME_MAX) /* cut on a character's first byte */
    {
      len = LOG_FRAME_MAX;
      while (len > 0 && ((guchar) text[len] & 0xc0) == 0x80)
        len--;
    }
  for (gsize i = 0; i < len; i++)
    {
      guchar c = (guchar) text[i];

      if (c == '%' || c == ',' || c == ';' || c == '"' || c < 0x20 || c == 0x7f)
        g_string_append_printf (out, "%%%02X", c);
      else
        g_string_append_c (out, (char) c);
    }
}

/* the frames' texts, escaped, by address (gpointer -> char*, owned), under cache_lock */
static GMutex cache_lock;
static GHashTable *cache;
static unsigned long long cache_unloads;

static int
read_unloads (struct dl_phdr_info *info, size_t size, void *data)
{
  *(unsigned long long *) data = info->dlpi_subs;
  return 1; /* the count is the same in every object's: the first's is enough */
}

/* Under cache_lock: the table, emptied when an object was unloaded since it was filled. */
static GHashTable *
cache_get (unsigned long long unloads)
{
  if (cache == NULL)
    cache = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  if (unloads != cache_unloads)
    {
      g_hash_table_remove_all (cache);
      cache_unloads = unloads;
    }
  return cache;
}

char *
_log_backtrace (void)
{
  gpointer frames[CAPTURE_MAX];
  int n = backtrace (frames, CAPTURE_MAX), first;
  unsigned long long unloads = 0;
  char **symbols;
  GString *out;
  GHashTable *table;
  int i;

  first = (int) memres_frames_first_caller (own_frames (), frames, (guint) MAX (n, 0));
  n = MIN (n - first, LOG_BACKTRACE_FRAMES);
  if (n <= 0)
    return g_strdup ("");
  dl_iterate_phdr (read_unloads, &unloads);
  out = g_string_sized_new (64 * (gsize) n);
  /* every frame seen before: the texts kept */
  g_mutex_lock (&cache_lock);
  table = cache_get (unloads);
  for (i = 0; i < n; i++)
    {
      const char *text = g_hash_table_lookup (table, frames[first + i]);

      if (text == NULL)
        break;
      g_string_append (out, i > 0 ? ";" : "");
      g_string_append (out, text);
    }
  g_mutex_unlock (&cache_lock);
  if (i == n)
    return g_string_free (out, FALSE);
  /* else symbolized, without the lock, and kept */
  g_string_truncate (out, 0);
  symbols = backtrace_symbols (frames + first, n);
  if (symbols == NULL)
    return g_string_free (out, FALSE);
  for (i = 0; i < n; i++)
    {
      gsize start = out->len + (i > 0);

      g_string_append (out, i > 0 ? ";" : "");
      append_frame (out, symbols[i]);
      g_mutex_lock (&cache_lock);
      table = cache_get (unloads);
      if (g_hash_table_size (table) < CACHE_MAX)
        g_hash_table_replace (table, frames[first + i],
                              g_strndup (out->str + start, out->len - start));
      g_mutex_unlock (&cache_lock);
    }
  free (symbols);
  return g_string_free (out, FALSE);
}

void
_log_backtrace_at_fork (MemresForkPhase phase)
{
  memres_fork_mutex (&cache_lock, phase);
}
