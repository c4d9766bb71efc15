/* memres - CUDA memory resources
 * thread.c: the calling thread's hot-path state (MemresThread, declared in hot-path.h, the header
 * of the allocate/close pair, so that the pair's walk reads no other), defined once for the files
 * that use its parts: buffer.c (the spare buffer structures), counting.c (the stripe), tags.c
 * (the scope and the call record). Each part's thread-exit handler is its own file's. */
#include "memres-private.h"

__thread MemresThread _memres_thread __attribute__ ((tls_model ("initial-exec")));
G_STATIC_ASSERT (sizeof (MemresThread) <= 64);
