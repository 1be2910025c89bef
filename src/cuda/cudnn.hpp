// cuDNN, found at run time: libcudnn.so.9 is opened with dlopen on first use (never a link
// dependency, so libember_cuda.so loads where cuDNN is absent) and the few functions the
// convolution launcher calls (kernels/conv.cpp) are looked up in it. EMBER_CUDA_CUDNN=0
// leaves it unloaded, so convolution takes the unfold + matmul path (the tests use it to
// keep that path covered). Built only where the build found cudnn.h (EMBER_CUDA_HAS_CUDNN).
#pragma once

#include <string>

#if defined(EMBER_CUDA_HAS_CUDNN)
#include <cudnn.h>
#endif

namespace ember::cuda::cudnn {

#if defined(EMBER_CUDA_HAS_CUDNN)
// The functions used, as pointers into the loaded library.
struct Api {
#define EMBER_CUDNN_FN(name) decltype(&::name) name = nullptr;
#define EMBER_CUDNN_FUNCTIONS(X)                   \
  X(cudnnGetVersion)                               \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensorNdDescriptor)                    \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilterNdDescriptor)                    \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolutionNdDescriptor)               \
  X(cudnnSetConvolutionGroupCount)                 \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnFindConvolutionForwardAlgorithmEx)        \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)   \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnConvolutionBackwardFilter)
  EMBER_CUDNN_FUNCTIONS(EMBER_CUDNN_FN)
#undef EMBER_CUDNN_FN
};

// The loaded library's functions, or nullptr where cuDNN is disabled, missing or too old
// (a major version other than the headers'), with why in reason().
const Api* api();
#endif

// Whether convolutions can run through cuDNN here (api() found everything).
bool available();
// Why not (EMBER_CUDA_CUDNN=0, dlopen's message, a missing symbol); the version when it is.
std::string reason();

}  // namespace ember::cuda::cudnn
