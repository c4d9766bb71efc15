/* memres - CUDA memory resources
 * memres-dlpack.h: buffers exchanged with array libraries through DLPack 1.x (and exported to
 * consumers of the unversioned DLPack 0.x tensor).
 *
 * The types below are memres's own declarations of the DLPack 1.x structures, written from the
 * DLPack specification (https://dmlc.github.io/dlpack/latest/): memres ships no copy of
 * dlpack.h, and the names carry memres's prefix so that a program can include both. Their
 * layout is that of the specification's `DLManagedTensorVersioned` (and its members); the test
 * dlpack-layout compares them field by field with a real dlpack.h wherever the build finds one. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-dlpack
 * @title: DLPack
 * @short_description: buffers exchanged with array libraries through DLPack
 * @section_id: memres-memres-dlpack
 *
 * DLPack is how array libraries (PyTorch, NumPy, CuPy, JAX) hand each other memory without a
 * copy. memres_buffer_export_dlpack() gives a buffer to such a library as a DLPack 1.x
 * #MemresDLManagedTensorVersioned (memres_buffer_export_dlpack_unversioned() the unversioned
 * #MemresDLManagedTensor of DLPack 0.x) that keeps a reference on the buffer until the consumer
 * calls its deleter; memres_buffer_new_for_dlpack() wraps a producer's tensor as a buffer.
 *
 * |[<!-- language="C" -->
 * MemresDLDataType f32 = { MEMRES_DL_FLOAT, 32, 1 };
 * gint64 shape[] = { 1024, 1024 };
 * MemresDLManagedTensorVersioned *t =
 *     memres_buffer_export_dlpack (buf, f32, 2, shape, NULL, 0, &error);
 * ]|
 *
 * The types here are memres's own declarations of the DLPack structures, written from the
 * specification (memres ships no `dlpack.h`) with the same layout, so that a program can include
 * both. The functions are thread-safe.
 */

/**
 * MEMRES_DLPACK_MAJOR_VERSION:
 *
 * The DLPack major version memres reads and writes (1). A tensor of another major version is
 * refused by memres_buffer_new_for_dlpack().
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_MAJOR_VERSION 1
/**
 * MEMRES_DLPACK_MINOR_VERSION:
 *
 * The DLPack minor version memres writes into the tensors it exports (0: memres uses nothing
 * that later minor versions added). Any minor version is read.
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_MINOR_VERSION 0

/**
 * MEMRES_DLPACK_MAX_NDIM:
 *
 * The most dimensions memres accepts in a tensor (DLPack sets no limit; memres refuses more
 * than this many as a forged or corrupt tensor).
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_MAX_NDIM 64

/**
 * MEMRES_DLPACK_FLAG_READ_ONLY:
 *
 * A bit of #MemresDLManagedTensorVersioned.flags (the specification's
 * `DLPACK_FLAG_BITMASK_READ_ONLY`): the consumer must not write the tensor's memory.
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_FLAG_READ_ONLY (G_GUINT64_CONSTANT (1) << 0)
/**
 * MEMRES_DLPACK_FLAG_IS_COPIED:
 *
 * A bit of #MemresDLManagedTensorVersioned.flags (the specification's
 * `DLPACK_FLAG_BITMASK_IS_COPIED`): the producer made the tensor's memory as a copy for this
 * exchange, so the consumer may keep or modify it without affecting anyone else.
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_FLAG_IS_COPIED (G_GUINT64_CONSTANT (1) << 1)
/**
 * MEMRES_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED:
 *
 * A bit of #MemresDLManagedTensorVersioned.flags (the specification's
 * `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`): elements of fewer than 8 bits are each padded
 * to a byte.
 *
 * Since: 1.2
 */
#define MEMRES_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED (G_GUINT64_CONSTANT (1) << 2)

/**
 * MemresDLDeviceType:
 * @MEMRES_DL_CPU: host memory (`kDLCPU`)
 * @MEMRES_DL_CUDA: CUDA device memory (`kDLCUDA`)
 * @MEMRES_DL_CUDA_HOST: page-locked host memory that CUDA devices reach (`kDLCUDAHost`)
 * @MEMRES_DL_CUDA_MANAGED: CUDA managed (unified) memory (`kDLCUDAManaged`)
 *
 * The DLPack device types memres exports and wraps, with the specification's values. Every
 * other device type (OpenCL, Vulkan, ROCm, ...) is refused with %MEMRES_ERROR_NOT_SUPPORTED.
 *
 * Since: 1.2
 */
typedef enum
{
  MEMRES_DL_CPU = 1,
  MEMRES_DL_CUDA = 2,
  MEMRES_DL_CUDA_HOST = 3,
  MEMRES_DL_CUDA_MANAGED = 13,
} MemresDLDeviceType;

/**
 * MemresDLDataTypeCode:
 * @MEMRES_DL_INT: signed integer (`kDLInt`)
 * @MEMRES_DL_UINT: unsigned integer (`kDLUInt`)
 * @MEMRES_DL_FLOAT: IEEE floating point (`kDLFloat`)
 * @MEMRES_DL_OPAQUE_HANDLE: an opaque handle (`kDLOpaqueHandle`)
 * @MEMRES_DL_BFLOAT: bfloat16 (`kDLBfloat`)
 * @MEMRES_DL_COMPLEX: complex, the real and imaginary parts one after the other (`kDLComplex`)
 * @MEMRES_DL_BOOL: boolean (`kDLBool`)
 *
 * The type codes of the DLPack specification (`kDLInt` ... `kDLBool`). memres only needs the
 * element size (bits × lanes) and carries the code through unchanged.
 *
 * Since: 1.2
 */
typedef enum
{
  MEMRES_DL_INT = 0,
  MEMRES_DL_UINT = 1,
  MEMRES_DL_FLOAT = 2,
  MEMRES_DL_OPAQUE_HANDLE = 3,
  MEMRES_DL_BFLOAT = 4,
  MEMRES_DL_COMPLEX = 5,
  MEMRES_DL_BOOL = 6,
} MemresDLDataTypeCode;

typedef struct _MemresDLDevice MemresDLDevice;

/**
 * MemresDLDevice:
 * @device_type: a DLPack device type (#MemresDLDeviceType for those memres knows); a 32-bit
 *   integer, the size of the specification's enum
 * @device_id: the device ordinal (0 for host and pinned memory)
 *
 * Where a tensor's memory lives: the specification's `DLDevice`.
 *
 * Since: 1.2
 */
struct _MemresDLDevice
{
  gint32 device_type;
  gint32 device_id;
};

typedef struct _MemresDLDataType MemresDLDataType;

/**
 * MemresDLDataType:
 * @code: a #MemresDLDataTypeCode
 * @bits: bits of one lane (8, 16, 32, 64, ...)
 * @lanes: lanes of one element (1 for scalars)
 *
 * The type of a tensor's elements: the specification's `DLDataType`. An element takes
 * @bits × @lanes bits.
 *
 * Since: 1.2
 */
struct _MemresDLDataType
{
  guint8 code;
  guint8 bits;
  guint16 lanes;
};

typedef struct _MemresDLTensor MemresDLTensor;

/**
 * MemresDLTensor:
 * @data: the base address (a host pointer or a `CUdeviceptr`)
 * @device: where the memory lives
 * @ndim: number of dimensions (0 for a scalar)
 * @dtype: the element type
 * @shape: @ndim extents
 * @strides: (nullable): @ndim strides in elements, or %NULL for a compact row-major tensor
 * @byte_offset: bytes from @data to the first element
 *
 * The specification's `DLTensor`.
 *
 * Since: 1.2
 */
struct _MemresDLTensor
{
  gpointer data;
  MemresDLDevice device;
  gint32 ndim;
  MemresDLDataType dtype;
  gint64 *shape;
  gint64 *strides;
  guint64 byte_offset;
};

typedef struct _MemresDLPackVersion MemresDLPackVersion;

/**
 * MemresDLPackVersion:
 * @major: %MEMRES_DLPACK_MAJOR_VERSION for tensors memres reads
 * @minor: any
 *
 * The DLPack version a producer wrote into a tensor: the specification's `DLPackVersion`.
 *
 * Since: 1.2
 */
struct _MemresDLPackVersion
{
  guint32 major;
  guint32 minor;
};

typedef struct _MemresDLManagedTensorVersioned MemresDLManagedTensorVersioned;

/**
 * MemresDLManagedTensorVersioned:
 * @version: the DLPack version the producer wrote
 * @manager_ctx: the producer's context (for memres's tensors: the buffer)
 * @deleter: (nullable): called once by the consumer when it is done with the tensor
 * @flags: %MEMRES_DLPACK_FLAG_READ_ONLY, ...
 * @dl_tensor: the tensor
 *
 * The specification's `DLManagedTensorVersioned`.
 *
 * Since: 1.2
 */
struct _MemresDLManagedTensorVersioned
{
  MemresDLPackVersion version;
  gpointer manager_ctx;
  void (*deleter) (MemresDLManagedTensorVersioned *self);
  guint64 flags;
  MemresDLTensor dl_tensor;
};

typedef struct _MemresDLManagedTensor MemresDLManagedTensor;

/**
 * MemresDLManagedTensor:
 * @dl_tensor: the tensor
 * @manager_ctx: the producer's context (for memres's tensors: the buffer)
 * @deleter: (nullable): called once by the consumer when it is done with the tensor
 *
 * The specification's unversioned `DLManagedTensor` of DLPack before 1.0 (no version, no
 * flags), what a consumer gets when it calls `__dlpack__` without `max_version` (the capsule
 * name is then `"dltensor"`). memres exports it (memres_buffer_export_dlpack_unversioned())
 * for such consumers; it does not wrap it.
 *
 * Since: 1.2
 */
struct _MemresDLManagedTensor
{
  MemresDLTensor dl_tensor;
  gpointer manager_ctx;
  void (*deleter) (MemresDLManagedTensor *self);
};

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-dlpack. */
MemresDLManagedTensorVersioned *memres_buffer_export_dlpack (MemresBuffer *buf,
                                                             MemresDLDataType dtype, gint ndim,
                                                             const gint64 *shape,
                                                             const gint64 *strides,
                                                             guint64 byte_offset, GError **error);
MemresDLManagedTensor *
memres_buffer_export_dlpack_unversioned (MemresBuffer *buf, MemresDLDataType dtype, gint ndim,
                                         const gint64 *shape, const gint64 *strides,
                                         guint64 byte_offset, GError **error);
MemresBuffer *memres_buffer_new_for_dlpack (MemresDLManagedTensorVersioned *tensor, GError **error);

G_END_DECLS
