/* memres - CUDA memory resources
 * memres.h: the one header applications include. */
#pragma once

#define MEMRES_INSIDE
#include <memres/memres-version.h>
#include <memres/memres-error.h>
#include <memres/memres-types.h>
#include <memres/memres-registry.h>
#include <memres/memres-resource.h>
#include <memres/memres-buffer.h>
#include <memres/memres-ipc.h>
#include <memres/memres-adaptors.h>
#include <memres/memres-managed.h>
#include <memres/memres-segments.h>
#include <memres/memres-tags.h>
#include <memres/memres-sleep.h>
#include <memres/memres-dlpack.h>
#include <memres/memres-nccl.h>
#undef MEMRES_INSIDE
