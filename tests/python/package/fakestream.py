"""Test helpers on the fake driver (tests/fakecuda) shared by the package's tests: a stream
held until the test lets it go. Loaded with ctypes from MEMRES_CUDA_DRIVER (the fake mode)."""
import ctypes
import os


class FakeStreamHold:
    """A stream of the fake driver held by cuStreamWaitValue32 on a mapped host word until
    release(): work ordered on it, and a synchronize of it, wait meanwhile (the fake's
    asynchronous mode, on while the object lives)."""

    def __init__(self):
        self.ct = ctypes
        self.lib = ctypes.CDLL(os.environ["MEMRES_CUDA_DRIVER"])
        self.lib.cuGetProcAddress_v2.argtypes = [
            ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
            ctypes.POINTER(ctypes.c_int)]
        p, pp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        self.ctx, self.stream, self.word = p(), p(), p()
        self.dword = ctypes.c_uint64()
        assert self.call("cuInit", [ctypes.c_uint], 0) == 0
        assert self.call("cuDevicePrimaryCtxRetain", [pp, ctypes.c_int],
                         ctypes.byref(self.ctx), 0) == 0
        assert self.call("cuCtxSetCurrent", [p], self.ctx) == 0
        self.lib.fakecuda_set_async(1)
        assert self.call("cuStreamCreate", [pp, ctypes.c_uint], ctypes.byref(self.stream), 1) == 0
        # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
        assert self.call("cuMemHostAlloc", [pp, ctypes.c_size_t, ctypes.c_uint],
                         ctypes.byref(self.word), 4, 3) == 0
        assert self.call("cuMemHostGetDevicePointer",
                         [ctypes.POINTER(ctypes.c_uint64), p, ctypes.c_uint],
                         ctypes.byref(self.dword), self.word, 0) == 0
        self.flag = ctypes.cast(self.word, ctypes.POINTER(ctypes.c_uint32))
        self.flag[0] = 0

    def call(self, name, argtypes, *args):
        fn, status = self.ct.c_void_p(), self.ct.c_int()
        assert self.lib.cuGetProcAddress_v2(name.encode(), self.ct.byref(fn), 12000, 0,
                                            self.ct.byref(status)) == 0
        return self.ct.CFUNCTYPE(self.ct.c_int, *argtypes)(fn.value)(*args)

    def hold(self):
        ct = self.ct
        # CU_STREAM_WAIT_VALUE_GEQ: until the word is 1 or more
        assert self.call("cuStreamWaitValue32", [ct.c_void_p, ct.c_uint64, ct.c_uint32, ct.c_uint],
                         self.stream, self.dword.value, 1, 0) == 0

    def release(self):
        self.flag[0] = 1

    def close(self):
        ct = self.ct
        self.release()
        assert self.call("cuStreamSynchronize", [ct.c_void_p], self.stream) == 0
        self.lib.fakecuda_set_async(0)
        assert self.call("cuStreamDestroy", [ct.c_void_p], self.stream) == 0
        assert self.call("cuMemFreeHost", [ct.c_void_p], self.word) == 0
        assert self.call("cuDevicePrimaryCtxRelease", [ct.c_int], 0) == 0
