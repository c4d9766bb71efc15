/* allocate-by-name: the README's application, built with the project so that it keeps
 * compiling. Allocates SIZE bytes from the resource named by SPEC (default: the default
 * resource of device 0), fills them, reads them back and checks every byte.
 *
 *   allocate-by-name [SPEC [SIZE]]
 */
#include <memres/memres.h>

#include <stdio.h>
#include <stdlib.h>

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  g_autofree guint8 *back = NULL;
  guint64 size = 1 << 20;

  if (argc > 2 && !memres_parse_size (argv[2], &size, &error))
    {
      fprintf (stderr, "allocate-by-name: %s\n", error->message);
      return 2;
    }
  mr = argc > 1 ? memres_resource_new (argv[1], &error) : memres_resource_get_default (0, &error);
  if (mr == NULL)
    {
      fprintf (stderr, "allocate-by-name: %s\n", error->message);
      return 1;
    }
  buf = memres_resource_allocate (mr, (gsize) size, NULL, &error);
  back = g_malloc (MAX (size, 1));
  if (buf == NULL || !memres_buffer_fill (buf, 0xab, 1, NULL, &error)
      || !memres_buffer_read (buf, 0, back, (gsize) size, NULL, &error)
      || !memres_buffer_close (buf, NULL, &error))
    {
      fprintf (stderr, "allocate-by-name: %s\n", error->message);
      return 1;
    }
  for (guint64 i = 0; i < size; i++)
    if (back[i] != 0xab)
      {
        fprintf (stderr, "allocate-by-name: byte %" G_GUINT64_FORMAT " reads 0x%02x\n", i, back[i]);
        return 1;
      }
  printf ("%s: %" G_GUINT64_FORMAT " bytes allocated, filled and checked\n",
          memres_resource_get_kind_name (mr), size);
  return 0;
}
