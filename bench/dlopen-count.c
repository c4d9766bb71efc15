/* memres - CUDA memory resources
 * dlopen-count.c: the library and the resource of the instruction counters (dlopen-count.h). */
#include "dlopen-count.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*ResourceNew) (const char *spec, void **error);

void *
count_need (const char *program, void *lib, const char *name)
{
  void *f = dlsym (lib, name);

  if (f == NULL)
    {
      fprintf (stderr, "%s: %s: %s\n", program, name, dlerror ());
      exit (1);
    }
  return f;
}

void *
count_open (const char *program, const char *path, const char *spec, void **lib)
{
  void *mr;

  *lib = dlopen (path, RTLD_NOW | RTLD_GLOBAL);
  if (*lib == NULL)
    {
      fprintf (stderr, "%s: %s\n", program, dlerror ());
      exit (1);
    }
  mr = ((ResourceNew) count_need (program, *lib, "memres_resource_new")) (spec, NULL);
  if (mr == NULL)
    {
      fprintf (stderr, "%s: cannot create \"%s\"\n", program, spec);
      exit (1);
    }
  return mr;
}
