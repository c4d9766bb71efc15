/* memres - CUDA memory resources
 * dlopen-count.h: what the instruction counters (pair-count.c, lookup-count.c) share: the
 * library opened with dlopen() from the path given, its functions found by name, and the
 * resource of the spec given, each failure a message on stderr and exit 1. No memres header:
 * the counters run against any build tree, old ones included. Not installed. */
#ifndef MEMRES_DLOPEN_COUNT_H
#define MEMRES_DLOPEN_COUNT_H

/* Opens the library at @path (RTLD_NOW | RTLD_GLOBAL) and makes the resource of @spec with its
 * memres_resource_new(); the library in *@lib. Messages name @program. Exits 1 on failure. */
void *count_open (const char *program, const char *path, const char *spec, void **lib);

/* The function @name of @lib (dlsym); exits 1 with a message naming @program without it. */
void *count_need (const char *program, void *lib, const char *name);

#endif
