/* lookup-other-layout.c: for test-lookup-other-layout (tests/test-lookup.c built again), a
 * memres_lookup_index of its own, which the program's references bind to in place of
 * libmemres's (libmemres itself does not read it): a layout that memres-lookup-inline.h does not
 * know, as a later libmemres's would be, leading to no index at all. memres_lookup_inline() must
 * then call memres_lookup() for every address and read nothing through @words (a read of it
 * would crash). In a file of its own, so that the compiler of test-lookup.c cannot see its
 * value. */
#include <memres/memres-lookup-inline.h>

const MemresLookupIndex memres_lookup_index = { MEMRES_LOOKUP_LAYOUT + 1, 0, NULL };
