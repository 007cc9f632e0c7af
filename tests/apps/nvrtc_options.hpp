// How hone-testapp-nvrtc calls NVRTC: what a shim that captures NVRTC sources must report back.
#pragma once

namespace testapp {

inline constexpr const char* k_nvrtc_program_name = "workload.cu";
inline constexpr const char* k_nvrtc_header_name = "workload_params.h";
inline constexpr const char* k_nvrtc_options[] = {"--gpu-architecture=compute_75",
                                                  "-DHONE_TESTAPP_NVRTC=1"};
inline constexpr int k_nvrtc_option_count = 2;

} // namespace testapp
