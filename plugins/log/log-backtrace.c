/* memres - CUDA memory resources
 * log-backtrace.c: the `log` adaptor's Backtrace column (`backtrace=true`): the call stack of
 * the allocation a line is for, captured with glibc's backtrace(), memres's own frames left out
 * (every frame up to the outermost one in libmemres or in this plugin: the stack starts at the
 * caller of memres_resource_allocate()), at most LOG_BACKTRACE_FRAMES frames, each symbolized as
 * glibc's backtrace_symbols() writes it ("object(function+0xoffset) [0xaddress]") and cut at
 * LOG_FRAME_MAX bytes; innermost first, separated by ';', with '%', ',', ';' and the control
 * bytes of a frame written %XX (two upper-case hex digits), so that the field holds no comma and
 * a reader splits it at every ';' (tools/log-csv.c reads it back). */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include "log-backtrace.h"

#include <execinfo.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

/* frames captured: memres's own (a stack of adaptors: a few each) and the caller's */
#define CAPTURE_MAX 64
#define RANGES_MAX  16

typedef struct
{
  guintptr start, end;
} Range;

/* the executable segments of libmemres and of this plugin, found once */
static Range ranges[RANGES_MAX];
static guint n_ranges;

typedef struct
{
  guintptr anchors[2];
} Anchors;

static int
on_object (struct dl_phdr_info *info, size_t size, void *data)
{
  const Anchors *a = data;

  for (int i = 0; i < info->dlpi_phnum; i++)
    {
      const ElfW (Phdr) *ph = &info->dlpi_phdr[i];
      guintptr start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
      gboolean mine = FALSE;

      if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
        continue;
      for (guint k = 0; k < G_N_ELEMENTS (a->anchors); k++)
        mine = mine || (a->anchors[k] >= start && a->anchors[k] < end);
      if (mine && n_ranges < RANGES_MAX)
        ranges[n_ranges++] = (Range){ start, end };
    }
  return 0;
}

static void
find_ranges (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      /* a function of libmemres and one of this plugin: the objects they are in */
      Anchors a = { { (guintptr) memres_upstream_allocate, (guintptr) _log_backtrace } };

      dl_iterate_phdr (on_object, &a);
      g_once_init_leave (&once, 1);
    }
}

static gboolean
is_memres (gpointer frame)
{
  guintptr pc = (guintptr) frame;

  for (guint i = 0; i < n_ranges; i++)
    if (pc >= ranges[i].start && pc < ranges[i].end)
      return TRUE;
  return FALSE;
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

      if (c == '%' || c == ',' || c == ';' || c < 0x20 || c == 0x7f)
        g_string_append_printf (out, "%%%02X", c);
      else
        g_string_append_c (out, (char) c);
    }
}

char *
_log_backtrace (void)
{
  gpointer frames[CAPTURE_MAX];
  int n = backtrace (frames, CAPTURE_MAX), first = 0;
  char **symbols;
  GString *out;

  find_ranges ();
  for (int i = 0; i < n; i++)
    if (is_memres (frames[i]))
      first = i + 1;
  n = MIN (n - first, LOG_BACKTRACE_FRAMES);
  if (n <= 0)
    return g_strdup ("");
  symbols = backtrace_symbols (frames + first, n);
  if (symbols == NULL)
    return g_strdup ("");
  out = g_string_sized_new (64 * (gsize) n);
  for (int i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append_c (out, ';');
      append_frame (out, symbols[i]);
    }
  free (symbols);
  return g_string_free (out, FALSE);
}
