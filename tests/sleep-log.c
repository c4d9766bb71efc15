/* sleep-log.c: `sleep-log LOG`: a fixed run that sleeps and wakes under a `log` layer, for
 * tests/check-sleep-log.py (suite fake): over `log:tags=true,segments=true>vmm` it allocates two
 * buffers of tag "kv" (2 and 4 MiB) and one of tag "w" (2 MiB), puts "kv" to sleep with the
 * backup policy and wakes it, puts "w" to sleep (discard) and wakes it, then closes the three
 * buffers. Exit status 0 when every call succeeded, 1 with the error on stderr. */
#include <memres/memres.h>

#include <stdio.h>

#define MIB (1024 * 1024)

static MemresBuffer *
alloc_tagged (MemresResource *mr, const char *tag, gsize size, GError **error)
{
  MemresBuffer *buf;

  if (!memres_tag_push (tag, error))
    return NULL;
  buf = memres_resource_allocate (mr, size, NULL, error);
  memres_tag_pop (tag, NULL);
  return buf;
}

static gboolean
run (const char *log, GError **error)
{
  g_autofree char *spec = g_strdup_printf ("log:path=%s,tags=true,segments=true>vmm", log);
  g_autoptr (MemresResource) mr = memres_resource_new (spec, error);
  g_autoptr (MemresSleepPolicy) backup = NULL;
  MemresBuffer *bufs[3] = { NULL, NULL, NULL };
  gboolean ok;

  if (mr == NULL || (backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, error)) == NULL)
    return FALSE;
  ok = (bufs[0] = alloc_tagged (mr, "kv", 2 * MIB, error)) != NULL
       && (bufs[1] = alloc_tagged (mr, "kv", 4 * MIB, error)) != NULL
       && (bufs[2] = alloc_tagged (mr, "w", 2 * MIB, error)) != NULL
       && memres_resource_sleep (mr, "kv", backup, NULL, error)
       && memres_resource_wake (mr, "kv", NULL, error)
       && memres_resource_sleep (mr, "w", NULL, NULL, error)
       && memres_resource_wake (mr, "w", NULL, error);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      {
        ok = memres_buffer_close (bufs[i], NULL, ok ? error : NULL) && ok;
        memres_buffer_unref (bufs[i]);
      }
  return ok;
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  if (argc != 2)
    {
      fprintf (stderr, "usage: sleep-log LOG\n");
      return 2;
    }
  if (!run (argv[1], &error))
    {
      fprintf (stderr, "sleep-log: %s\n", error != NULL ? error->message : "failed");
      return 1;
    }
  return 0;
}
