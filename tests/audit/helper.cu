// A device function defined in another file: needs -rdc and the device link.
__device__ float twice(float x) { return 2.0f * x; }
