/* testutil-vmm.h: what the vmm tests share (testutil-vmm.c). */
#ifndef TESTUTIL_VMM_H
#define TESTUTIL_VMM_H

#include "testutil.h"

extern const MemresCudaDriver *drv;

gboolean require_device (void);

gsize granularity (CUmemLocationType type, CUmemAllocationGranularity_flags flag);

gsize gran (void);

MemresBuffer *allocate (MemresResource *mr, gsize size);

void close_buffer (MemresBuffer *buf);

void resize (MemresBuffer *buf, gsize size);

void write_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed);

void check_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed);

typedef struct
{
  CUdeviceptr ptr;
  gsize size;
} VmmBlocker;

VmmBlocker block_after (MemresBuffer *buf);

void unblock (VmmBlocker *b);

CUmemAccess_flags get_access (MemresBuffer *buf, int device);

MemresStats stats (MemresResource *mr);

/* memres_resource_get_tag_counts() of a counted layer (`stats`) for @tag, asserted to succeed. */
MemresTagCounts tag_counts (MemresResource *mr, const char *tag);

/* The bytes of a chunk of vmm_small_chunks_begin()'s resource, and the fake's granularity then */
#define VMM_SMALL_CHUNK ((gsize) 64 * 1024)

/* A `vmm` resource of VMM_SMALL_CHUNK chunks, with the fake's allocation granularity (minimum
 * and recommended, through fakecuda_set_granularity() of the loaded fake) lowered to that, so
 * that a buffer of thousands of chunks stays small, and the fake's counts taken first
 * (mt_fake_counts_begin()). vmm_small_chunks_end() drops the resource, asserts the fake's counts
 * back where they were and sets the granularity back. Fake only. */
typedef struct
{
  void *fake;
  void (*set) (size_t minimum, size_t recommended);
  gsize minimum, recommended;
  FakeCudaCounts base;
  MemresResource *mr;
} VmmSmallChunks;

void vmm_small_chunks_begin (VmmSmallChunks *sc);

void vmm_small_chunks_end (VmmSmallChunks *sc);

/* mt_init() of the vmm programs; against the fake, first two devices (for the peer tests) and
 * 8 GiB each (FAKECUDA_DEVICES, FAKECUDA_DEVICE_MEMORY, unless set). */
void vmm_test_init (int *argc, char ***argv);

#endif
