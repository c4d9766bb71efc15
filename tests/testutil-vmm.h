/* testutil-vmm.h: what the vmm tests share (testutil-vmm.c). */
#ifndef TESTUTIL_VMM_H
#define TESTUTIL_VMM_H

#include "testutil.h"

extern const MemresCudaDriver *drv;

void counts_begin (FakeCudaCounts *baseline);

gboolean require_device (void);

gsize granularity (CUmemLocationType type, CUmemAllocationGranularity_flags flag);

gsize gran (void);

MemresResource *vmm_new (const char *format, ...) G_GNUC_PRINTF (1, 2);

MemresResource *vmm_new (const char *format, ...);

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

#endif
