// Constants shared by the device code of workload.cu and the host programs that launch it.
// Plain C preprocessor definitions: NVRTC compiles workload.cu with this header passed by name.
#pragma once

// blur: out[i] = (in[i-1] + HONE_BLUR_CENTER * in[i] + in[i+1]) >> HONE_BLUR_SHIFT, edges clamped.
#define HONE_BLUR_CENTER 2
#define HONE_BLUR_SHIFT 2
