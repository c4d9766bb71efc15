/* stubcuda.c: a tiny stand-in for libcuda.so.1 used by tests/test-driver-loader.c to reach the
 * loader's failure paths that a real driver or the fake cannot be asked for. STUBCUDA_MODE:
 *   nodevice  cuInit returns CUDA_ERROR_NO_DEVICE (a loaded driver with no devices)
 *   initfail  cuInit returns CUDA_ERROR_INVALID_DEVICE
 *   missing   cuGetProcAddress does not know cuDeviceGetCount (a required entry point)
 * Not the fake driver (tests/fakecuda): it implements only what loading needs. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

static const char *
mode (void)
{
  const char *m = getenv ("STUBCUDA_MODE");
  return m != NULL ? m : "nodevice";
}

static CUresult
stub_init (unsigned int flags)
{
  if (strcmp (mode (), "initfail") == 0)
    return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_NO_DEVICE;
}

static CUresult
stub_driver_get_version (int *version)
{
  *version = 12030;
  return CUDA_SUCCESS;
}

/* The errors the stub returns, with the driver's name and text for each. */
static const struct
{
  CUresult code;
  const char *name;
  const char *text;
} errors[] = {
  { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
  { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
  { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
};

/* Stores the name (@text false) or text of @error in @str: CUDA_SUCCESS, or NULL and
 * CUDA_ERROR_INVALID_VALUE for an error the stub does not know. */
static CUresult
describe_error (CUresult error, int text, const char **str)
{
  size_t i;

  for (i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == error)
      {
        *str = text ? errors[i].text : errors[i].name;
        return CUDA_SUCCESS;
      }
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult
stub_get_error_name (CUresult error, const char **str)
{
  return describe_error (error, 0, str);
}

static CUresult
stub_get_error_string (CUresult error, const char **str)
{
  return describe_error (error, 1, str);
}

static CUresult
stub_not_initialized (void)
{
  return CUDA_ERROR_NOT_INITIALIZED;
}

static const struct
{
  const char *name;
  void *pfn;
} entries[] = {
  { "cuInit", (void *) stub_init },
  { "cuDriverGetVersion", (void *) stub_driver_get_version },
  { "cuGetErrorName", (void *) stub_get_error_name },
  { "cuGetErrorString", (void *) stub_get_error_string },
  { "cuDeviceGet", (void *) stub_not_initialized },
  { "cuDeviceGetCount", (void *) stub_not_initialized },
  { "cuDeviceGetAttribute", (void *) stub_not_initialized },
  { "cuDevicePrimaryCtxRetain", (void *) stub_not_initialized },
  { "cuCtxGetCurrent", (void *) stub_not_initialized },
  { "cuCtxSetCurrent", (void *) stub_not_initialized },
};

CUresult
cuGetProcAddress_v2 (const char *symbol, void **pfn, int version, cuuint64_t flags,
                     CUdriverProcAddressQueryResult *status)
{
  size_t i;

  for (i = 0; i < sizeof entries / sizeof entries[0]; i++)
    {
      if (strcmp (entries[i].name, symbol) != 0)
        continue;
      if (strcmp (mode (), "missing") == 0 && strcmp (symbol, "cuDeviceGetCount") == 0)
        break;
      *pfn = entries[i].pfn;
      if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  *pfn = NULL;
  if (status != NULL)
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
