/* stack-sites.c: `stack-sites LOG SNAPSHOT`: a fixed run whose allocations are made in functions
 * of known names, for the tests that read call stacks back (tests/check-trace.py,
 * tests/check-snapshot.py, tests/check-view.py; suite core, host memory): over
 * `log:path=LOG,backtrace=true>track:backtrace=true>limit:max=64KiB>host` it allocates 4 KiB in
 * stack_site_weights(), 8 KiB in stack_site_activations() and asks for 1 MiB in
 * stack_site_too_big() (an allocate failure and an out of memory in the log), writes the snapshot
 * of the two live buffers to SNAPSHOT, then closes them. The program is linked with its symbols
 * exported (-rdynamic), so that glibc's backtrace_symbols() names these functions. Exit status 0
 * when every call did what it should, 1 with the error on stderr. */
#include <memres/memres.h>

#include <stdio.h>

#define KIB 1024

/* Each site is a function of its own, not inlined, and does something after its call (no tail
 * call), so that it is a frame of the stack. */
G_GNUC_NO_INLINE MemresBuffer *stack_site_weights (MemresResource *mr, GError **error);
G_GNUC_NO_INLINE MemresBuffer *stack_site_activations (MemresResource *mr, GError **error);
G_GNUC_NO_INLINE gboolean stack_site_too_big (MemresResource *mr, GError **error);

MemresBuffer *
stack_site_weights (MemresResource *mr, GError **error)
{
  MemresBuffer *buf = memres_resource_allocate (mr, 4 * KIB, NULL, error);

  g_debug ("weights: %p", (gpointer) buf);
  return buf;
}

MemresBuffer *
stack_site_activations (MemresResource *mr, GError **error)
{
  MemresBuffer *buf = memres_resource_allocate (mr, 8 * KIB, NULL, error);

  g_debug ("activations: %p", (gpointer) buf);
  return buf;
}

/* TRUE when the request fails with MEMRES_ERROR_OUT_OF_MEMORY, as it must under the limit. */
gboolean
stack_site_too_big (MemresResource *mr, GError **error)
{
  g_autoptr (GError) oom = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, 1024 * KIB, NULL, &oom);

  if (g_error_matches (oom, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "1 MiB under a 64 KiB limit: %s",
               oom != NULL ? oom->message : "it succeeded");
  if (buf != NULL)
    memres_buffer_unref (buf);
  return FALSE;
}

static gboolean
run (const char *log, const char *snapshot, GError **error)
{
  g_autofree char *spec = g_strdup_printf (
      "log:path=%s,backtrace=true>track:backtrace=true>limit:max=64KiB>host", log);
  g_autoptr (MemresResource) mr = memres_resource_new (spec, error);
  g_autofree char *text = NULL;
  MemresBuffer *weights = NULL, *activations = NULL;
  gboolean ok;

  if (mr == NULL)
    return FALSE;
  ok = (weights = stack_site_weights (mr, error)) != NULL
       && (activations = stack_site_activations (mr, error)) != NULL
       && stack_site_too_big (mr, error) && (text = memres_resource_snapshot (mr, error)) != NULL
       && g_file_set_contents (snapshot, text, -1, error);
  if (activations != NULL)
    ok = memres_buffer_close (activations, NULL, ok ? error : NULL) && ok;
  if (weights != NULL)
    ok = memres_buffer_close (weights, NULL, ok ? error : NULL) && ok;
  g_clear_pointer (&activations, memres_buffer_unref);
  g_clear_pointer (&weights, memres_buffer_unref);
  return ok;
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  if (argc != 3)
    {
      fprintf (stderr, "usage: stack-sites LOG SNAPSHOT\n");
      return 2;
    }
  if (!run (argv[1], argv[2], &error))
    {
      fprintf (stderr, "stack-sites: %s\n", error->message);
      return 1;
    }
  return 0;
}
